//! A readout borrows its ticket: it cannot outlive it (the slot is released when the ticket
//! drops, and the next readback may write into it).
use sized_readback::cudarc::driver::{CudaSlice, CudaStream};
use sized_readback::Readback;

fn first(rb: &Readback<f64>, s: &CudaStream, d: &CudaSlice<f64>, n: &CudaSlice<i32>) -> f64 {
    let out = {
        let ticket = rb.enqueue(s, d, n).unwrap();
        ticket.wait().unwrap()
    };
    out[0]
}

fn main() {
    let _ = first;
}
