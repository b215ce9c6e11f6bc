//! Host cost of one enqueue, and of the driver calls it is made of: the "why" behind the
//! enqueue target. Each call is timed alone with the stream otherwise idle, then drained.
use crate::cuda::{self, Event};
use crate::data::Costs;
use crate::stats::Summary;
use crate::sweep::{Approach, Rig};
use anyhow::Result;
use sized_readback::cudarc::driver::sys;
use sized_readback::testing::Kernel;
use sized_readback::LaunchShape;
use std::collections::BTreeMap;
use std::time::Instant;

/// The crate's safe enqueue, alone on an idle stream (the producer finished before it).
pub const ENQUEUE: &str = "Readback::enqueue (safe API)";
/// The crate's safe enqueue right after the producer's launch (the producer may still run).
pub const ENQUEUE_AFTER_LAUNCH: &str = "Readback::enqueue (safe API), after the producer's launch";
/// The crate's enqueue through checked raw pointers, idle stream.
pub const ENQUEUE_RAW: &str = "Readback::enqueue_raw (checked raw pointers)";
/// A plain launch of the producer.
pub const PRODUCER_LAUNCH: &str = "cuLaunchKernelEx (producer, 1 block)";
/// The driver calls of one enqueue and nothing else.
pub const DRIVER_FLOOR: &str = "driver floor of one enqueue (5 calls, idle stream)";
/// One event record.
pub const EVENT_RECORD: &str = "cuEventRecord";
/// One stream wait on an event.
pub const STREAM_WAIT: &str = "cuStreamWaitEvent";
/// One query of a completed event.
pub const EVENT_QUERY: &str = "cuEventQuery (completed event)";
/// One pointer-attribute lookup.
pub const POINTER_ATTRIBUTES: &str = "cuPointerGetAttributes";
/// One 8-byte device-to-host copy's enqueue.
pub const SMALL_COPY: &str = "cuMemcpyDtoHAsync (8 bytes)";
/// The crate's safe enqueue on its staged readback with the sized copy, idle stream.
pub const ENQUEUE_SIZED: &str = "Readback::enqueue, staged sized copy (safe API)";
/// The driver calls of one sized staged enqueue and nothing else.
pub const SIZED_DRIVER_FLOOR: &str =
    "driver floor of one sized staged enqueue (6 calls, idle stream)";

/// Every call [`measure`] times (the keys of [`Costs::calls`]).
pub const CALLS: [&str; 12] = [
    ENQUEUE,
    ENQUEUE_AFTER_LAUNCH,
    ENQUEUE_RAW,
    PRODUCER_LAUNCH,
    DRIVER_FLOOR,
    EVENT_RECORD,
    STREAM_WAIT,
    EVENT_QUERY,
    POINTER_ATTRIBUTES,
    SMALL_COPY,
    ENQUEUE_SIZED,
    SIZED_DRIVER_FLOOR,
];

/// The driver calls every enqueue makes before its launch, as the crate makes them: the
/// current context, the capture check of `s`, its id. Part of both driver floors.
fn enqueue_prologue(s: sys::CUstream) -> Result<()> {
    let mut current: sys::CUcontext = std::ptr::null_mut();
    let mut capturing = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    // SAFETY: valid out-pointers; `s` is a live stream of the current context.
    unsafe {
        cuda::check(sys::cuCtxGetCurrent(&mut current), "cuCtxGetCurrent")?;
        cuda::check(
            sys::cuStreamIsCapturing(s, &mut capturing),
            "cuStreamIsCapturing",
        )?;
        cuda::check(sys::cuStreamGetId(s, &mut id), "cuStreamGetId")
    }
}

