//! What bindings use to work beside other CUDA code, on a GPU: `device::ContextGuard` puts
//! back the caller's current context after the library's calls bind theirs, and `StreamJoin`
//! orders one raw stream after another (the Python binding joins its producers' streams with
//! it).
use anyhow::{ensure, Result};
use cudarc::driver::sys;
use cudarc::driver::CudaContext;
use cudarc::driver::DevicePtr;
use sized_readback::device::{self, ContextGuard};
use sized_readback::{RawCount, Readback, StreamJoin};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![
    a_context_guard_puts_back_the_callers_context,
    a_stream_join_orders_the_readback_after_the_producer,
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn current() -> sys::CUcontext {
    let mut c: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the driver is loaded (the context is open).
    let status = unsafe { sys::cuCtxGetCurrent(&mut c) };
    assert_eq!(status, sys::CUresult::CUDA_SUCCESS);
    c
}

fn a_context_guard_puts_back_the_callers_context() -> Result<()> {
    let ctx = ctx();
    // No context current, as in a thread that has made no CUDA call.
    // SAFETY: unbinding is always allowed.
    unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
    {
        let _restore = ContextGuard::save();
        let rb = Readback::<f64>::new(&ctx, 64)?;
        ensure!(current() == ctx.cu_ctx(), "the library binds its context");
        drop(rb);
    }
    ensure!(current().is_null(), "the guard put back no context");
    // Where the readback's context is current already, the guard has nothing to restore.
    device::bind(&ctx)?;
    {
        let _restore = ContextGuard::save_unless(&ctx);
        let _rb = Readback::<f64>::new(&ctx, 64)?;
    }
    ensure!(current() == ctx.cu_ctx());
    Ok(())
}

fn a_stream_join_orders_the_readback_after_the_producer() -> Result<()> {
    let ctx = ctx();
    let (producer, consumer) = (ctx.new_stream()?, ctx.new_stream()?);
    let n = 1 << 20;
    let rb = Readback::<u32>::new(&ctx, n)?;
    let join = StreamJoin::new(&ctx)?;
    let mut data = consumer.alloc_zeros::<u32>(n)?;
    let count = consumer.clone_htod(&[n as u32])?;
    consumer.synchronize()?;
    let host: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5a5a_5a5a).collect();
    for round in 0..4u32 {
        let values: Vec<u32> = host.iter().map(|v| v.wrapping_add(round)).collect();
        // The producer's copy, then the join: the readback on the consumer stream after it.
        producer.memcpy_htod(&values, &mut data)?;
        device::bind(&ctx)?;
        // SAFETY: both are live streams of `ctx`, which is bound.
        unsafe { join.join(consumer.cu_stream(), producer.cu_stream())? };
        // The raw enqueue: no cudarc event tracking orders it after the producer's copy, only
        // the join.
        let (ptr, cptr) = (raw_ptr(&data, &producer), raw_ptr(&count, &producer));
        // SAFETY: device memory of `ctx`, allocated and unwritten until the wait below.
        let ticket = unsafe { rb.enqueue_raw(&consumer, None, ptr, n, RawCount::u32(cptr))? };
        let out = ticket.wait()?;
        ensure!(out.count() == n && out[..] == values[..], "round {round}");
    }
    Ok(())
}

/// `buf`'s device address, without leaving a tracking event behind on `stream`'s work.
fn raw_ptr<T>(
    buf: &cudarc::driver::CudaSlice<T>,
    stream: &Arc<cudarc::driver::CudaStream>,
) -> sys::CUdeviceptr {
    let (ptr, guard) = buf.device_ptr(stream);
    drop(guard);
    ptr
}
