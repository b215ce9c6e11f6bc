//! The seed's pipelined loop: two compute streams, one copy stream, the readback of cycle
//! k-1 enqueued, then kernel k launched as early as the approach allows, then the host waits
//! for the readback and does its CPU work. Cycles per second for each approach.
use crate::cuda::{self, Event};
use crate::data::{LoopResult, LoopTrace, Span};
use crate::sweep::{Approach, SLOTS};
use crate::worker::{Job, Worker};
use anyhow::{bail, Context, Result};
use sized_readback::cudarc::driver::sys::CUevent_flags;
use sized_readback::cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use sized_readback::testing::Kernel;
use sized_readback::testing::{BareSizedCopy, DeviceBuffer, PinnedBuffer};
use sized_readback::{
    AppendDesc, AppendReadback, AppendTicket, ColumnSchema, Readback, ReadbackConfig, StagedCopy,
    Ticket, Transport, WaitMode,
};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Elements each kernel produces (the seed's kernels produce 3 to 5; small, so the host's
/// check is part of its CPU work without dominating it).
const N: usize = 1000;

/// The approaches the loop compares (the bare sized-copy graph is the sized staged
/// readback's floor, not a readback: see [`Approach::StagedSizedBare`]).
pub const APPROACHES: [Approach; 8] = [
    Approach::Sync,
    Approach::CallbackWorker,
    Approach::MappedTrailer,
    Approach::MappedEvent,
    Approach::Staged,
    Approach::StagedSized,
    Approach::StagedSizedBare,
    Approach::Append,
];

/// Streams, events, buffers and readbacks of the loop.
pub struct Loop {
    ctx: Arc<CudaContext>,
    kernel: Kernel,
    append_kernel: Kernel,
    append: AppendReadback,
    compute: [Arc<CudaStream>; 2],
    copy: Arc<CudaStream>,
    compute_done: [CudaEvent; 2],
    copy_done: Event,
    d_data: [DeviceBuffer; 2],
    d_count: [DeviceBuffer; 2],
    h_count: PinnedBuffer,
    h_data: PinnedBuffer,
    mapped_trailer: Readback<f64>,
    mapped_event: Readback<f64>,
    staged: Readback<f64>,
    staged_sized: Readback<f64>,
    /// [`Approach::StagedSizedBare`]'s graph, or why this driver cannot have it (the loop
    /// then leaves the approach out).
    bare_sized: Result<BareSizedCopy, String>,
    cycle: u64,
}

enum Pending {
    Ticket(Ticket<f64>),
    Copy,
    Worker,
    /// The bare sized-copy graph, `copy_done` recorded after it.
    Bare,
}

impl Loop {
    /// Allocates everything for the loop.
    pub fn new(ctx: &Arc<CudaContext>, kernel: Kernel, append_kernel: Kernel) -> Result<Loop> {
        let stream = || ctx.new_stream().context("cuStreamCreate");
        let event = || ctx.new_event(None).context("cuEventCreate");
        let rb = |t: Transport, w: WaitMode| {
            Readback::<f64>::with_config(
                ctx,
                ReadbackConfig::new(N)
                    .slots(SLOTS)
                    .transport(t)
                    .wait(w)
                    .staged_copy(StagedCopy::Whole),
            )
        };
        let mut schema = ColumnSchema::new();
        schema.column::<f64>();
        Ok(Loop {
            ctx: ctx.clone(),
            kernel,
            append_kernel,
            append: AppendReadback::new(ctx, &schema, ReadbackConfig::new(N).slots(SLOTS))?,
            compute: [stream()?, stream()?],
            copy: stream()?,
            compute_done: [event()?, event()?],
            copy_done: Event::new()?,
            d_data: [
                DeviceBuffer::new_zeroed(ctx, N * 8)?,
                DeviceBuffer::new_zeroed(ctx, N * 8)?,
            ],
            d_count: [
                DeviceBuffer::new_zeroed(ctx, 8)?,
                DeviceBuffer::new_zeroed(ctx, 8)?,
            ],
            h_count: PinnedBuffer::new(ctx, 2 * 64, false)?,
            h_data: PinnedBuffer::new(ctx, N * 8, false)?,
            mapped_trailer: rb(Transport::Mapped, WaitMode::Trailer)?,
            mapped_event: rb(Transport::Mapped, WaitMode::Event)?,
            staged: rb(Transport::Staged, WaitMode::Event)?,
            staged_sized: Readback::<f64>::with_config(
                ctx,
                ReadbackConfig::new(N)
                    .slots(SLOTS)
                    .transport(Transport::Staged)
                    .staged_copy(StagedCopy::Sized),
            )?,
            bare_sized: match BareSizedCopy::new(ctx, N, SLOTS) {
                Ok(b) => Ok(b),
                Err(e @ sized_readback::Error::SizedCopyUnavailable { .. }) => Err(e.to_string()),
                Err(e) => return Err(e.into()),
            },
            cycle: 0,
        })
    }

    /// The approaches of [`APPROACHES`] this machine can run (the bare sized-copy graph needs
    /// a CUDA 12.8 driver).
    pub fn approaches(&self) -> Vec<Approach> {
        APPROACHES
            .into_iter()
            .filter(|&a| a != Approach::StagedSizedBare || self.bare_sized.is_ok())
            .collect()
    }

    fn count_of(k: u64) -> usize {
        N - (k % 3) as usize
    }

    fn h_count(&self, b: usize) -> *mut i32 {
        // SAFETY: h_count holds 64 bytes per buffer.
        unsafe { self.h_count.host_ptr().add(b * 64).cast() }
    }

    fn launch(&self, k: u64, ns: u64) -> Result<()> {
        let b = (k % 2) as usize;
        cuda::busy_produce(
            &self.kernel,
            self.compute[b].cu_stream(),
            self.d_data[b].ptr(),
            self.d_count[b].ptr(),
            Self::count_of(k) as u64,
            self.cycle + k,
            ns,
        )?;
        self.compute_done[b]
            .record(&self.compute[b])
            .context("cuEventRecord")
    }

    fn communicate(&mut self, a: Approach, k: u64, worker: &mut Worker) -> Result<Pending> {
        let b = (k % 2) as usize;
        let s = self.copy.cu_stream();
        let (dd, dc) = (self.d_data[b].ptr(), self.d_count[b].ptr());
        let rb = match a {
            Approach::MappedTrailer => Some(&self.mapped_trailer),
            Approach::MappedEvent => Some(&self.mapped_event),
            Approach::Staged => Some(&self.staged),
            Approach::StagedSized => Some(&self.staged_sized),
            _ => None,
        };
        if let Some(rb) = rb {
            // SAFETY: buffer b holds N doubles and one i32 of this context; kernel k+2, the
            // next writer of buffer b, is launched after this ticket has been waited on.
            let t = unsafe {
                rb.enqueue_raw(
                    &self.copy,
                    Some(&self.compute_done[b]),
                    dd,
                    N,
                    sized_readback::RawCount::i32(dc),
                )?
            };
            return Ok(Pending::Ticket(t));
        }
        cuda::stream_wait(s, self.compute_done[b].cu_event())?;
        if a == Approach::StagedSizedBare {
            let (seq, done) = (self.cycle + k + 1, self.copy_done.0);
            let bare = self
                .bare_sized
                .as_mut()
                .map_err(|why| anyhow::anyhow!("{why}"))?;
            // SAFETY: the context is current on this thread (bound by main) and `s` is its
            // copy stream, which waits for kernel k above; buffer b holds N doubles and one
            // i32, and kernel k+2, its next writer, is launched after this launch was waited
            // for (receive), as is the floor's next launch.
            unsafe { bare.launch(s, dd, N, dc, seq)? };
            cuda::record(done, s)?;
            return Ok(Pending::Bare);
        }
        let hc = self.h_count(b);
        // SAFETY: h_count[b] is a pinned i32, h_data N pinned doubles; the host reads them
        // only after copy_done.
        unsafe { cuda::dtoh(hc.cast(), dc, 4, s)? };
        match a {
            Approach::Sync => {
                cuda::stream_sync(s)?;
                // SAFETY: the count copy has completed.
                let n = unsafe { std::ptr::read_volatile(hc) }.clamp(0, N as i32) as usize;
                // SAFETY: as above.
                unsafe { cuda::dtoh(self.h_data.host_ptr(), dd, n * 8, s)? };
                cuda::record(self.copy_done.0, s)?;
                Ok(Pending::Copy)
            }
            Approach::CallbackWorker => {
                let job = Job {
                    h_count: hc,
                    d_data: dd,
                    h_data: self.h_data.host_ptr().cast(),
                    cap: N,
                    stream: s,
                    done: self.copy_done.0,
                };
                worker.submit(s, job)?;
                Ok(Pending::Worker)
            }
            Approach::Naive => {
                // The seed's bug (traced only): the data copy's size is the host count as it
                // is now, before the count copy just enqueued has run.
                // SAFETY: a pinned i32; a stale value is the point.
                let n = unsafe { std::ptr::read_volatile(hc) }.clamp(0, N as i32) as usize;
                // SAFETY: h_data holds N doubles, read after copy_done.
                unsafe { cuda::dtoh(self.h_data.host_ptr(), dd, n * 8, s)? };
                cuda::record(self.copy_done.0, s)?;
                Ok(Pending::Copy)
            }
            other => bail!("{} is not part of the loop", other.name()),
        }
    }

    /// Waits for readback k and checks it; returns whether it was right.
    fn receive(&self, p: Pending, k: u64, worker: &Worker) -> Result<bool> {
        let b = (k % 2) as usize;
        let want = Self::count_of(k);
        let cycle = self.cycle + k;
        match p {
            Pending::Ticket(t) => {
                let r = t.wait()?;
                Ok(cuda::is_correct(r.count(), r.as_slice(), want, cycle))
            }
            Pending::Bare => {
                cuda::event_sync(self.copy_done.0)?;
                let bare = self
                    .bare_sized
                    .as_ref()
                    .map_err(|why| anyhow::anyhow!("{why}"))?;
                // SAFETY: the launch completed: the event recorded after it was synchronized.
                let rows = unsafe { bare.rows()? };
                Ok(cuda::is_correct(rows.len(), rows, want, cycle))
            }
            Pending::Copy | Pending::Worker => {
                if matches!(p, Pending::Worker) {
                    worker.wait(self.copy_done.0)?;
                } else {
                    cuda::event_sync(self.copy_done.0)?;
                }
                // SAFETY: the copies have completed.
                let n = unsafe { std::ptr::read_volatile(self.h_count(b)) }.max(0) as usize;
                // SAFETY: h_data holds N doubles.
                let data = unsafe {
                    std::slice::from_raw_parts(self.h_data.host_ptr().cast::<f64>(), n.min(N))
                };
                Ok(cuda::is_correct(n, data, want, cycle))
            }
        }
    }

    /// Kernel k of the append loop: `hx_busy_append` into the append readback's slot, on
    /// compute stream k % 2.
    fn append(&self, k: u64, ns: u64) -> Result<AppendTicket> {
        let b = (k % 2) as usize;
        let (n, cycle) = (Self::count_of(k) as u64, self.cycle + k);
        let launch = |d: &AppendDesc| {
            let (mut d, mut nn, mut cy, mut t) = (*d, n, cycle, ns);
            let mut args: [*mut c_void; 4] = [
                (&mut d as *mut AppendDesc).cast(),
                (&mut nn as *mut u64).cast(),
                (&mut cy as *mut u64).cast(),
                (&mut t as *mut u64).cast(),
            ];
            // SAFETY: hx_busy_append(srb_append_desc, uint64_t, uint64_t, uint64_t), one block of
            // 256 threads as its BlockAppend.
            unsafe {
                self.append_kernel.launch_3d(
                    self.compute[b].cu_stream(),
                    (1, 1, 1),
                    (256, 1, 1),
                    &mut args,
                )
            }
            .map_err(|_| {
                sized_readback::cudarc::driver::DriverError(
                    sized_readback::cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_FAILED,
                )
            })
        };
        Ok(self.append.append(&self.compute[b], launch)?)
    }

    /// The loop on append: kernel k appends its rows into a slot itself, so the host only
    /// waits for ticket k - 1 after launching kernel k.
    fn run_append(&mut self, kernel_us: f64, cpu_us: f64, cycles: u64) -> Result<LoopResult> {
        self.ctx.synchronize().context("cuCtxSynchronize")?;
        let ns = (kernel_us * 1e3) as u64;
        let cpu = Duration::from_secs_f64(cpu_us * 1e-6);
        let mut correct = 0;
        let t0 = Instant::now();
        let mut pending = self.append(0, ns)?;
        for k in 1..=cycles {
            let next = if k < cycles {
                Some(self.append(k, ns)?)
            } else {
                None
            };
            let ok = {
                let r = pending.wait()?;
                // Rows come in no particular order: check them sorted.
                let mut v = r.column_as::<f64>(0)?.to_vec();
                v.sort_by(f64::total_cmp);
                cuda::is_correct(r.count(), &v, Self::count_of(k - 1), self.cycle + k - 1)
            };
            let w1 = Instant::now();
            correct += usize::from(ok);
            while w1.elapsed() < cpu {
                std::hint::spin_loop();
            }
            match next {
                Some(t) => pending = t,
                None => break,
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        self.cycle += cycles + 1;
        Ok(LoopResult {
            approach: Approach::Append.name(),
            kernel_us,
            cpu_us,
            cycles: cycles as usize,
            seconds,
            cycles_per_s: cycles as f64 / seconds,
            correct,
        })
    }

    /// The strategies of the timeline picture: the seed's naive copies, its synchronizing
    /// fix, and the library (mapped slot, trailer wait).
    pub const TRACED: [Approach; 3] = [Approach::Naive, Approach::Sync, Approach::MappedTrailer];

    /// Runs `cycles` cycles of `a` as [`Loop::run`] does, timing every interval: each kernel
    /// and each readback's copies by events, the host's calls, waits and CPU work by its clock.
    pub fn trace(
        &mut self,
        a: Approach,
        kernel_us: f64,
        cpu_us: f64,
        cycles: u64,
        worker: &mut Worker,
    ) -> Result<LoopTrace> {
        let timed = || {
            self.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .context("cuEventCreate")
        };
        let n = cycles as usize;
        let (origin, k_start, k_end, c_end) = (
            timed()?,
            (0..n).map(|_| timed()).collect::<Result<Vec<_>>>()?,
            (0..n).map(|_| timed()).collect::<Result<Vec<_>>>()?,
            (0..n).map(|_| timed()).collect::<Result<Vec<_>>>()?,
        );
        self.ctx.synchronize().context("cuCtxSynchronize")?;
        origin.record(&self.compute[0]).context("cuEventRecord")?;
        origin.synchronize().context("cuEventSynchronize")?;
        let t0 = Instant::now();
        let host = |t: Instant| (t - t0).as_secs_f64() * 1e6;
        let ns = (kernel_us * 1e3) as u64;
        let cpu = Duration::from_secs_f64(cpu_us * 1e-6);
        let mut spans = Vec::new();
        let mut span = |lane, label: String, start_us, end_us| {
            spans.push(Span {
                lane,
                label,
                start_us,
                end_us,
            })
        };
        let launch = |lp: &Self, k: u64| -> Result<(f64, f64)> {
            let b = (k % 2) as usize;
            let t = Instant::now();
            k_start[k as usize].record(&lp.compute[b])?;
            lp.launch(k, ns)?;
            k_end[k as usize].record(&lp.compute[b])?;
            Ok((host(t), host(Instant::now())))
        };
        let calls = match a {
            Approach::Sync => "copy count, synchronize, copy n",
            Approach::Naive => "copy count, copy n (stale)",
            _ => "enqueue",
        };
        let mut correct = 0;
        let (s0, e0) = launch(self, 0)?;
        span("host", "launch 0".into(), s0, e0);
        for k in 1..=cycles {
            let t = Instant::now();
            let p = self.communicate(a, k - 1, worker)?;
            c_end[(k - 1) as usize].record(&self.copy)?;
            span(
                "host",
                format!("{calls} {}", k - 1),
                host(t),
                host(Instant::now()),
            );
            if k < cycles {
                let (s, e) = launch(self, k)?;
                span("host", format!("launch {k}"), s, e);
            }
            let t = Instant::now();
            let ok = self.receive(p, k - 1, worker)?;
            span(
                "host",
                format!("wait {}", k - 1),
                host(t),
                host(Instant::now()),
            );
            correct += usize::from(ok);
            let w1 = Instant::now();
            while w1.elapsed() < cpu {
                std::hint::spin_loop();
            }
            span(
                "host",
                format!("CPU work {}", k - 1),
                host(w1),
                host(Instant::now()),
            );
        }
        self.ctx.synchronize().context("cuCtxSynchronize")?;
        self.cycle += cycles + 1;
        let at = |e: &CudaEvent| -> Result<f64> { Ok(f64::from(origin.elapsed_ms(e)?) * 1e3) };
        let mut copy_free = 0.0f64;
        for k in 0..n {
            let lane = if k % 2 == 0 {
                "compute stream 0"
            } else {
                "compute stream 1"
            };
            let (ks, ke, ce) = (at(&k_start[k])?, at(&k_end[k])?, at(&c_end[k])?);
            span(lane, format!("kernel {k}"), ks, ke);
            // The readback's device work starts when both its kernel and the copy stream's
            // previous work are done.
            span(
                "copy stream",
                format!("readback {k}"),
                ke.max(copy_free),
                ce,
            );
            copy_free = ce;
        }
        Ok(LoopTrace {
            approach: a.name(),
            kernel_us,
            cpu_us,
            correct,
            cycles: n,
            spans,
        })
    }

    /// Runs `cycles` cycles of approach `a`: kernels busy for `kernel_us`, host work `cpu_us`.
    pub fn run(
        &mut self,
        a: Approach,
        kernel_us: f64,
        cpu_us: f64,
        cycles: u64,
        worker: &mut Worker,
    ) -> Result<LoopResult> {
        if a == Approach::Append {
            return self.run_append(kernel_us, cpu_us, cycles);
        }
        self.ctx.synchronize().context("cuCtxSynchronize")?;
        let ns = (kernel_us * 1e3) as u64;
        let cpu = Duration::from_secs_f64(cpu_us * 1e-6);
        let mut correct = 0;
        let t0 = Instant::now();
        self.launch(0, ns)?;
        for k in 1..=cycles {
            let p = self.communicate(a, k - 1, worker)?;
            // The next kernel goes in as early as the approach allows.
            if k < cycles {
                self.launch(k, ns)?;
            }
            // The host's work on cycle k-1's results: check them, then busy until cpu_us.
            let ok = self.receive(p, k - 1, worker)?;
            let w1 = Instant::now();
            correct += usize::from(ok);
            while w1.elapsed() < cpu {
                std::hint::spin_loop();
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        self.cycle += cycles + 1;
        Ok(LoopResult {
            approach: a.name(),
            kernel_us,
            cpu_us,
            cycles: cycles as usize,
            seconds,
            cycles_per_s: cycles as f64 / seconds,
            correct,
        })
    }
}
