//! One launch of an append test kernel, and a host-sequenced round trip through a readback.
use super::rows::{expected_rows, rows_of, schema_of, P};
use super::{ctx, kernels};
use anyhow::{bail, ensure, Result};
use cudarc::driver::CudaStream;
use sized_readback::testing::Kernel;
use sized_readback::{AppendDesc, AppendReadback, Error, ReadbackConfig, Transport};
use std::ffi::c_void;

/// One launch of an append test kernel: `name(desc, n, count, p, seed, early)`.
pub(super) struct Launch<'a> {
    pub(super) kernel: &'a Kernel,
    pub(super) grid: (u32, u32, u32),
    pub(super) block: (u32, u32, u32),
    pub(super) n: u64,
    pub(super) count: u64,
    pub(super) seed: u64,
    pub(super) early: u32,
}

impl Launch<'_> {
    pub(super) fn run(
        &self,
        stream: &CudaStream,
        desc: &AppendDesc,
    ) -> Result<(), cudarc::driver::DriverError> {
        let mut d = *desc;
        let (mut n, mut count, mut p, mut seed, mut early) =
            (self.n, self.count, P, self.seed, self.early);
        let mut args: [*mut c_void; 6] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut seed as *mut u64).cast(),
            (&mut early as *mut u32).cast(),
        ];
        // SAFETY: srbt_append_*(srb_append_desc, uint64_t, uint64_t, uint64_t, uint64_t,
        // unsigned) with matching argument types; the kernel touches only the readback's slot,
        // scratch and spill through the descriptor.
        unsafe {
            self.kernel
                .launch_3d(stream.cu_stream(), self.grid, self.block, &mut args)
        }
        .map_err(|e| match e {
            Error::Cuda { source, .. } => source,
            other => panic!("launch: {other}"),
        })
    }
}

pub(super) fn kernel(name: &str) -> Result<Kernel> {
    Ok(kernels().function(name)?)
}

/// Appends `count` of `n` candidates with `kernel` of `sizes` into a fresh readback of `cap`
/// rows (`spill` rows of spill) over `transport`, and checks the outcome: every row exactly
/// once when it fits; the overflow error's numbers, the slot's rows and the spilled ones
/// otherwise.
#[allow(clippy::too_many_arguments)]
pub(super) fn roundtrip(
    name: &str,
    sizes: &[usize],
    transport: Transport,
    cap: usize,
    spill: usize,
    n: u64,
    count: u64,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    seed: u64,
) -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel(name)?;
    let rb = AppendReadback::new(
        &ctx,
        &schema_of(sizes),
        ReadbackConfig::new(cap).spill(spill).transport(transport),
    )?;
    let launch = Launch {
        kernel: &k,
        grid,
        block,
        n,
        count,
        seed,
        early: 0,
    };
    let ticket = rb.append(&stream, |d| launch.run(&stream, d))?;
    let want = expected_rows(n, count, seed, sizes);
    let what = format!(
        "{name} {transport:?} cap {cap} spill {spill} count {count} grid {grid:?} block {block:?}"
    );
    match ticket.wait() {
        Ok(out) => {
            ensure!(count as usize <= cap, "{what}: no overflow reported");
            ensure!(
                out.count() == count as usize,
                "{what}: count {}",
                out.count()
            );
            ensure!(rows_of(&out, sizes)? == want, "{what}: rows differ");
        }
        Err(Error::AppendOverflow {
            count: c,
            capacity,
            spilled,
            dropped,
        }) => {
            let over = count - cap as u64;
            ensure!(
                c == count && capacity == cap,
                "{what}: overflow says {c} / {capacity}"
            );
            ensure!(
                spilled == over.min(spill as u64) && dropped == over - spilled,
                "{what}: spilled {spilled}, dropped {dropped}"
            );
            // The slot's rows and the spilled ones are distinct rows of the expected set, and
            // with nothing dropped they are all of it.
            let mut got = rows_of(&ticket.partial()?, sizes)?;
            ensure!(got.len() == cap, "{what}: {} rows in the slot", got.len());
            // The raw-stream fetch (the C API's) on the staged transport, cudarc's on mapped.
            let fetched = match transport {
                // SAFETY: a live stream of the readback's context.
                Transport::Staged => unsafe { ticket.fetch_spill_raw_stream(stream.cu_stream())? },
                _ => ticket.fetch_spill(&stream)?,
            };
            match fetched {
                Some(t) => {
                    let s = t.wait()?;
                    ensure!(s.count() as u64 == spilled, "{what}: fetched {}", s.count());
                    got.extend(rows_of(&s, sizes)?);
                }
                None => ensure!(spilled == 0, "{what}: no spill fetched"),
            }
            got.sort_unstable();
            if dropped == 0 {
                ensure!(
                    got == want,
                    "{what}: slot + spill rows differ from the rows appended"
                );
            } else {
                ensure!(
                    got.windows(2).all(|w| w[0] != w[1])
                        && got.iter().all(|r| want.binary_search(r).is_ok()),
                    "{what}: a row twice, or one never appended"
                );
            }
        }
        Err(e) => bail!("{what}: {e}"),
    }
    Ok(())
}
