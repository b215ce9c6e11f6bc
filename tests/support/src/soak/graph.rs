//! The graph lanes: a graph captured once, replayed at every step, each replay checked (packs
//! of the embedding step, and append kernels).
use super::append::P;
use super::{Step, Worker};
use crate::step::step_count;
use anyhow::{Context as _, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaGraph, CudaStream};
use sized_readback::testing::{pattern, DeviceBuffer, Kernel, Kernels};
use sized_readback::{
    AppendDesc, ColumnSchema, ColumnSource, Error, GraphReadback, RawCount, ReadbackConfig,
    Transport,
};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

fn launch_step_advance(
    stream: &CudaStream,
    kernel: &Kernel,
    args: &mut [*mut c_void],
    advance: &Kernel,
    step: u64,
    grid: u32,
) -> Result<()> {
    // SAFETY: the callers pass the arguments of the kernel's C signature (csrc/testing/).
    unsafe { kernel.launch_3d(stream.cu_stream(), (grid, 1, 1), (256, 1, 1), args)? };
    let mut sp = step;
    let mut a: [*mut c_void; 1] = [(&mut sp as *mut u64).cast()];
    // SAFETY: srbe_advance(uint64_t*) on an 8-byte step counter.
    unsafe { advance.launch_3d(stream.cu_stream(), (1, 1, 1), (32, 1, 1), &mut a)? };
    Ok(())
}

/// Replays of a graph of `srbe_step` (three columns, a count that is sometimes negative or
/// over the capacity), a device-sequenced pack and the step counter's advance.
pub(super) struct GraphPackLane {
    g: GraphReadback,
    graph: CudaGraph,
    _bufs: [DeviceBuffer; 5],
    cap: usize,
    launched: u64,
}

impl GraphPackLane {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        k: &Kernels,
    ) -> Result<Self> {
        let cap = 700usize;
        let bufs = [
            DeviceBuffer::new_zeroed(ctx, cap * 8)?,
            DeviceBuffer::new_zeroed(ctx, cap * 4)?,
            DeviceBuffer::new_zeroed(ctx, cap * 12)?,
            DeviceBuffer::new_zeroed(ctx, 8)?,
            DeviceBuffer::new_zeroed(ctx, 8)?,
        ];
        let mut schema = ColumnSchema::new();
        schema.column::<f64>();
        schema.column::<i32>();
        schema.column::<[f32; 3]>();
        let g = GraphReadback::new(ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
        let step = k.function("srbe_step")?;
        let advance = k.function("srbe_advance")?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let (mut pos, mut id, mut vel, mut count, mut sp) = (
            bufs[0].ptr(),
            bufs[1].ptr(),
            bufs[2].ptr(),
            bufs[3].ptr(),
            bufs[4].ptr(),
        );
        let (mut tag, mut c) = (0u32, cap as u64);
        let mut args: [*mut c_void; 7] = [
            (&mut pos as *mut u64).cast(),
            (&mut id as *mut u64).cast(),
            (&mut vel as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut sp as *mut u64).cast(),
            (&mut tag as *mut u32).cast(),
            (&mut c as *mut u64).cast(),
        ];
        // SAFETY: srbe_step(double*, int32_t*, float*, int32_t*, const uint64_t*, uint32_t,
        // uint64_t): the buffers hold cap rows.
        unsafe { step.launch_3d(stream.cu_stream(), (4, 1, 1), (256, 1, 1), &mut args)? };
        let src = |b: &DeviceBuffer| ColumnSource {
            ptr: b.ptr(),
            len: cap,
        };
        // SAFETY: the buffers live as long as the lane, which drops the graph first; one stream.
        unsafe {
            g.record(
                stream,
                None,
                &[src(&bufs[0]), src(&bufs[1]), src(&bufs[2])],
                RawCount::i32(bufs[3].ptr()),
            )?
        };
        let mut a: [*mut c_void; 1] = [(&mut sp as *mut u64).cast()];
        // SAFETY: srbe_advance(uint64_t*) on the step counter.
        unsafe { advance.launch_3d(stream.cu_stream(), (1, 1, 1), (32, 1, 1), &mut a)? };
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))?
            .context("an empty capture")?;
        Ok(GraphPackLane {
            g,
            graph,
            _bufs: bufs,
            cap,
            launched: 0,
        })
    }

    fn take(&mut self, w: &mut Worker) {
        let seq = self.g.next_seq();
        let key = 2 * (seq - 1);
        let want = step_count(key, self.cap as u64);
        let r = self.g.next_timeout(Duration::from_secs(60));
        let ok = match (&r, want) {
            (Err(Error::NegativeCount { count: -3 }), -3) => Ok(false),
            (Err(Error::CountExceedsCapacity { count, capacity }), _)
                if want == self.cap as i64 + 1
                    && *count == want as u64
                    && *capacity == self.cap =>
            {
                Ok(false)
            }
            (Ok(rp), _) if rp.count() as i64 == want => {
                let out = rp.readout();
                let pos: &[f64] = out.column_as(0).unwrap_or(&[]);
                let id: &[i32] = out.column_as(1).unwrap_or(&[]);
                let vel: &[[f32; 3]] = out.column_as(2).unwrap_or(&[]);
                let good = (0..out.count()).all(|i| {
                    pos[i] == i as f64 + 0.25 * key as f64
                        && id[i] == (key * 7 + i as u64) as i32
                        && vel[i] == [i as f32, key as f32, 0.0]
                });
                if good {
                    Ok(true)
                } else {
                    Err("rows differ".to_string())
                }
            }
            (Ok(rp), _) => Err(format!("{} rows, want {want}", rp.count())),
            (Err(e), _) => Err(format!("error {e}")),
        };
        match ok {
            Ok(data) => {
                w.report.replays += 1;
                w.verified(Transport::Mapped, data, 0);
            }
            Err(why) => w.mismatch(format!("graph pack replay {seq}: {why}")),
        }
    }
}

