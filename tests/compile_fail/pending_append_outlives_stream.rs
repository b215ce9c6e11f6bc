//! A reserved append borrows the stream its completion is recorded on: the stream cannot be
//! dropped before the append is marked launched.
use sized_readback::AppendReadback;
use std::sync::Arc;

fn gone(rb: &AppendReadback, ctx: &Arc<sized_readback::cudarc::driver::CudaContext>) {
    let stream = ctx.new_stream().unwrap();
    let pending = rb.begin(&stream, None).unwrap();
    drop(stream);
    let _ = pending.launched();
}

fn main() {
    let _ = gone;
}
