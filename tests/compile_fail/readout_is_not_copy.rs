//! A readout is the borrow of its slot: it is not `Copy`, so handing it on moves it.
use sized_readback::{ColumnReadout, ColumnTicket};

fn twice(t: &ColumnTicket) -> (ColumnReadout<'_>, ColumnReadout<'_>) {
    let r = t.wait().unwrap();
    (r, r)
}

fn main() {
    let _ = twice;
}
