//! The ticket cannot be dropped (or sent to another thread) while its readout is in use.
use sized_readback::cudarc::driver::{CudaSlice, CudaStream};
use sized_readback::Readback;

fn race(rb: &Readback<f64>, s: &CudaStream, d: &CudaSlice<f64>, n: &CudaSlice<i32>) {
    let ticket = rb.enqueue(s, d, n).unwrap();
    let out = ticket.wait().unwrap();
    std::thread::spawn(move || drop(ticket));
    println!("{}", out[0]);
}

fn main() {
    let _ = race;
}
