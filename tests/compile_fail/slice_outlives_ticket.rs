//! A slice of a readout lives no longer than the ticket that holds its slot.
use sized_readback::cudarc::driver::{CudaSlice, CudaStream};
use sized_readback::Readback;

fn data<'a>(rb: &'a Readback<f64>, s: &CudaStream, d: &CudaSlice<f64>, n: &CudaSlice<i32>) -> &'a [f64] {
    let ticket = rb.enqueue(s, d, n).unwrap();
    let slice = ticket.wait().unwrap().as_slice();
    slice
}

fn main() {
    let _ = data;
}
