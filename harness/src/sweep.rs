//! The latency sweep: one producer kernel, the same data, every approach, interleaved
//! repetition by repetition in the order [`crate::schedule`] sets (each timed cycle right
//! after a settle cycle of its own approach). A timed cycle is: launch the producer, enqueue
//! the approach's readback, wait until the host holds count and data, then check both against
//! the host reference (untimed).
use crate::cuda::{self, Event};
use crate::data::{self, GridProbe, Point, Samples, M};
use crate::stats::Summary;
use crate::worker::{Job, Worker};
use anyhow::{Context, Result};
use serde::Serialize;
use sized_readback::cudarc::driver::sys::{CUdeviceptr, CUstream};
use sized_readback::cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use sized_readback::testing::Kernel;
use sized_readback::testing::{BareSizedCopy, PinnedBuffer};
use sized_readback::{Readback, ReadbackConfig, StagedCopy, Ticket, Transport, WaitMode};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Slots of every readback in the sweep and the seed loop, and of the sized copy's floor, which
/// takes its slots in turn as a readback's ring does, so both copy into as much host memory.
pub(crate) const SLOTS: usize = 2;

/// Every approach of the latency sweep, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Approach {
    /// The producer kernel and an event: the floor of any readback (not a readback).
    ProducerOnly,
    /// Two back-to-back async copies; the second sized by the stale host count (the seed's bug).
    Naive,
    /// Copy the count, cuStreamSynchronize, copy n (the seed's "Solution 1").
    Sync,
    /// A host function wakes a worker thread that issues the sized copy and records an event.
    CallbackWorker,
    /// Always copy the whole capacity.
    OverCopy,
    /// The host already knows n: one copy (the floor, not a real option), into a destination
    /// of its own, checked in full like every approach.
    Oracle,
    /// The oracle as the criterion bench (`benches/readback.rs`) measures it, in the same run:
    /// its producer (`srb_produce_f64`), the point's n every time, a cudarc event, a
    /// destination of its own that the host reads one element of, and back-to-back
    /// iterations timed as one batch ([`CRITERION_BATCH`]) whose mean is one sample.
    OracleCriterionWay,
    /// The oracle's copy into a destination whose first n elements the host read just before
    /// the cycle (untimed): what `oracle` measured while it shared one destination with the
    /// other copy-based approaches and ran right after over_copy, whose check had just read it.
    OracleAfterHostRead,
    /// This crate: mapped slot, cuEventSynchronize.
    MappedEvent,
    /// This crate: mapped slot, spin on the trailer's sequence number (the default).
    MappedTrailer,
    /// This crate: device slot + one fixed-size copy of the whole slot, event
    /// (`StagedCopy::Whole`).
    Staged,
    /// This crate: device slot, then a copy whose size the pack picks on the device (a CUDA
    /// graph's SWITCH node, `StagedCopy::Sized`), event.
    StagedSized,
    /// The floor of [`Approach::StagedSized`] (not a readback of the crate's API): the
    /// library's own sized-copy graph and kernel launched alone
    /// ([`sized_readback::testing::BareSizedCopy`]: the pack kernel node, then the SWITCH
    /// node whose body copies the count's size class of rows and the trailer), its
    /// [`SLOTS`] slots taken in turn as the readback's ring takes them, no ring bookkeeping,
    /// ticket, checks or trailer wait; an event, synchronized, then the count decoded
    /// from the trailer and the rows checked as every approach's. What the sized readback
    /// costs over it is what the readback engine adds; its own distance to the oracle is what
    /// the graph mechanism costs.
    StagedSizedBare,
    /// This crate, mapped + trailer, but the producer does not signal programmatic launch
    /// completion early (griddepcontrol.launch_dependents): what PDL gives without help.
    MappedTrailerPlain,
    /// This crate, mapped + trailer, launched without programmatic dependent launch: what
    /// PDL gives (A/B in the same run).
    MappedTrailerNoPdl,
    /// This crate's device-side append: the kernel writes its rows and count into the mapped
    /// slot itself (the seed loop; the realistic sweep has its own list, `select::Sel`).
    Append,
}

