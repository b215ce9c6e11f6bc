//! The realistic producer (issue 9): a kernel scans `n_cand` candidates and selects `n` of
//! them, block-aggregated (one atomic per block), as a particle code's "left the box" pass
//! does. The copy-based approaches and the crate's pack read its output from device memory and
//! its count from a device counter zeroed before it (cuMemsetD8Async); the crate's append path
//! is the same selection appended straight into the slot (no count in device memory, no
//! memset, no second kernel). Rows land in no particular order, so every cycle is checked by
//! its count and an order-independent checksum of its values.
use crate::cuda::{self, Event};
use crate::data::{Point, Samples, M};
use crate::schedule::{self, Schedule};
use crate::stats::Summary;
use crate::sweep::SLOTS;
use anyhow::{ensure, Context, Result};
use serde::Serialize;
use sized_readback::cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use sized_readback::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use sized_readback::testing::{Kernel, PinnedBuffer};
use sized_readback::{
    AppendDesc, AppendReadback, ColumnSchema, Readback, ReadbackConfig, StagedCopy, Transport,
};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// Odd, so `i -> i * P mod n` permutes `0..n` for every power of two `n` (the kernel takes
/// the low bits: no 128-bit division on the GPU).
const P: u64 = 2_147_483_647;

/// The approaches run with the realistic producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Sel {
    /// memset + producer + event: the floor.
    ProducerOnly,
    /// memset + producer, copy the count, synchronize, copy n.
    Sync,
    /// memset + producer + one copy of n (the host knows n).
    Oracle,
    /// memset + producer + the crate's pack (mapped slot, trailer wait; safe enqueue).
    Pack,
    /// memset + producer + the crate's pack over the staged transport, copying the whole slot.
    PackStaged,
    /// memset + producer + the crate's pack over the staged transport with the sized copy (the
    /// device picks the copy's size class in a graph: CUDA 12.8+ drivers).
    PackStagedSized,
    /// The producer appends into the crate's mapped slot (trailer wait).
    Append,
    /// The producer appends into the crate's staged slot (device slot, one copy, event).
    AppendStaged,
}

impl Sel {
    pub const ALL: [Sel; 8] = [
        Sel::ProducerOnly,
        Sel::Sync,
        Sel::Oracle,
        Sel::Pack,
        Sel::PackStaged,
        Sel::PackStagedSized,
        Sel::Append,
        Sel::AppendStaged,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Sel::ProducerOnly => "producer_only",
            Sel::Sync => "sync",
            Sel::Oracle => "oracle",
            Sel::Pack => "crate_pack",
            Sel::PackStaged => "crate_pack_staged",
            Sel::PackStagedSized => "crate_pack_staged_sized",
            Sel::Append => "crate_append",
            Sel::AppendStaged => "crate_append_staged",
        }
    }
}

/// An order-independent checksum of a set of candidate indices: a wrapping sum of a cheap
/// bijective mix of each (equal sets, equal sums; a missing, doubled or wrong index changes it).
fn checksum(indices: impl Iterator<Item = u64>) -> u64 {
    indices.fold(0u64, |a, i| {
        a.wrapping_add(
            (i ^ 0x5bd1_e995)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(29),
        )
    })
}

/// The checksum of the indices behind `values` of cycle `cycle` (value = i + 0.5 * cycle), or
/// `None` if a value is not one of the `n` candidates' values.
fn checksum_of_values(values: &[f64], n: u64, cycle: u64) -> Option<u64> {
    let off = 0.5 * cycle as f64;
    let mut sum = 0u64;
    for &v in values {
        let i = v - off;
        if i < 0.0 || i.fract() != 0.0 || i >= n as f64 {
            return None;
        }
        sum = sum.wrapping_add(checksum(std::iter::once(i as u64)));
    }
    Some(sum)
}

/// `a^-1 mod m` (a and m coprime).
fn inverse(a: u64, m: u64) -> u64 {
    let (mut t, mut nt, mut r, mut nr) = (0i128, 1i128, m as i128, a as i128);
    while nr != 0 {
        let q = r / nr;
        (t, nt) = (nt, t - q * nt);
        (r, nr) = (nr, r - q * nr);
    }
    t.rem_euclid(m as i128) as u64
}

