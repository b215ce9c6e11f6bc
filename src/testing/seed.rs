//! The seed program (`shared/seed/000_22854d1e0a2c547f.txt`), ported: two compute streams,
//! one copy stream, events, three cycles whose kernels set the count to 5, 3 and 4, and the
//! host printing `h_array[0..7]` and `h_size` after each readback.
//!
//! [`SeedStrategy::Readback`] reads back through this crate and prints the seed's expected
//! values; [`SeedStrategy::Naive`] is the seed's own `communication` (two back-to-back async
//! copies, the second sized by a stale host value) and prints its wrong ones;
//! [`SeedStrategy::Sync`] is the seed's "Solution 1" (`cudaStreamSynchronize` between the two
//! copies): right, but the host blocks before it can launch the next kernel.
//!
//! Device memory is raw (`cuMemAlloc`), as in the seed, so ordering is by explicit events
//! (`compute_done`), not cudarc's tracking.
use crate::error::{Error, Result};
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::driver;
use crate::{LaunchShape, RawCount, Readback, ReadbackConfig, Transport};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::ffi::c_void;
use std::io::Write;
use std::sync::Arc;

/// How the seed program brings `h_size` and `h_array` back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedStrategy {
    /// This crate's readback over the given transport.
    Readback(Transport),
    /// The seed's bug: the second copy's size is the host value at enqueue time.
    Naive,
    /// The seed's "Solution 1": synchronize the copy stream between the two copies.
    Sync,
    /// The seed's kernel appends its results straight into the slot of an
    /// [`crate::AppendReadback`] over the given transport: no count in device memory, no copy.
    Append(Transport),
}

/// Options of [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedOptions {
    /// How to read back.
    pub strategy: SeedStrategy,
    /// Milliseconds thread 0 of each kernel sleeps (the seed: 3000 x 1 ms).
    pub sleep_ms: u32,
    /// Let the kernel `printf` the count as the seed's does (to the process's stdout).
    pub kernel_printf: bool,
}

impl Default for SeedOptions {
    fn default() -> Self {
        SeedOptions {
            strategy: SeedStrategy::Readback(Transport::Mapped),
            sleep_ms: 3000,
            kernel_printf: true,
        }
    }
}

/// The seed's expected output: the lines its `cpuWork` prints when every readback is right.
pub const EXPECTED: &str = "\
From kernel launch 0
h_array[0] = 1.14
h_array[1] = 3.14
h_array[2] = 5.14
h_array[3] = 7.14
h_array[4] = 9.14
h_array[5] = 0.14
h_array[6] = 0.14
h_size[0] = 5
From kernel launch 1
h_array[0] = 1.14
h_array[1] = 4.14
h_array[2] = 7.14
h_array[3] = 7.14
h_array[4] = 9.14
h_array[5] = 0.14
h_array[6] = 0.14
h_size[1] = 3
From kernel launch 2
h_array[0] = 2.14
h_array[1] = 8.14
h_array[2] = 14.14
h_array[3] = 20.14
h_array[4] = 9.14
h_array[5] = 0.14
h_array[6] = 0.14
h_size[0] = 4
";

/// What the seed reports its program prints (the stale-size bug), per its "NO prints" notes.
pub const NAIVE: &str = "\
From kernel launch 0
h_array[0] = 1.14
h_array[1] = 3.14
h_array[2] = 0.14
h_array[3] = 0.14
h_array[4] = 0.14
h_array[5] = 0.14
h_array[6] = 0.14
h_size[0] = 5
From kernel launch 1
h_array[0] = 1.14
h_array[1] = 4.14
h_array[2] = 7.14
h_array[3] = 10.14
h_array[4] = 13.14
h_array[5] = 16.14
h_array[6] = 19.14
h_size[1] = 3
From kernel launch 2
h_array[0] = 2.14
h_array[1] = 8.14
h_array[2] = 14.14
h_array[3] = 20.14
h_array[4] = 26.14
h_array[5] = 16.14
h_array[6] = 19.14
h_size[0] = 4
";

const BUFFER_SIZE: usize = 1 << 18;
const BLOCK: u32 = 256;
const CYCLES: i32 = 3;

/// Formats a double as C++'s `std::cout << x` does by default (`%g`, 6 significant digits).
pub fn format_like_cout(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exp = x.abs().log10().floor() as i32;
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..6).contains(&exp) {
        trim(format!("{:.*}", (5 - exp).max(0) as usize, x))
    } else {
        let s = format!("{x:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!(
            "{}e{}{:02}",
            trim(mantissa.to_string()),
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    }
}