impl Approach {
    /// All of them.
    pub const ALL: [Approach; 15] = [
        Approach::ProducerOnly,
        Approach::Naive,
        Approach::Sync,
        Approach::CallbackWorker,
        Approach::OverCopy,
        Approach::Oracle,
        Approach::OracleCriterionWay,
        Approach::OracleAfterHostRead,
        Approach::MappedEvent,
        Approach::MappedTrailer,
        Approach::Staged,
        Approach::StagedSized,
        Approach::StagedSizedBare,
        Approach::MappedTrailerPlain,
        Approach::MappedTrailerNoPdl,
    ];
    /// Short name (JSON key, table column).
    pub fn name(self) -> &'static str {
        match self {
            Approach::ProducerOnly => "producer_only",
            Approach::Naive => "naive",
            Approach::Sync => "sync",
            Approach::CallbackWorker => "callback_worker",
            Approach::OverCopy => "over_copy",
            Approach::Oracle => "oracle",
            Approach::OracleCriterionWay => "oracle_criterion_way",
            Approach::OracleAfterHostRead => "oracle_after_host_read",
            Approach::MappedEvent => "crate_mapped_event",
            Approach::MappedTrailer => "crate_mapped_trailer",
            Approach::Staged => "crate_staged",
            Approach::StagedSized => "crate_staged_sized",
            Approach::StagedSizedBare => "bare_sized_graph",
            Approach::MappedTrailerPlain => "crate_trailer_no_trigger",
            Approach::MappedTrailerNoPdl => "crate_trailer_no_pdl",
            Approach::Append => "crate_append",
        }
    }
    /// Whether it reads anything back (the producer-only floor does not).
    pub fn reads_back(self) -> bool {
        self != Approach::ProducerOnly
    }
    /// Whether the harness issues its copies into pinned host memory (each such approach has
    /// a destination of its own, as each of the crate's readbacks has its own slots).
    pub fn copies_to_host(self) -> bool {
        matches!(
            self,
            Approach::Naive
                | Approach::Sync
                | Approach::CallbackWorker
                | Approach::OverCopy
                | Approach::Oracle
                | Approach::OracleCriterionWay
                | Approach::OracleAfterHostRead
        )
    }
    /// The count of cycle `k` at sweep point `n`: [`count_of`], except for the criterion-way
    /// oracle, which copies the point's n every time, as the bench does.
    pub fn count_at(self, n: usize, k: u64) -> usize {
        if self == Approach::OracleCriterionWay {
            n
        } else {
            count_of(n, k)
        }
    }
}

/// Iterations of the criterion-way oracle per cycle of the sweep: run back to back and timed
/// with one host clock around all of them, as criterion times its batches; their mean is one
/// sample. Each iteration ends with an event synchronize and a read, as the bench's
/// `Rig::oracle` does, so the next one's launch waits for it: nothing overlaps, and the mean
/// is one readback's latency, warm.
pub const CRITERION_BATCH: u32 = 8;

/// The count of cycle `k` at sweep point `n`: n, alternating with n - 1 (n >= 2), so a size
/// taken from the previous cycle is stale half the time, as in the seed.
pub fn count_of(n: usize, k: u64) -> usize {
    if n >= 2 && k % 2 == 1 {
        n - 1
    } else {
        n
    }
}

/// The crate's readbacks at one capacity, and the bare sized-copy graph of that capacity.
struct CrateReadbacks {
    mapped_event: Readback<f64>,
    mapped_trailer: Readback<f64>,
    staged: Readback<f64>,
    staged_sized: Readback<f64>,
    plain: Readback<f64>,
    no_pdl: Readback<f64>,
    /// [`Approach::StagedSizedBare`]'s graph, or why this driver cannot have it (the
    /// approach is then skipped, the reason recorded as its error).
    bare_sized: Result<BareSizedCopy, String>,
}

