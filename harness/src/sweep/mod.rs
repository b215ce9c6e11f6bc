//! The latency sweep: one producer kernel, the same data, every approach, interleaved
//! repetition by repetition in the order [`crate::schedule`] sets (each timed cycle right
//! after a settle cycle of its own approach). A timed cycle is: launch the producer, enqueue
//! the approach's readback, wait until the host holds count and data, then check both against
//! the host reference (untimed).
//!
//! Here: the rig (buffers, kernels, readbacks) and the grid probe; the approaches are in
//! `approach`, a cycle of one in `cycle`, the summaries over the sweep's points in `summary`.
use crate::cuda::{self, Event};
use crate::data::GridProbe;
use crate::stats::Summary;
use crate::worker::Worker;
use anyhow::{Context, Result};
use sized_readback::cudarc::driver::sys::{CUdeviceptr, CUstream};
use sized_readback::cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};
use sized_readback::testing::Kernel;
use sized_readback::testing::{BareSizedCopy, PinnedBuffer};
use sized_readback::{Readback, ReadbackConfig, StagedCopy, Ticket, Transport, WaitMode};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

mod approach;
mod cycle;
mod summary;

pub use approach::{names, Approach};
pub use summary::{bandwidth_16m, enqueue_cost_small_n, SMALL_NS};

/// Slots of every readback in the sweep and the seed loop, and of the sized copy's floor, which
/// takes its slots in turn as a readback's ring does, so both copy into as much host memory.
pub(crate) const SLOTS: usize = 2;

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