/// Prints what the seed's `cpuWork` prints for cycle `k`.
pub fn cpu_work(
    out: &mut impl Write,
    k: i32,
    h_array: &[f64],
    h_size: &[i32; 2],
) -> std::io::Result<()> {
    writeln!(out, "From kernel launch {k}")?;
    for (i, v) in h_array.iter().take(7).enumerate() {
        writeln!(out, "h_array[{i}] = {}", format_like_cout(*v))?;
    }
    writeln!(out, "h_size[{}] = {}", k % 2, h_size[(k % 2) as usize])
}

fn bind(ctx: &CudaContext) -> Result<()> {
    driver::bind(ctx)
}

/// A failed write of the program's output (to the caller's writer), as an error value.
fn io(e: std::io::Error) -> Error {
    Error::config(format!("writing the output: {e}"))
}

/// Runs the seed program on `ctx`, writing what its `cpuWork` prints to `out`.
pub fn run(ctx: &Arc<CudaContext>, opts: SeedOptions, out: &mut impl Write) -> Result<()> {
    if let SeedStrategy::Append(t) = opts.strategy {
        return run_append(ctx, t, opts.sleep_ms, out);
    }
    bind(ctx)?;
    let kernel = super::Kernels::load(ctx)?.function("seed_kernel")?;
    let num_blocks = BUFFER_SIZE.div_ceil(BLOCK as usize) as u32;

    // Host buffers: h_size = {2, 7}, h_array = 0.14 everywhere (pinned, as in the seed).
    let h_size_buf = PinnedBuffer::new(ctx, 2 * 4, false)?;
    let h_array_buf = PinnedBuffer::new(ctx, BUFFER_SIZE * 8, false)?;
    let h_size_ptr = h_size_buf.host_ptr().cast::<i32>();
    let h_array_ptr = h_array_buf.host_ptr().cast::<f64>();
    // SAFETY: both buffers are pinned allocations of the sizes above, owned here; the device
    // writes them only through copies this function enqueues and waits for.
    unsafe {
        *h_size_ptr = 2;
        *h_size_ptr.add(1) = 7;
        for i in 0..BUFFER_SIZE {
            *h_array_ptr.add(i) = 0.14;
        }
    }
    let d_size = DeviceBuffer::new_zeroed(ctx, 2 * 4)?;
    let d_array = DeviceBuffer::new_zeroed(ctx, 2 * BUFFER_SIZE * 8)?;
    let init: Vec<u8> = (0..2 * BUFFER_SIZE)
        .flat_map(|_| 0.14f64.to_le_bytes())
        .collect();
    // SAFETY: d_size holds 8 bytes and d_array 2 * BUFFER_SIZE doubles; the context is bound.
    unsafe {
        driver::memcpy_htod(
            d_size.ptr(),
            &[2i32.to_le_bytes(), 7i32.to_le_bytes()].concat(),
        )?;
        driver::memcpy_htod(d_array.ptr(), &init)?;
    }

    let compute = [
        ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
        ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
    ];
    let copy = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let new_event = || ctx.new_event(None).map_err(Error::cuda("cuEventCreate"));
    let compute_done = [new_event()?, new_event()?];
    let copy_done = new_event()?;
    let readback = match opts.strategy {
        SeedStrategy::Readback(t) => Some(Readback::<f64>::with_config(
            ctx,
            ReadbackConfig::new(BUFFER_SIZE).slots(2).transport(t),
        )?),
        _ => None,
    };
    ctx.synchronize().map_err(Error::cuda("cuCtxSynchronize"))?;

    let size_addr = |i: usize| d_size.ptr() + (i * 4) as u64;
    let array_addr = |i: usize| d_array.ptr() + (i * BUFFER_SIZE * 8) as u64;
    let launch = |k: i32| -> Result<()> {
        let b = (k % 2) as usize;
        let mut arr = array_addr(b);
        let mut size = size_addr(b);
        let mut kk = k;
        let mut sleep = opts.sleep_ms;
        let mut print = i32::from(opts.kernel_printf);
        let mut args = [
            (&mut arr as *mut u64).cast::<c_void>(),
            (&mut size as *mut u64).cast(),
            (&mut kk as *mut i32).cast(),
            (&mut sleep as *mut u32).cast(),
            (&mut print as *mut i32).cast(),
        ];
        let shape = LaunchShape {
            grid: num_blocks,
            block: BLOCK,
            programmatic: false,
        };
        // SAFETY: seed_kernel(double*, int*, int, unsigned, int) with matching argument types;
        // it touches num_blocks * BLOCK = BUFFER_SIZE doubles of buffer b and one count.
        unsafe { kernel.launch(compute[b].cu_stream(), shape, &mut args)? };
        compute_done[b]
            .record(&compute[b])
            .map_err(Error::cuda("cuEventRecord"))
    };

    // One readback in flight: for the crate's strategy a ticket, else the copies done event.
    let communicate = |k: i32| -> Result<Option<crate::Ticket<f64>>> {
        let b = (k % 2) as usize;
        match &readback {
            Some(rb) => {
                // SAFETY: both addresses lie in buffers of this context that live until the
                // end of `run`, which waits for every ticket; compute_done orders the readback
                // after the kernel that writes them, and the next kernel writing buffer b is
                // launched only after this ticket has been waited on.
                let ticket = unsafe {
                    rb.enqueue_raw(
                        &copy,
                        Some(&compute_done[b]),
                        array_addr(b),
                        BUFFER_SIZE,
                        RawCount::i32(size_addr(b)),
                    )?
                };
                Ok(Some(ticket))
            }
            None => {
                naive_or_sync(
                    &copy,
                    &compute_done[b],
                    &copy_done,
                    opts.strategy,
                    h_size_ptr,
                    b,
                    h_array_ptr,
                    size_addr(b),
                    array_addr(b),
                )?;
                Ok(None)
            }
        }
    };

    // Copies a finished readback into the seed's h_array / h_size, as its memcpy would.
    let receive = |ticket: Option<crate::Ticket<f64>>, k: i32| -> Result<()> {
        let b = (k % 2) as usize;
        match ticket {
            Some(t) => {
                let r = t.wait()?;
                // SAFETY: h_array holds BUFFER_SIZE >= count doubles and h_size two ints; no
                // device work targets them in this strategy.
                unsafe {
                    std::ptr::copy_nonoverlapping(r.as_slice().as_ptr(), h_array_ptr, r.count());
                    *h_size_ptr.add(b) = r.count() as i32;
                }
                Ok(())
            }
            None => copy_done
                .synchronize()
                .map_err(Error::cuda("cuEventSynchronize")),
        }
    };

    let snapshot = || -> ([f64; 7], [i32; 2]) {
        // SAFETY: all copies into these buffers have completed (receive waited for them).
        unsafe {
            let mut a = [0.0; 7];
            std::ptr::copy_nonoverlapping(h_array_ptr, a.as_mut_ptr(), 7);
            (a, [*h_size_ptr, *h_size_ptr.add(1)])
        }
    };

    launch(0)?;
    for k in 1..CYCLES {
        let pending = communicate(k - 1)?;
        // The next kernel goes in as early as the strategy allows.
        launch(k)?;
        receive(pending, k - 1)?;
        let (a, s) = snapshot();
        cpu_work(out, k - 1, &a, &s).map_err(io)?;
    }
    let k = CYCLES - 1;
    let pending = communicate(k)?;
    receive(pending, k)?;
    let (a, s) = snapshot();
    cpu_work(out, k, &a, &s).map_err(io)?;
    ctx.synchronize().map_err(Error::cuda("cuCtxSynchronize"))?;
    Ok(())
}