/// Buffers, kernels and readbacks shared by every approach.
pub struct Rig {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    produce: Kernel,
    /// The criterion bench's producer (`srb_produce_f64`), for the criterion-way oracle.
    produce_bench: Kernel,
    sms: u32,
    max_n: usize,
    /// Allocated after cudarc's event tracking was turned off: the harness orders all work on
    /// one stream itself, so the crate's safe `enqueue` adds no cudarc events.
    d_data: CudaSlice<f64>,
    d_count: CudaSlice<i32>,
    d_data_ptr: CUdeviceptr,
    d_count_ptr: CUdeviceptr,
    /// Pinned scratch destination (max_n doubles) of the sections after the sweep (the enqueue
    /// cost breakdown, the seed's callback); no sweep approach copies into it.
    h_data: PinnedBuffer,
    /// One pinned destination of max_n doubles per copy-based approach
    /// ([`Approach::copies_to_host`]). Shared, each copy landed in the lines the previous
    /// approach's check had just read on the host, which made it slower (see
    /// [`Approach::OracleAfterHostRead`]); the crate's readbacks each have their own slots.
    h_dst: BTreeMap<Approach, PinnedBuffer>,
    /// One pinned count per approach, so each one's stale value is its own.
    h_counts: PinnedBuffer,
    done: Event,
    /// The criterion bench's event: cudarc's, default flags (timing disabled), recorded and
    /// synchronized through cudarc as the bench does.
    bench_done: CudaEvent,
    worker: Worker,
    worker_done: Event,
    crate_rbs: Vec<(usize, CrateReadbacks)>,
    cycle: u64,
}

impl Rig {
    /// Allocates for counts up to `max_n` and a readback of each kind per capacity.
    pub fn new(
        ctx: &Arc<CudaContext>,
        produce: Kernel,
        produce_bench: Kernel,
        sms: u32,
        max_n: usize,
        caps: &[usize],
    ) -> Result<Rig> {
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let mut crate_rbs = Vec::new();
        for &cap in caps {
            let mk = |t: Transport, w: WaitMode| {
                Readback::<f64>::with_config(
                    ctx,
                    ReadbackConfig::new(cap)
                        .slots(SLOTS)
                        .transport(t)
                        .wait(w)
                        .staged_copy(StagedCopy::Whole),
                )
            };
            crate_rbs.push((
                cap,
                CrateReadbacks {
                    mapped_event: mk(Transport::Mapped, WaitMode::Event)?,
                    mapped_trailer: mk(Transport::Mapped, WaitMode::Trailer)?,
                    staged: mk(Transport::Staged, WaitMode::Event)?,
                    staged_sized: Readback::<f64>::with_config(
                        ctx,
                        ReadbackConfig::new(cap)
                            .slots(SLOTS)
                            .transport(Transport::Staged)
                            .staged_copy(StagedCopy::Sized),
                    )?,
                    plain: mk(Transport::Mapped, WaitMode::Trailer)?,
                    no_pdl: Readback::<f64>::with_config(
                        ctx,
                        ReadbackConfig::new(cap)
                            .slots(SLOTS)
                            .transport(Transport::Mapped)
                            .wait(WaitMode::Trailer)
                            .programmatic_launch(false),
                    )?,
                    bare_sized: match BareSizedCopy::new(ctx, cap, SLOTS) {
                        Ok(b) => Ok(b),
                        Err(e @ sized_readback::Error::SizedCopyUnavailable { .. }) => Err(
                            format!("skipped: the bare sized-copy graph is unavailable: {e}"),
                        ),
                        Err(e) => return Err(e.into()),
                    },
                },
            ));
        }
        let d_data = stream.alloc_zeros::<f64>(max_n).context("cuMemAlloc")?;
        let d_count = stream.alloc_zeros::<i32>(1).context("cuMemAlloc")?;
        // No events are attached (tracking is off), so the guards are no-ops.
        let d_data_ptr = d_data.device_ptr(&stream).0;
        let d_count_ptr = d_count.device_ptr(&stream).0;
        stream.synchronize().context("cuStreamSynchronize")?;
        let mut h_dst = BTreeMap::new();
        for a in Approach::ALL.into_iter().filter(|a| a.copies_to_host()) {
            h_dst.insert(a, PinnedBuffer::new(ctx, max_n * 8, false)?);
        }
        Ok(Rig {
            ctx: ctx.clone(),
            produce,
            produce_bench,
            sms,
            max_n,
            d_data,
            d_count,
            d_data_ptr,
            d_count_ptr,
            h_data: PinnedBuffer::new(ctx, max_n * 8, false)?,
            h_dst,
            h_counts: PinnedBuffer::new(ctx, Approach::ALL.len() * 64, false)?,
            done: Event::new()?,
            bench_done: ctx.new_event(None).context("cuEventCreate")?,
            worker: Worker::start(ctx.clone()),
            worker_done: Event::new()?,
            crate_rbs,
            stream,
            cycle: 0,
        })
    }

