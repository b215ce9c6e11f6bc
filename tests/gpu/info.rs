//! `info()` is the one source of a readback's settings; the shortcut accessors it replaced are
//! deprecated but still answer, and must answer as `info()` does.
// The one place that calls the deprecated accessors: it proves they still agree with info().
#![allow(deprecated)]
use anyhow::{ensure, Result};
use cudarc::driver::CudaContext;
use sized_readback::{
    AppendReadback, BucketReadback, ColumnReadback, ColumnSchema, GraphReadback, Readback,
    ReadbackConfig, Transport, WaitMode,
};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![deprecated_accessors_agree];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// Every deprecated accessor of every readback type returns the field of `info()` it names,
/// on settings away from the defaults (so a field read from the wrong place would differ).
fn deprecated_accessors_agree() -> Result<()> {
    let ctx = ctx();
    let mut schema = ColumnSchema::new();
    schema.column::<f64>();
    schema.column::<u32>();
    let staged = ReadbackConfig::new(40)
        .slots(3)
        .transport(Transport::Staged)
        .wait(WaitMode::Event);

    let rb = Readback::<f64>::with_config(&ctx, staged.clone())?;
    let i = rb.info();
    ensure!((rb.capacity(), rb.slots()) == (i.capacity, i.slots));
    ensure!((rb.transport(), rb.wait_mode()) == (i.transport, i.wait_mode));
    ensure!(rb.layout() == i.layout && rb.launch_shape() == i.launch_shape);
    ensure!(Arc::ptr_eq(&rb.context(), &i.context));
    ensure!((i.capacity, i.slots, i.transport) == (40, 3, Transport::Staged));
    ensure!(i.wait_mode == WaitMode::Event);

    let cols = ColumnReadback::new(&ctx, &schema, staged.clone())?;
    let i = cols.info();
    ensure!((cols.capacity(), cols.slots()) == (i.capacity, i.slots));
    ensure!((cols.transport(), cols.wait_mode()) == (i.transport, i.wait_mode));
    ensure!(cols.layout() == i.layout && cols.launch_shape() == i.launch_shape);
    ensure!(Arc::ptr_eq(&cols.context(), &i.context));

    let buckets = BucketReadback::new(&ctx, &schema, staged.clone().buckets(5))?;
    let i = buckets.info();
    ensure!((buckets.buckets(), buckets.capacity()) == (i.buckets, i.capacity));
    ensure!(buckets.slots() == i.slots && buckets.layout() == i.layout);
    ensure!((i.buckets, i.capacity) == (5, 40));

    let append = AppendReadback::new(&ctx, &schema, staged.spill(24))?;
    let i = append.info();
    ensure!((append.capacity(), append.slots()) == (i.capacity, i.slots));
    ensure!(append.spill_capacity() == i.spill_capacity && i.spill_capacity == 24);
    ensure!((append.transport(), append.wait_mode()) == (i.transport, i.wait_mode));
    ensure!(append.layout() == i.layout);
    ensure!(Arc::ptr_eq(&append.context(), &i.context));

    let graph = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(56).slots(4))?;
    let i = graph.info();
    ensure!((graph.capacity(), graph.slots()) == (i.capacity, i.slots));
    ensure!(*graph.layout() == i.layout);
    ensure!(Arc::ptr_eq(graph.context(), &i.context));
    ensure!((i.capacity, i.slots) == (56, 4));
    Ok(())
}