impl Step for GraphPackLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        // At most slots - 1 replays ahead of the host: none is dropped for a held slot.
        if self.launched >= self.g.next_seq() - 1 + 2 {
            self.take(w);
        }
        self.graph.launch()?;
        self.launched += 1;
        w.report.enqueued += 1;
        Ok(())
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while self.g.next_seq() <= self.launched {
            self.take(w);
        }
        Ok(())
    }
}

/// Replays of a graph of `srbt_append_step` (two columns, a count set by the step counter)
/// and the counter's advance.
pub(super) struct GraphAppendLane {
    g: GraphReadback,
    graph: CudaGraph,
    _step: DeviceBuffer,
    cap: usize,
    launched: u64,
}

const GRAPH_APPEND_N: u64 = 3000;

impl GraphAppendLane {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        k: &Kernels,
    ) -> Result<Self> {
        let cap = 2000usize;
        let mut schema = ColumnSchema::new();
        schema.column::<u64>();
        schema.column::<u32>();
        let g = GraphReadback::new(ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
        let step = DeviceBuffer::new_zeroed(ctx, 8)?;
        let kernel = k.function("srbt_append_step")?;
        let advance = k.function("srbe_advance")?;
        let desc = g.append_desc()?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let mut d = desc;
        let (mut n, mut mc, mut p, mut sp) = (GRAPH_APPEND_N, cap as u64, P, step.ptr());
        let mut args: [*mut c_void; 5] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut mc as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut sp as *mut u64).cast(),
        ];
        launch_step_advance(stream, &kernel, &mut args, &advance, step.ptr(), 12)?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))?
            .context("an empty capture")?;
        Ok(GraphAppendLane {
            g,
            graph,
            _step: step,
            cap,
            launched: 0,
        })
    }

    fn take(&mut self, w: &mut Worker) {
        let seq = self.g.next_seq();
        let s = seq - 1;
        let count = pattern::mix(s) % (self.cap as u64 + 1);
        let ok = match self.g.next_timeout(Duration::from_secs(60)) {
            Ok(rp) => {
                let out = rp.readout();
                let (a, b) = (
                    out.column_as::<u64>(0).unwrap_or(&[]),
                    out.column_as::<u32>(1).unwrap_or(&[]),
                );
                let mut got: Vec<(u64, u32)> = a.iter().copied().zip(b.iter().copied()).collect();
                got.sort_unstable();
                let mut want: Vec<(u64, u32)> = (0..GRAPH_APPEND_N)
                    .filter(|&i| (i as u128 * P as u128 % GRAPH_APPEND_N as u128) < count as u128)
                    .map(|i| {
                        (
                            pattern::mix(s.wrapping_add(8 * i)),
                            pattern::mix(s.wrapping_add(8 * i + 1)) as u32,
                        )
                    })
                    .collect();
                want.sort_unstable();
                if out.count() as u64 == count && got == want {
                    Ok(())
                } else {
                    Err(format!("{} rows, want {count}", out.count()))
                }
            }
            Err(e) => Err(format!("error {e}")),
        };
        match ok {
            Ok(()) => {
                w.report.replays += 1;
                w.report.appends += 1;
                w.verified(Transport::Mapped, true, count * 12);
            }
            Err(why) => w.mismatch(format!("graph append replay {seq}: {why}")),
        }
    }
}

impl Step for GraphAppendLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.launched >= self.g.next_seq() - 1 + 2 {
            self.take(w);
        }
        self.graph.launch()?;
        self.launched += 1;
        w.report.enqueued += 1;
        Ok(())
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while self.g.next_seq() <= self.launched {
            self.take(w);
        }
        Ok(())
    }
}