    /// The stream every cycle runs on.
    pub fn stream(&self) -> CUstream {
        self.stream.cu_stream()
    }
    /// Device address of the data.
    pub fn d_data(&self) -> CUdeviceptr {
        self.d_data_ptr
    }
    /// Device address of the count.
    pub fn d_count(&self) -> CUdeviceptr {
        self.d_count_ptr
    }
    /// The pinned scratch destination (max_n doubles) of the sections after the sweep.
    pub fn h_data(&self) -> *mut f64 {
        self.h_data.host_ptr().cast()
    }

    /// The pinned destination (max_n doubles) of approach `a`: its own if it copies to the
    /// host, else the scratch one (which it does not use).
    fn dst(&self, a: Approach) -> *mut f64 {
        self.h_dst.get(&a).unwrap_or(&self.h_data).host_ptr().cast()
    }
    /// The context.
    pub fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    fn h_count(&self, a: Approach) -> *mut i32 {
        let i = Approach::ALL.iter().position(|&x| x == a).unwrap_or(0);
        // SAFETY: h_counts holds 64 bytes per approach.
        unsafe { self.h_counts.host_ptr().add(i * 64).cast() }
    }

    fn rbs(&self, cap: usize) -> Result<&CrateReadbacks> {
        self.crate_rbs
            .iter()
            .find(|(c, _)| *c == cap)
            .map(|(_, r)| r)
            .with_context(|| format!("no readback of capacity {cap}"))
    }

    /// The bare sized-copy graph of capacity `cap`; an error where there is none of that
    /// capacity or the driver cannot have it.
    fn bare_sized(&mut self, cap: usize) -> Result<&mut BareSizedCopy> {
        self.crate_rbs
            .iter_mut()
            .find(|(c, _)| *c == cap)
            .with_context(|| format!("no readback of capacity {cap}"))?
            .1
            .bare_sized
            .as_mut()
            .map_err(|why| anyhow::anyhow!("{why}"))
    }

    /// Why approach `a` cannot run at capacity `cap` on this machine (the sweep skips it and
    /// records this as its error), `None` where it can.
    pub fn unavailable(&self, a: Approach, cap: usize) -> Option<String> {
        match (a, self.rbs(cap)) {
            (Approach::StagedSizedBare, Ok(rbs)) => rbs.bare_sized.as_ref().err().cloned(),
            _ => None,
        }
    }

    /// Launches the producer for the next cycle with count `n`; returns the cycle id.
    pub fn produce(&mut self, n: usize) -> Result<u64> {
        self.produce_with(n, true)
    }

    /// As [`Rig::produce`], choosing whether the producer triggers dependents early.
    pub fn produce_with(&mut self, n: usize, trigger: bool) -> Result<u64> {
        self.cycle += 1;
        cuda::produce(
            &self.produce,
            self.stream(),
            self.sms,
            self.d_data(),
            self.d_count(),
            n as u64,
            self.cycle,
            trigger,
        )?;
        Ok(self.cycle)
    }

    /// The crate's mapped + trailer readback of capacity `cap`.
    pub fn mapped_trailer(&self, cap: usize) -> Result<&Readback<f64>> {
        Ok(&self.rbs(cap)?.mapped_trailer)
    }

    /// The crate's staged readback with the sized copy, of capacity `cap`.
    pub fn staged_sized(&self, cap: usize) -> Result<&Readback<f64>> {
        Ok(&self.rbs(cap)?.staged_sized)
    }

    /// Launches the bare sized-copy graph of capacity `cap` (its kernel node set and the graph
    /// launched, nothing else) over the rig's data on its stream, with sequence number `seq`;
    /// an error where this driver cannot have the graph.
    ///
    /// # Safety
    /// The rig's context is current on this thread, and the graph's previous launch has
    /// completed (the stream was drained or its event synchronized).
    pub unsafe fn launch_bare_sized(&mut self, cap: usize, seq: u64) -> Result<()> {
        let (s, dd, dc, len) = (self.stream(), self.d_data_ptr, self.d_count_ptr, self.max_n);
        let bare = self.bare_sized(cap)?;
        // SAFETY: per the contract; dd holds max_n doubles and dc one i32 of the context,
        // rewritten only by a later producer launch on the same stream.
        unsafe { bare.launch(s, dd, len, dc, seq)? };
        Ok(())
    }