/// The checksum of the selection of `keep` of `n` candidates (`n` a power of two): candidate i
/// is kept iff i * P mod n < keep, that is i = j * P^-1 mod n for j < keep.
fn expected_checksum(n: u64, keep: u64) -> u64 {
    assert!(n.is_power_of_two(), "the candidate count is a power of two");
    if n == 1 {
        return checksum(0..keep.min(1));
    }
    let inv = inverse(P % n, n);
    checksum((0..keep).map(|j| j.wrapping_mul(inv) & (n - 1)))
}

/// The crate's readbacks of one capacity: pack (mapped, staged whole, staged sized) and append
/// (mapped, staged).
struct CapReadbacks {
    cap: usize,
    pack: [Readback<f64>; 3],
    append: [AppendReadback; 2],
}

/// Buffers, kernels and readbacks of the realistic sweep.
pub struct SelectRig {
    stream: Arc<CudaStream>,
    select_dev: Kernel,
    select_append: Kernel,
    d_out: CudaSlice<f64>,
    d_count: CudaSlice<u64>,
    d_out_ptr: CUdeviceptr,
    d_count_ptr: CUdeviceptr,
    /// Pinned destination of sync's copies (max doubles).
    h_data: PinnedBuffer,
    /// Pinned destination of the oracle's copy (max doubles): its own, as each of the crate's
    /// readbacks has its own slots. Shared with sync, the oracle's copy landed in the lines
    /// sync's check had just read on the host, which made it slower than sync at n >= 64K.
    h_oracle: PinnedBuffer,
    h_count: PinnedBuffer,
    done: Event,
    /// Per capacity: pack mapped, staged whole, staged sized; append mapped, append staged.
    rbs: Vec<CapReadbacks>,
    max: usize,
    /// Blocks of one wave: multiprocessors x 8 (2048 resident threads per SM on sm_80/sm_90).
    wave: u32,
    cycle: u64,
    /// expected_checksum by (n_cand, keep).
    expected: BTreeMap<(u64, u64), u64>,
}

impl SelectRig {
    pub fn new(
        ctx: &Arc<CudaContext>,
        select_dev: Kernel,
        select_append: Kernel,
        caps: &[usize],
    ) -> Result<Self> {
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        let max = caps.iter().copied().max().unwrap_or(1);
        let d_out = stream.alloc_zeros::<f64>(max).context("cuMemAlloc")?;
        let d_count = stream.alloc_zeros::<u64>(1).context("cuMemAlloc")?;
        // Event tracking is off (main): the guards are no-ops.
        let d_out_ptr = d_out.device_ptr(&stream).0;
        let d_count_ptr = d_count.device_ptr(&stream).0;
        let mut schema = ColumnSchema::new();
        schema.column::<f64>();
        let mut rbs = Vec::new();
        for &cap in caps {
            // The staged pack copies the whole slot (crate_pack_staged) or the size class of
            // the count (crate_pack_staged_sized, issue 34's staged row with a real producer).
            let pack = |t: Transport, copy: StagedCopy| {
                Readback::<f64>::with_config(
                    ctx,
                    ReadbackConfig::new(cap)
                        .slots(SLOTS)
                        .transport(t)
                        .staged_copy(copy),
                )
            };
            let append = |t: Transport| {
                AppendReadback::new(
                    ctx,
                    &schema,
                    ReadbackConfig::new(cap).slots(SLOTS).transport(t),
                )
            };
            rbs.push(CapReadbacks {
                cap,
                pack: [
                    pack(Transport::Mapped, StagedCopy::Whole)?,
                    pack(Transport::Staged, StagedCopy::Whole)?,
                    pack(Transport::Staged, StagedCopy::Sized)?,
                ],
                append: [append(Transport::Mapped)?, append(Transport::Staged)?],
            });
        }
        stream.synchronize().context("cuStreamSynchronize")?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .context("SM count")?;
        Ok(SelectRig {
            wave: (sms.max(1) as u32) * 8,
            stream,
            select_dev,
            select_append,
            d_out,
            d_count,
            d_out_ptr,
            d_count_ptr,
            h_data: PinnedBuffer::new(ctx, max * 8, false)?,
            h_oracle: PinnedBuffer::new(ctx, max * 8, false)?,
            h_count: PinnedBuffer::new(ctx, 64, false)?,
            done: Event::new()?,
            rbs,
            max,
            cycle: 0,
            expected: BTreeMap::new(),
        })
    }

