//! The append lanes: `srbt_append_u64` appends a random count of rows into an
//! `AppendReadback`; every row checked as a multiset, every overflow's numbers, the slot's rows
//! and the fetched spill.
use super::reference::Rng;
use super::{Step, Worker};
use anyhow::Result;
use cudarc::driver::{CudaContext, CudaStream};
use sized_readback::testing::{pattern, Kernel, Kernels};
use sized_readback::{
    AppendDesc, AppendReadback, AppendTicket, ColumnReadout, ColumnSchema, Error, ReadbackConfig,
    Transport, WaitMode,
};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;

/// A prime above every candidate count: `i -> i * P % n` permutes `0..n`.
pub(super) const P: u64 = 2_147_483_647;

/// The rows `srbt_append_u64` appends for (n, count, seed): one u64 per kept candidate, sorted.
fn append_rows(n: u64, count: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n)
        .filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128)
        .map(|i| pattern::mix(seed.wrapping_add(8 * i)))
        .collect();
    v.sort_unstable();
    v
}

fn sorted_column(out: &ColumnReadout<'_>) -> Result<Vec<u64>> {
    let mut v = out.column_as::<u64>(0)?.to_vec();
    v.sort_unstable();
    Ok(v)
}

/// Launches `srbt_append_u64(desc, n, count, P, seed, 0)` on `stream` with `grid` blocks.
fn launch_append(
    k: &Kernel,
    stream: &CudaStream,
    desc: &AppendDesc,
    grid: u32,
    n: u64,
    count: u64,
    seed: u64,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let mut d = *desc;
    let (mut nn, mut c, mut p, mut s, mut e) = (n, count, P, seed, 0u32);
    let mut args: [*mut c_void; 6] = [
        (&mut d as *mut AppendDesc).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut c as *mut u64).cast(),
        (&mut p as *mut u64).cast(),
        (&mut s as *mut u64).cast(),
        (&mut e as *mut u32).cast(),
    ];
    // SAFETY: srbt_append_u64(srb_append_desc, uint64_t x4, unsigned), 256 threads per block as
    // its BlockAppend; it touches only the readback's memory, through the descriptor.
    unsafe { k.launch_3d(stream.cu_stream(), (grid, 1, 1), (256, 1, 1), &mut args) }.map_err(|e| {
        match e {
            Error::Cuda { source, .. } => source,
            _ => {
                cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_FAILED)
            }
        }
    })
}

struct AppendInFlight {
    ticket: AppendTicket,
    n: u64,
    count: u64,
    seed: u64,
}

/// An append readback of one u64 column with a random capacity, spill, slot count and wait
/// mode, filled by `srbt_append_u64` with random counts and grids.
pub(super) struct AppendLane {
    name: String,
    rb: AppendReadback,
    kernel: Kernel,
    cap: usize,
    spill: usize,
    transport: Transport,
    inflight: VecDeque<AppendInFlight>,
}