    /// Enqueues a readback of the rig's data through the crate's safe API.
    pub fn enqueue(&self, rb: &Readback<f64>) -> Result<Ticket<f64>> {
        Ok(rb.enqueue(&self.stream, &self.d_data, &self.d_count)?)
    }

    /// Enqueues a readback of the rig's data through `enqueue_raw` (checked raw pointers).
    pub fn enqueue_raw(&self, rb: &Readback<f64>) -> Result<Ticket<f64>> {
        // SAFETY: d_data holds max_n doubles and d_count one i32 of this context; both are
        // rewritten only by the next cycle's producer, on the same stream.
        Ok(unsafe {
            rb.enqueue_raw(
                &self.stream,
                None,
                self.d_data(),
                self.max_n,
                sized_readback::RawCount::i32(self.d_count()),
            )?
        })
    }

    /// One cycle of approach `a`: count `n`, capacity `cap`. Timed, checked and added to
    /// `out` if given; else a settle cycle (see [`crate::schedule`]): the same launches,
    /// copies and wait, untimed, and the host reads none of the data. A settle cycle's error
    /// is returned; a timed cycle's readback error is recorded as a wrong cycle.
    pub fn cycle(
        &mut self,
        a: Approach,
        n: usize,
        cap: usize,
        mut out: Option<&mut Samples>,
    ) -> Result<()> {
        if a == Approach::OracleCriterionWay {
            return self.oracle_criterion_way(n, out);
        }
        let timed = out.is_some();
        let s = self.stream();
        let h = self.dst(a);
        let hc = self.h_count(a);
        let (dd, dc) = (self.d_data(), self.d_count());
        if a == Approach::OracleAfterHostRead && timed {
            // What over_copy's check did to the oracle's destination when they shared one: the
            // host reads its first n elements just before the cycle (untimed).
            // SAFETY: h holds max_n pinned doubles; no copy into it is in flight (its last one
            // was event-synchronized).
            let v = unsafe { std::slice::from_raw_parts(h, n.min(self.max_n)) };
            std::hint::black_box(v.iter().fold(0u64, |acc, x| acc.wrapping_add(x.to_bits())));
        }
        let t0 = Instant::now();
        let cycle = self.produce_with(n, a != Approach::MappedTrailerPlain)?;
        let t1 = Instant::now();
        let verdict = |count: usize, data: &[f64]| cuda::is_correct(count, data, n, cycle);
        let (t2, t3, ok);
        // Every unsafe block below relies on: the device buffers hold max_n >= cap >= n
        // doubles and one count; the pinned destinations hold max_n doubles and one i32 per
        // approach; every copy has completed (event or trailer) before the host reads.
        match a {
            Approach::ProducerOnly => {
                cuda::record(self.done.0, s)?;
                t2 = Instant::now();
                cuda::event_sync(self.done.0)?;
                t3 = Instant::now();
                ok = timed;
            }
            Approach::Naive
            | Approach::Sync
            | Approach::OverCopy
            | Approach::Oracle
            | Approach::OracleAfterHostRead => {
                let knows_n = matches!(a, Approach::Oracle | Approach::OracleAfterHostRead);
                // SAFETY: dc is one i32 of device memory and hc its pinned destination (4
                // bytes); dd holds max_n >= cap >= m doubles and h max_n; hc is read only
                // after a stream sync (Sync) or, for Naive, holds a completed earlier copy.
                unsafe {
                    if !knows_n {
                        cuda::dtoh(hc.cast(), dc, 4, s)?;
                    }
                    let m = match a {
                        Approach::Sync => {
                            cuda::stream_sync(s)?;
                            std::ptr::read_volatile(hc).clamp(0, cap as i32) as usize
                        }
                        // The seed's bug: the host value now is the previous cycle's.
                        Approach::Naive => {
                            std::ptr::read_volatile(hc).clamp(0, cap as i32) as usize
                        }
                        Approach::OverCopy => cap,
                        _ => n,
                    };
                    cuda::dtoh(h.cast(), dd, m * 8, s)?;
                }
                cuda::record(self.done.0, s)?;
                t2 = Instant::now();
                cuda::event_sync(self.done.0)?;
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                let count = if knows_n {
                    n
                } else {
                    // SAFETY: hc is this approach's pinned i32; its copy completed (event
                    // synchronized above).
                    unsafe { std::ptr::read_volatile(hc) }.max(0) as usize
                };
                // SAFETY: h holds max_n pinned doubles, written by copies that completed
                // (event synchronized above); no copy is in flight while the slice lives.
                let data = unsafe { std::slice::from_raw_parts(h, count.min(self.max_n)) };
                ok = verdict(count, data);
            }
            Approach::CallbackWorker => {
                // SAFETY: dc is one i32 of device memory, hc its 4-byte pinned destination,
                // read by the worker only after this copy (stream order before its host
                // function).
                unsafe { cuda::dtoh(hc.cast(), dc, 4, s)? };
                let job = Job {
                    h_count: hc,
                    d_data: dd,
                    h_data: h,
                    cap,
                    stream: s,
                    done: self.worker_done.0,
                };
                self.worker.submit(s, job)?;
                t2 = Instant::now();
                self.worker.wait(self.worker_done.0)?;
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                // SAFETY: hc is this approach's pinned i32; its copy completed before the
                // worker ran, and the worker's event was waited for above.
                let count = unsafe { std::ptr::read_volatile(hc) }.max(0) as usize;
                // SAFETY: h holds max_n pinned doubles; the worker's copy completed (its
                // event was waited for above) and nothing writes h while the slice lives.
                let data = unsafe { std::slice::from_raw_parts(h, count.min(self.max_n)) };
                ok = verdict(count, data);
            }
            Approach::OracleCriterionWay => unreachable!("timed by Rig::oracle_criterion_way"),
            Approach::StagedSizedBare => {
                let (done, len) = (self.done.0, self.max_n);
                let bare = self.bare_sized(cap)?;
                // SAFETY: the rig's context is current on this thread (bound by main before
                // the sweep) and `s` is its stream; dd holds max_n doubles and dc one i32,
                // rewritten only by the next cycle's producer on the same stream; the launch
                // is waited for (event synchronized below) before the next one, and the rig
                // drains its stream before it drops.
                unsafe { bare.launch(s, dd, len, dc, cycle)? };
                cuda::record(done, s)?;
                t2 = Instant::now();
                cuda::event_sync(done)?;
                // The trailer decoded inside the timed wait, as a ticket's wait decodes it.
                let count = bare.count();
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                std::hint::black_box(&count);
                // SAFETY: the launch completed: the event recorded after it was synchronized.
                let rows = unsafe { bare.rows() };
                ok = match (rows, out.as_deref_mut()) {
                    (Ok(rows), _) => verdict(rows.len(), rows),
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(format!("{e}"));
                        false
                    }
                    (Err(_), None) => false,
                };
            }
            Approach::MappedEvent
            | Approach::MappedTrailer
            | Approach::Staged
            | Approach::StagedSized
            | Approach::MappedTrailerPlain
            | Approach::MappedTrailerNoPdl
            | Approach::Append => {
                let rbs = self.rbs(cap)?;
                let rb = match a {
                    Approach::MappedEvent => &rbs.mapped_event,
                    Approach::MappedTrailer => &rbs.mapped_trailer,
                    Approach::Staged => &rbs.staged,
                    Approach::StagedSized => &rbs.staged_sized,
                    Approach::MappedTrailerNoPdl => &rbs.no_pdl,
                    _ => &rbs.plain,
                };
                let ticket = self.enqueue(rb)?;
                t2 = Instant::now();
                let r = ticket.wait();
                t3 = Instant::now();
                ok = match (r, out.as_deref_mut()) {
                    (Ok(r), Some(_)) => verdict(r.count(), r.as_slice()),
                    (Ok(_), None) => false,
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(format!("{e}"));
                        false
                    }
                    (Err(e), None) => return Err(e.into()),
                };
            }
        }
        if let Some(out) = out {
            out.record(t0, t1, t2, t3, ok);
        }
        Ok(())
    }

    /// One sample of the criterion-way oracle at count `n`: [`CRITERION_BATCH`] iterations of
    /// the bench's `Rig::oracle` back to back (its producer `srb_produce_f64` on the bench's
    /// grid, one cuMemcpyDtoHAsync of n doubles into this approach's own destination, a
    /// cudarc event record + synchronize, a volatile read of the last element), one host clock
    /// around the batch, as criterion times its batches; latency, enqueue (copy + record) and
    /// wait (synchronize + read) are the batch's means. Checked as far as the bench reads: the
    /// last element of every iteration, and the first of the last one (the host reads nothing
    /// else of its destination). Without `out`, a settle cycle: one iteration, not recorded.
    fn oracle_criterion_way(&mut self, n: usize, out: Option<&mut Samples>) -> Result<()> {
        let s = self.stream();
        let h = self.dst(Approach::OracleCriterionWay);
        let (dd, dc) = (self.d_data(), self.d_count());
        let mut ok = n >= 1 && n <= self.max_n;
        let (mut enqueue, mut wait) = (0.0, 0.0);
        let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
        let iterations = if out.is_some() { CRITERION_BATCH } else { 1 };
        let t0 = Instant::now();
        for _ in 0..iterations {
            self.cycle += 1;
            let cycle = self.cycle;
            cuda::produce_bench(&self.produce_bench, s, self.sms, dd, dc, n as u64, cycle)?;
            let t1 = Instant::now();
            // SAFETY: h holds max_n pinned doubles and dd max_n device doubles, n <= max_n.
            unsafe { cuda::dtoh(h.cast(), dd, n.min(self.max_n) * 8, s)? };
            self.bench_done
                .record(&self.stream)
                .context("cuEventRecord")?;
            let t2 = Instant::now();
            self.bench_done
                .synchronize()
                .context("cuEventSynchronize")?;
            // SAFETY: the copy completed (event synchronized); h holds max_n doubles.
            let last = unsafe { std::ptr::read_volatile(h.add(n.clamp(1, self.max_n) - 1)) };
            let t3 = Instant::now();
            std::hint::black_box(last);
            ok &= last == cuda::expected(n.saturating_sub(1), cycle);
            enqueue += us(t1, t2);
            wait += us(t2, t3);
        }
        let t_end = Instant::now();
        let Some(out) = out else { return Ok(()) };
        // SAFETY: the last copy completed (event synchronized above).
        ok &= unsafe { std::ptr::read_volatile(h) } == cuda::expected(0, self.cycle);
        let k = f64::from(CRITERION_BATCH);
        out.record_us(us(t0, t_end) / k, enqueue / k, wait / k, ok);
        Ok(())
    }

    /// Waits for everything on the stream (between sections).
    pub fn drain(&self) -> Result<()> {
        cuda::stream_sync(self.stream())
    }
}