/// The seed program with its kernel appending into the slot (`seed_append_kernel`): kernel k
/// goes in on compute stream k % 2 as soon as kernel k - 1 is launched, and the host then waits
/// for readback k - 1, copies its rows into `h_array` by their index (rows come in no
/// particular order) and its count into `h_size`, and prints, as the seed's cpuWork does.
fn run_append(
    ctx: &Arc<CudaContext>,
    transport: Transport,
    sleep_ms: u32,
    out: &mut impl Write,
) -> Result<()> {
    bind(ctx)?;
    let kernel = super::Kernels::load(ctx)?.function("seed_append_kernel")?;
    let num_blocks = BUFFER_SIZE.div_ceil(BLOCK as usize) as u32;
    let d_array = DeviceBuffer::new_zeroed(ctx, 2 * BUFFER_SIZE * 8)?;
    let init: Vec<u8> = (0..2 * BUFFER_SIZE)
        .flat_map(|_| 0.14f64.to_le_bytes())
        .collect();
    // SAFETY: d_array holds 2 * BUFFER_SIZE doubles; the context is bound.
    unsafe { driver::memcpy_htod(d_array.ptr(), &init)? };
    let mut schema = crate::ColumnSchema::new();
    let value = schema.column::<f64>();
    let index = schema.column::<i32>();
    let rb = crate::AppendReadback::new(
        ctx,
        &schema,
        ReadbackConfig::new(BUFFER_SIZE)
            .slots(2)
            .transport(transport),
    )?;
    let compute = [
        ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
        ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
    ];
    let mut h_array = vec![0.14f64; BUFFER_SIZE];
    let mut h_size = [2i32, 7];
    let launch = |k: i32| -> Result<crate::AppendTicket> {
        let b = (k % 2) as usize;
        rb.append(&compute[b], |d| {
            let mut desc = *d;
            let mut arr = d_array.ptr() + (b * BUFFER_SIZE * 8) as u64;
            let (mut kk, mut sleep) = (k, sleep_ms);
            let mut args = [
                (&mut desc as *mut crate::AppendDesc).cast::<c_void>(),
                (&mut arr as *mut u64).cast(),
                (&mut kk as *mut i32).cast(),
                (&mut sleep as *mut u32).cast(),
            ];
            let shape = LaunchShape {
                grid: num_blocks,
                block: BLOCK,
                programmatic: false,
            };
            // SAFETY: seed_append_kernel(srb_append_desc, double*, int, unsigned), 256 threads
            // per block as its BlockAppend; it touches BUFFER_SIZE doubles of buffer b.
            unsafe { kernel.launch(compute[b].cu_stream(), shape, &mut args) }.map_err(
                |e| match e {
                    Error::Cuda { source, .. } => source,
                    _ => cudarc::driver::DriverError(
                        cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_FAILED,
                    ),
                },
            )
        })
    };
    let mut receive = |t: crate::AppendTicket, k: i32| -> Result<()> {
        let r = t.wait()?;
        for (&v, &i) in r.column(value).iter().zip(r.column(index)) {
            h_array[i as usize] = v;
        }
        h_size[(k % 2) as usize] = r.count() as i32;
        cpu_work(out, k, &h_array, &h_size).map_err(io)
    };
    let mut pending = launch(0)?;
    for k in 1..CYCLES {
        let next = launch(k)?;
        receive(std::mem::replace(&mut pending, next), k - 1)?;
    }
    receive(pending, CYCLES - 1)?;
    ctx.synchronize().map_err(Error::cuda("cuCtxSynchronize"))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn naive_or_sync(
    copy: &CudaStream,
    compute_done: &CudaEvent,
    copy_done: &CudaEvent,
    strategy: SeedStrategy,
    h_size: *mut i32,
    b: usize,
    h_array: *mut f64,
    d_size: u64,
    d_array: u64,
) -> Result<()> {
    copy.wait(compute_done)
        .map_err(Error::cuda("cuStreamWaitEvent"))?;
    // SAFETY: h_size and h_array are pinned buffers of 2 ints and BUFFER_SIZE doubles that
    // outlive the copies (run waits on copy_done); the device ranges are in bounds, since the
    // counts the seed's kernels write (and the initial 2 and 7) are <= BUFFER_SIZE.
    unsafe {
        driver::memcpy_dtoh_async(h_size.add(b).cast(), d_size, 4, copy.cu_stream())?;
        if strategy == SeedStrategy::Sync {
            copy.synchronize()
                .map_err(Error::cuda("cuStreamSynchronize"))?;
        }
        // The seed's bug: h_size[b] is read here, when the copy is enqueued.
        let n = (*h_size.add(b)).clamp(0, BUFFER_SIZE as i32) as usize;
        driver::memcpy_dtoh_async(h_array.cast(), d_array, n * 8, copy.cu_stream())?;
    }
    copy_done.record(copy).map_err(Error::cuda("cuEventRecord"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_doubles_like_cout() {
        assert_eq!(format_like_cout(0.14 + 1.0), "1.14");
        assert_eq!(format_like_cout(0.14 + 1.0 + 2.0 * 13.0), "27.14");
        assert_eq!(format_like_cout(2.14 + 6.0 * 3.0), "20.14");
        assert_eq!(format_like_cout(0.14), "0.14");
        assert_eq!(format_like_cout(5.0), "5");
        assert_eq!(format_like_cout(123456.7), "123457");
        assert_eq!(format_like_cout(1234567.0), "1.23457e+06");
        assert_eq!(format_like_cout(0.0001), "0.0001");
        assert_eq!(format_like_cout(0.00001), "1e-05");
        assert_eq!(format_like_cout(-3.5), "-3.5");
    }

    #[test]
    fn expected_outputs_have_the_seed_shape() {
        for text in [EXPECTED, NAIVE] {
            let lines: Vec<_> = text.lines().collect();
            assert_eq!(lines.len(), 27);
            assert_eq!(lines.iter().filter(|l| l.starts_with("h_")).count(), 24);
        }
        // Where the seed is right and wrong: launch 0 elements 2..5, launch 1 elements 3..7,
        // launch 2 elements 4..7 differ; everything else agrees.
        let diff = EXPECTED
            .lines()
            .zip(NAIVE.lines())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(diff, 3 + 4 + 3);
    }
}