    fn s(&self) -> CUstream {
        self.stream.cu_stream()
    }

    /// Both producers are grid-stride loops launched as one wave of resident blocks (at most
    /// one block per 256 candidates), as such kernels are usually launched; an append kernel's
    /// every block pays one atomic round trip at its exit (finish()), so more waves cost it more.
    fn grid(&self, n_cand: u64) -> u32 {
        n_cand.div_ceil(256).clamp(1, self.wave as u64) as u32
    }

    /// memset of the count, then the producer into device memory.
    fn produce_dev(&self, n_cand: u64, keep: u64, cycle: u64) -> Result<()> {
        // SAFETY: d_count is 8 bytes of device memory of this context.
        let status = unsafe { sys::cuMemsetD8Async(self.d_count_ptr, 0, 8, self.s()) };
        cuda::check(status, "cuMemsetD8Async")?;
        let (mut o, mut c, mut n, mut k, mut p, mut cy) =
            (self.d_out_ptr, self.d_count_ptr, n_cand, keep, P, cycle);
        let mut args: [*mut c_void; 6] = [
            (&mut o as *mut u64).cast(),
            (&mut c as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut k as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut cy as *mut u64).cast(),
        ];
        // SAFETY: hx_select_dev(double*, unsigned long long*, uint64_t x4); d_out holds max >=
        // keep doubles, d_count one u64.
        unsafe {
            self.select_dev.launch_3d(
                self.s(),
                (self.grid(n_cand), 1, 1),
                (256, 1, 1),
                &mut args,
            )?
        };
        Ok(())
    }