/// The mapped pack kernel alone (producer drained first), trailer wait, at count `n` for
/// each grid cap: evidence for the launch shape. The slot capacity is `n`.
pub fn grid_probe(
    ctx: &Arc<CudaContext>,
    rig: &mut Rig,
    n: usize,
    grids: &[u32],
    reps: usize,
) -> Result<Vec<GridProbe>> {
    let mut out = Vec::new();
    for &g in grids {
        let rb = Readback::<f64>::with_config(
            ctx,
            ReadbackConfig::new(n)
                .slots(1)
                .wait(WaitMode::Trailer)
                .max_blocks(g),
        )?;
        let mut lat = Vec::new();
        for i in 0..reps + 3 {
            let cycle = rig.produce(n)?;
            rig.drain()?; // time the pack alone
            let t0 = Instant::now();
            let t = rig.enqueue(&rb)?;
            let r = t.wait()?;
            let dt = t0.elapsed().as_secs_f64();
            anyhow::ensure!(
                cuda::is_correct(r.count(), r.as_slice(), n, cycle),
                "grid probe: wrong readback at n={n}, grid cap {g}"
            );
            if i >= 3 {
                lat.push(dt);
            }
        }
        let p50 = Summary::of(&lat).p50;
        out.push(GridProbe {
            n,
            max_blocks: g,
            p50_us: p50 * 1e6,
            gbps: (n * 8) as f64 / p50 / 1e9,
        });
    }
    Ok(out)
}