impl AppendLane {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        rng: &mut Rng,
        transport: Transport,
        k: &Kernels,
    ) -> Result<Self> {
        let cap = *rng.pick(&[1usize, 7, 64, 1000, 4096]);
        let spill = *rng.pick(&[0usize, 1, cap, 2 * cap]);
        let slots = 1 + rng.below(3) as usize;
        let wait = match transport {
            Transport::Mapped | Transport::Auto => *rng.pick(&[WaitMode::Trailer, WaitMode::Event]),
            Transport::Staged => WaitMode::Event,
        };
        let mut schema = ColumnSchema::new();
        schema.column::<u64>();
        let cfg = ReadbackConfig::new(cap)
            .spill(spill)
            .slots(slots)
            .transport(transport)
            .wait(wait);
        Ok(AppendLane {
            name: format!("append cap {cap} spill {spill} slots {slots} {transport:?}/{wait:?}"),
            rb: AppendReadback::new(ctx, &schema, cfg)?,
            kernel: k.function("srbt_append_u64")?,
            cap,
            spill,
            transport,
            inflight: VecDeque::new(),
        })
    }

    fn enqueue(&mut self, w: &mut Worker) -> Result<()> {
        let cap = self.cap as u64;
        let n = 1 + w.rng.below(3 * cap + 64);
        let count = match w.rng.below(8) {
            0 => 0,
            1 => 1,
            2 => cap,
            3 => cap + 1,
            4 => cap + self.spill as u64,
            5 => cap + self.spill as u64 + 1,
            _ => w.rng.below(n + 1),
        }
        .min(n);
        let grid = 1 + w.rng.below(40) as u32;
        let seed = w.rng.next_u64();
        let stream = &w.stream;
        let k = &self.kernel;
        match self.rb.append(stream, |d| {
            launch_append(k, stream, d, grid, n, count, seed)
        }) {
            Ok(ticket) => {
                w.report.enqueued += 1;
                self.inflight.push_back(AppendInFlight {
                    ticket,
                    n,
                    count,
                    seed,
                });
            }
            Err(e) => w.mismatch(format!("{}: append failed: {e}", self.name)),
        }
        Ok(())
    }

    fn finish(&mut self, w: &mut Worker, f: AppendInFlight, may_drop: bool) {
        if may_drop && w.rng.one_in(64) {
            w.report.dropped_unwaited += 1;
            return; // dropped unwaited: the slot's next append resets its scratch first
        }
        let want = append_rows(f.n, f.count, f.seed);
        let what = format!(
            "{} seq {} count {} of {}",
            self.name,
            f.ticket.seq(),
            f.count,
            f.n
        );
        let outcome = (|| -> std::result::Result<bool, String> {
            match f.ticket.wait() {
                Ok(out) => {
                    let got = sorted_column(&out).map_err(|e| e.to_string())?;
                    if out.count() as u64 != f.count || got != want {
                        return Err(format!("{} rows back", out.count()));
                    }
                    Ok(true)
                }
                Err(Error::AppendOverflow {
                    count,
                    capacity,
                    spilled,
                    dropped,
                }) => {
                    let over = f.count.saturating_sub(self.cap as u64);
                    let s = over.min(self.spill as u64);
                    if count != f.count
                        || capacity != self.cap
                        || spilled != s
                        || dropped != over - s
                    {
                        return Err(format!(
                            "overflow said {count}/{capacity}/{spilled}/{dropped}"
                        ));
                    }
                    // The slot's rows, and now and then the spilled ones, are rows appended.
                    let mut got = sorted_column(&f.ticket.partial().map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string())?;
                    if w.rng.one_in(4) {
                        if let Some(t) =
                            f.ticket.fetch_spill(&w.stream).map_err(|e| e.to_string())?
                        {
                            let r = t.wait().map_err(|e| e.to_string())?;
                            got.extend(sorted_column(&r).map_err(|e| e.to_string())?);
                            got.sort_unstable();
                            if dropped == 0 && got != want {
                                return Err("slot + spill rows differ".into());
                            }
                        }
                    }
                    if got.windows(2).any(|p| p[0] == p[1])
                        || got.iter().any(|r| want.binary_search(r).is_err())
                    {
                        return Err("a row twice, or one never appended".into());
                    }
                    Ok(false)
                }
                Err(e) => Err(format!("error {e}")),
            }
        })();
        match outcome {
            Ok(data) => {
                w.report.appends += 1;
                w.verified(self.transport, data, (want.len() * 8) as u64);
            }
            Err(why) => w.mismatch(format!("{what}: {why}")),
        }
    }
}

impl Step for AppendLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.inflight.len() == self.rb.info().slots {
            let f = self.inflight.pop_front().expect("an append in flight");
            self.finish(w, f, true);
        }
        self.enqueue(w)
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while let Some(f) = self.inflight.pop_front() {
            self.finish(w, f, false);
        }
        Ok(())
    }
}
