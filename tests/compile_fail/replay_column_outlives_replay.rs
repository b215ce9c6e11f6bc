//! A column of a graph replay escaping the replay, whose drop releases the
//! slot to the device. It must not compile.
use sized_readback::{Column, GraphReadback};

fn escape(g: &GraphReadback, pos: Column<f64>) -> &[f64] {
    let d = {
        let r = g.next().unwrap();
        r.column(pos)
    };
    d
}

fn main() {
    let _ = escape;
}