/// The names of the approaches, in table order.
pub fn names() -> Vec<&'static str> {
    Approach::ALL.iter().map(|a| a.name()).collect()
}

/// The counts of the small-n targets and host costs (at capacity 1M).
pub const SMALL_NS: [usize; 4] = [1, 16, 256, 4096];

/// Bandwidth at n = 16M (capacity 16M) of every approach that reads back and was measured
/// (not skipped), GB/s by name.
pub fn bandwidth_16m(points: &[Point]) -> BTreeMap<&'static str, f64> {
    Approach::ALL
        .iter()
        .filter(|a| a.reads_back())
        .filter_map(|a| data::at(points, 16 * M, 16 * M, a.name()).map(|x| (a.name(), x)))
        .filter(|(_, x)| x.measured())
        .map(|(a, x)| (a, x.gbps))
        .collect()
}

/// Host cost of the enqueue at small n: for every approach that reads back, the summary of
/// its enqueue p50s over n = 1..4096 at capacity 1M (none, `samples` 0, for one skipped).
pub fn enqueue_cost_small_n(points: &[Point]) -> BTreeMap<&'static str, Summary> {
    Approach::ALL
        .iter()
        .filter(|a| a.reads_back())
        .map(|a| {
            let v: Vec<f64> = SMALL_NS
                .iter()
                .filter_map(|&n| data::at(points, M, n, a.name()))
                .filter(|x| x.measured())
                .map(|x| x.enqueue_us.p50)
                .collect();
            (a.name(), Summary::of(&v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_approach_has_no_bandwidth_and_no_enqueue_cost() {
        let mut m = crate::fixture::measurements();
        let bare = Approach::StagedSizedBare.name();
        let (bw, cost) = (bandwidth_16m(&m.sweep), enqueue_cost_small_n(&m.sweep));
        assert!(
            bw[bare] > 0.0 && cost[bare].samples == SMALL_NS.len(),
            "{cost:?}"
        );
        for p in &mut m.sweep {
            if let Some(x) = p.approaches.get_mut(bare) {
                // What the sweep records for an approach this machine cannot run.
                *x = crate::data::Samples {
                    error: Some("skipped".into()),
                    ..Default::default()
                }
                .summarize(p.n);
            }
        }
        let (bw, cost) = (bandwidth_16m(&m.sweep), enqueue_cost_small_n(&m.sweep));
        assert!(!bw.contains_key(bare), "{bw:?}");
        assert_eq!(cost[bare].samples, 0, "{cost:?}");
        // The others keep theirs.
        let sized = Approach::StagedSized.name();
        assert!(bw[sized] > 0.0 && cost[sized].samples == SMALL_NS.len());
    }

    #[test]
    fn names_are_distinct_and_each_copying_approach_has_its_destination() {
        let names: std::collections::BTreeSet<&str> =
            Approach::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names.len(), Approach::ALL.len());
        assert!(names.contains("oracle") && names.contains("oracle_criterion_way"));
        let copying: Vec<Approach> = Approach::ALL
            .into_iter()
            .filter(|a| a.copies_to_host())
            .collect();
        for a in [
            Approach::Naive,
            Approach::Sync,
            Approach::CallbackWorker,
            Approach::OverCopy,
            Approach::Oracle,
            Approach::OracleCriterionWay,
            Approach::OracleAfterHostRead,
        ] {
            assert!(copying.contains(&a), "{}", a.name());
        }
        assert!(!Approach::MappedTrailer.copies_to_host());
    }

    #[test]
    fn the_criterion_way_copies_the_points_n_every_cycle() {
        for k in 0..4 {
            assert_eq!(Approach::OracleCriterionWay.count_at(65536, k), 65536);
            assert_eq!(Approach::Oracle.count_at(65536, k), count_of(65536, k));
        }
        assert_eq!(Approach::Oracle.count_at(65536, 1), 65535);
        assert_eq!(Approach::Oracle.count_at(1, 1), 1);
    }
}