/// Times `reps` calls of each kind on the rig's stream (capacity `cap`, count 1). `floor` is
/// `hx_param408_kernel`, for the driver-call floor of one enqueue.
pub fn measure(rig: &mut Rig, cap: usize, reps: usize, floor: &Kernel) -> Result<Costs> {
    let s = rig.stream();
    let ev = Event::new()?;
    let mut calls: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut time = |name: &'static str, t0: Instant| {
        calls
            .entry(name)
            .or_default()
            .push(t0.elapsed().as_secs_f64() * 1e6);
    };
    let h = rig.h_data();
    for _ in 0..reps + 10 {
        // Alone on an idle stream: the producer has finished before the enqueue.
        rig.produce(1)?;
        rig.drain()?;
        let t0 = Instant::now();
        let t = rig.enqueue(rig.mapped_trailer(cap)?)?;
        time(ENQUEUE, t0);
        anyhow::ensure!(t.wait()?.count() == 1, "enqueue cost: wrong count");
        drop(t);

        // Right after the producer's launch (the producer may still run).
        rig.produce(1)?;
        let t0 = Instant::now();
        let t = rig.enqueue(rig.mapped_trailer(cap)?)?;
        time(ENQUEUE_AFTER_LAUNCH, t0);
        anyhow::ensure!(t.wait()?.count() == 1, "enqueue cost: wrong count");
        drop(t);

        rig.produce(1)?;
        rig.drain()?;
        let t0 = Instant::now();
        let t = rig.enqueue_raw(rig.mapped_trailer(cap)?)?;
        time(ENQUEUE_RAW, t0);
        anyhow::ensure!(t.wait()?.count() == 1, "enqueue cost: wrong count");
        drop(t);
        rig.drain()?;

        let t0 = Instant::now();
        rig.produce(1)?;
        time(PRODUCER_LAUNCH, t0);
        rig.drain()?;

        // The driver calls of one enqueue and nothing else, as the crate makes them: the
        // current context, the capture check, the stream id, a launch with the programmatic
        // attribute and a 408-byte parameter (the pack kernel's), the slot's event.
        let mut param = [0u64; 51];
        let mut args = [param.as_mut_ptr().cast::<std::ffi::c_void>()];
        let shape = LaunchShape {
            grid: 1,
            block: 256,
            programmatic: true,
        };
        let t0 = Instant::now();
        enqueue_prologue(s)?;
        // SAFETY: hx_param408_kernel(hx_param408) takes one 408-byte parameter and reads no
        // memory; a live stream and event of the current context.
        unsafe {
            floor.launch(s, shape, &mut args)?;
            cuda::record(ev.0, s)?;
        }
        time(DRIVER_FLOOR, t0);
        rig.drain()?;

        let t0 = Instant::now();
        cuda::record(ev.0, s)?;
        time(EVENT_RECORD, t0);
        let t0 = Instant::now();
        cuda::stream_wait(s, ev.0)?;
        time(STREAM_WAIT, t0);
        rig.drain()?;
        let t0 = Instant::now();
        // SAFETY: a live event of the current context.
        let done = unsafe { crate::cuda::event_query(ev.0)? };
        time(EVENT_QUERY, t0);
        anyhow::ensure!(done, "the drained event is not complete");

        let t0 = Instant::now();
        // SAFETY: the data is device memory of the current context.
        let owner = unsafe { crate::cuda::pointer_owner(rig.d_data())? };
        time(POINTER_ATTRIBUTES, t0);
        anyhow::ensure!(owner.is_some(), "the driver does not know the data buffer");

        let t0 = Instant::now();
        // SAFETY: h_data holds max_n pinned doubles, d_data max_n device doubles.
        unsafe { cuda::dtoh(h.cast(), rig.d_data(), 8, s)? };
        time(SMALL_COPY, t0);
        rig.drain()?;

        // The staged readback with the sized copy, alone, and the driver calls it makes, as
        // the crate makes them: the current context, the capture check, the stream id, the
        // slot's graph's kernel node set and the graph launched (those two by the bare graph,
        // the harness's floor of the sized copy), the slot's event. Left out where the bare
        // graph is unavailable (the target is then left out too).
        if rig.unavailable(Approach::StagedSizedBare, cap).is_some() {
            continue;
        }
        rig.produce(1)?;
        rig.drain()?;
        let t0 = Instant::now();
        let t = rig.enqueue(rig.staged_sized(cap)?)?;
        time(ENQUEUE_SIZED, t0);
        anyhow::ensure!(t.wait()?.count() == 1, "sized enqueue cost: wrong count");
        drop(t);
        rig.drain()?;
        let seq = rig.produce(1)?;
        rig.drain()?;
        let t0 = Instant::now();
        enqueue_prologue(s)?;
        // SAFETY: the context is current (bound by main) and the bare graph's last launch was
        // drained; a live stream and event of the current context.
        unsafe {
            rig.launch_bare_sized(cap, seq)?;
            cuda::record(ev.0, s)?;
        }
        time(SIZED_DRIVER_FLOOR, t0);
        rig.drain()?;
    }
    Ok(Costs {
        calls: CALLS
            .iter()
            .filter_map(|&k| calls.get(k).map(|v| (k, Summary::of(&v[10..]))))
            .collect(),
    })
}
