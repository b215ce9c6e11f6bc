//! `Ok(*replay)` would copy the readout out of the replay, past its release. A replay does not
//! dereference to a readout, and a readout is not `Copy`.
use sized_readback::{ColumnReadout, GraphReadback};

fn copy_out(g: &GraphReadback) -> sized_readback::Result<ColumnReadout<'_>> {
    let replay = g.next()?;
    Ok(*replay)
}

fn main() {
    let _ = copy_out;
}