    /// The producer appending into `desc`'s slot.
    fn produce_append(
        &self,
        desc: &AppendDesc,
        n_cand: u64,
        keep: u64,
        cycle: u64,
    ) -> std::result::Result<(), sized_readback::cudarc::driver::DriverError> {
        let mut d = *desc;
        let (mut n, mut k, mut p, mut cy) = (n_cand, keep, P, cycle);
        let mut args: [*mut c_void; 5] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut k as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut cy as *mut u64).cast(),
        ];
        // SAFETY: hx_select_append(srb_append_desc, uint64_t x4), 256 threads per block as its
        // BlockAppend.
        unsafe {
            self.select_append.launch_3d(
                self.s(),
                (self.grid(n_cand), 1, 1),
                (256, 1, 1),
                &mut args,
            )
        }
        .map_err(|e| match e {
            sized_readback::Error::Cuda { source, .. } => source,
            _ => {
                sized_readback::cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_LAUNCH_FAILED)
            }
        })
    }

    fn rbs(&self, cap: usize) -> Result<&CapReadbacks> {
        self.rbs
            .iter()
            .find(|r| r.cap == cap)
            .with_context(|| format!("no readback of capacity {cap}"))
    }

    /// One cycle of `a`: `keep` of `n_cand` candidates, capacity `cap`. Timed, checked and
    /// added to `out` if given; else a settle cycle (see [`crate::schedule`]): the same
    /// launches, copies and wait, untimed, and the host reads none of the rows. A settle
    /// cycle's error is returned; a timed cycle's readback error is recorded as a wrong cycle.
    fn cycle(
        &mut self,
        a: Sel,
        n_cand: u64,
        keep: u64,
        cap: usize,
        mut out: Option<&mut Samples>,
    ) -> Result<()> {
        let timed = out.is_some();
        self.cycle += 1;
        let cycle = self.cycle;
        let want = *self
            .expected
            .entry((n_cand, keep))
            .or_insert_with(|| expected_checksum(n_cand, keep));
        let s = self.s();
        let h = if a == Sel::Oracle {
            self.h_oracle.host_ptr().cast::<f64>()
        } else {
            self.h_data.host_ptr().cast::<f64>()
        };
        let hc = self.h_count.host_ptr().cast::<u64>();
        let t0 = Instant::now();
        let (t1, t2, t3, ok);
        let check = |n: usize, v: &[f64]| {
            n as u64 == keep && checksum_of_values(&v[..n], n_cand, cycle) == Some(want)
        };
        match a {
            Sel::ProducerOnly | Sel::Sync | Sel::Oracle => {
                self.produce_dev(n_cand, keep, cycle)?;
                t1 = Instant::now();
                // SAFETY: hc is a pinned u64, h max pinned doubles, d_out max device doubles;
                // the host reads them after the event below.
                unsafe {
                    match a {
                        Sel::Sync => {
                            cuda::dtoh(hc.cast(), self.d_count_ptr, 8, s)?;
                            cuda::stream_sync(s)?;
                            let n = std::ptr::read_volatile(hc).min(self.max as u64) as usize;
                            cuda::dtoh(h.cast(), self.d_out_ptr, n * 8, s)?;
                        }
                        Sel::Oracle => cuda::dtoh(h.cast(), self.d_out_ptr, keep as usize * 8, s)?,
                        _ => {}
                    }
                }
                cuda::record(self.done.0, s)?;
                t2 = Instant::now();
                cuda::event_sync(self.done.0)?;
                t3 = Instant::now();
                ok = match a {
                    _ if !timed => false,
                    Sel::ProducerOnly => true,
                    _ => {
                        let n = if a == Sel::Sync {
                            // SAFETY: the copies completed (event synchronized).
                            unsafe { std::ptr::read_volatile(hc) as usize }
                        } else {
                            keep as usize
                        };
                        // SAFETY: h holds max doubles written by completed copies.
                        check(n, unsafe { std::slice::from_raw_parts(h, n.min(self.max)) })
                    }
                };
            }
            Sel::Pack | Sel::PackStaged | Sel::PackStagedSized => {
                self.produce_dev(n_cand, keep, cycle)?;
                t1 = Instant::now();
                let i = match a {
                    Sel::PackStaged => 1,
                    Sel::PackStagedSized => 2,
                    _ => 0,
                };
                let rb = &self.rbs(cap)?.pack[i];
                let ticket = rb.enqueue(&self.stream, &self.d_out, &self.d_count)?;
                t2 = Instant::now();
                let r = ticket.wait();
                t3 = Instant::now();
                ok = match (r, out.as_deref_mut()) {
                    (Ok(r), Some(_)) => check(r.count(), r.as_slice()),
                    (Ok(_), None) => false,
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(e.to_string());
                        false
                    }
                    (Err(e), None) => return Err(e.into()),
                };
            }
            Sel::Append | Sel::AppendStaged => {
                let rb = &self.rbs(cap)?.append[usize::from(a == Sel::AppendStaged)];
                let ticket = rb.append(&self.stream, |d| {
                    self.produce_append(d, n_cand, keep, cycle)
                })?;
                t1 = Instant::now();
                t2 = t1;
                let r = ticket.wait();
                t3 = Instant::now();
                ok = match (r, out.as_deref_mut()) {
                    (Ok(r), Some(_)) => {
                        let v = r.column_as::<f64>(0)?;
                        check(r.count(), v)
                    }
                    (Ok(_), None) => false,
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(e.to_string());
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

    pub fn drain(&self) -> Result<()> {
        cuda::stream_sync(self.s())
    }

    /// One repetition: every approach once, in `sched`'s order for `seed`, its settle cycles
    /// then a timed one into `samples`. A failed approach counts a wrong cycle, its first
    /// error kept.
    fn repetition(
        &mut self,
        sched: Schedule,
        (cap, n_cand, keep): (usize, u64, u64),
        seed: u64,
        samples: &mut BTreeMap<Sel, Samples>,
    ) -> Result<()> {
        for i in sched.order(Sel::ALL.len(), seed) {
            let a = Sel::ALL[i];
            let s = samples.entry(a).or_default();
            let pair = (0..sched.settle)
                .try_for_each(|_| self.cycle(a, n_cand, keep, cap, None))
                .and_then(|()| self.cycle(a, n_cand, keep, cap, Some(&mut *s)));
            if let Err(e) = pair {
                s.error.get_or_insert(format!("{e:#}"));
                s.checked += 1;
                self.drain()?;
            }
        }
        Ok(())
    }

    /// Host cost of one append reservation (`begin`) plus its completion (`launched`), the
    /// kernel's own launch left out: p50/p99 µs over `reps` appends.
    pub fn append_host_cost(&mut self, cap: usize, reps: usize) -> Result<Summary> {
        let mut v = Vec::with_capacity(reps);
        for i in 0..reps + 10 {
            self.cycle += 1;
            let cycle = self.cycle;
            let rb = &self.rbs(cap)?.append[0];
            let t0 = Instant::now();
            let p = rb.begin(&self.stream, None)?;
            let t1 = Instant::now();
            self.produce_append(p.desc(), 1 << 20, 1, cycle)?;
            let t2 = Instant::now();
            let ticket = p.launched()?;
            let t3 = Instant::now();
            ensure!(ticket.wait()?.count() == 1, "append host cost: wrong count");
            if i >= 10 {
                v.push(((t1 - t0) + (t3 - t2)).as_secs_f64() * 1e6);
            }
        }
        Ok(Summary::of(&v))
    }
}

/// The realistic sweep: every approach at every point, a settle cycle and a timed one per
/// approach and repetition, in the order of [`schedule`], after three untimed repetitions at
/// every point. Returns the points (capacity, n) with their results.
pub fn sweep(
    rig: &mut SelectRig,
    plan: &[(usize, u64, u64)],
    sched: Schedule,
    reps_at: &dyn Fn(u64) -> usize,
) -> Result<Vec<Point>> {
    for (i, &(cap, n_cand, keep)) in plan.iter().enumerate() {
        let mut junk = BTreeMap::new();
        for k in 0..3 {
            rig.repetition(sched, (cap, n_cand, keep), schedule::seed(i, k), &mut junk)?;
        }
    }
    let mut points = Vec::new();
    for (i, &(cap, n_cand, keep)) in plan.iter().enumerate() {
        let mut samples: BTreeMap<Sel, Samples> = BTreeMap::new();
        for k in 0..reps_at(keep) as u64 {
            // Seeds past the warm-up's, so no repetition replays a warm-up's order.
            let seed = schedule::seed(i, 3 + k);
            rig.repetition(sched, (cap, n_cand, keep), seed, &mut samples)?;
        }
        let approaches = samples
            .iter()
            .map(|(a, s)| (a.name(), s.summarize(keep as usize)))
            .collect();
        points.push(Point {
            capacity: cap,
            n: keep as usize,
            approaches,
        });
    }
    rig.drain()?;
    Ok(points)
}

/// The names of the approaches, in table order.
pub fn names() -> Vec<&'static str> {
    Sel::ALL.iter().map(|a| a.name()).collect()
}

/// Bandwidth at n = 16M of 16M of every approach that reads back, GB/s by name.
pub fn bandwidth_16m(points: &[Point]) -> BTreeMap<&'static str, f64> {
    Sel::ALL
        .iter()
        .filter(|&&a| a != Sel::ProducerOnly)
        .filter_map(|a| {
            points
                .iter()
                .find(|p| p.n == 16 * M && p.capacity == 16 * M)
                .and_then(|p| p.approaches.get(a.name()))
                .map(|x| (a.name(), x.gbps))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_set_is_the_one_the_kernel_keeps() {
        for (n, keep) in [
            (1u64, 1u64),
            (8, 3),
            (1 << 20, 4096),
            (1024, 1024),
            (1 << 16, 12_345),
        ] {
            let kept: Vec<u64> = (0..n)
                .filter(|&i| (i.wrapping_mul(P) & (n - 1)) < keep)
                .collect();
            assert_eq!(kept.len() as u64, keep.min(n));
            assert_eq!(
                expected_checksum(n, keep),
                checksum(kept.iter().copied()),
                "n {n} keep {keep}"
            );
            let values: Vec<f64> = kept.iter().rev().map(|&i| i as f64 + 0.5 * 7.0).collect();
            assert_eq!(
                checksum_of_values(&values, n, 7),
                Some(expected_checksum(n, keep))
            );
        }
        assert_eq!(inverse(3, 7), 5);
        // A wrong value, a doubled one, or one of another cycle is caught.
        assert_eq!(checksum_of_values(&[1.25], 10, 0), None);
        assert_ne!(
            checksum_of_values(&[1.0, 1.0], 10, 0),
            checksum_of_values(&[1.0, 2.0], 10, 0)
        );
        assert_eq!(checksum_of_values(&[1.0], 10, 1), None);
    }
}
