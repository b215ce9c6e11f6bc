//! An append ticket's readout borrows it, like any ticket's.
use sized_readback::cudarc::driver::CudaStream;
use sized_readback::{AppendReadback, ColumnReadout};

fn rows<'a>(rb: &'a AppendReadback, s: &CudaStream) -> ColumnReadout<'a> {
    let ticket = rb.append(s, |_desc| Ok(())).unwrap();
    ticket.wait().unwrap()
}

fn main() {
    let _ = rows;
}
