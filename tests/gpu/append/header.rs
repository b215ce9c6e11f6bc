//! The shipped header `include/sized_readback/append.cuh`: self-contained, and usable from a
//! kernel NVRTC compiles.
use super::ctx;
use super::rows::schema_of;
use anyhow::{ensure, Context as _, Result};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use sized_readback::testing::pattern;
use sized_readback::{AppendReadback, ReadbackConfig};
use test_support::source_root::source_root;

/// A kernel that includes the header, compiled at run time by `append::compile` (NVRTC,
/// straight to machine code for this device), appends what the host model says.
pub(super) fn nvrtc_kernel_through_the_header() -> Result<()> {
    const KERNEL: &str = r#"
extern "C" __global__ void odd(srb_append_desc d, const unsigned long long* x, unsigned long long n) {
    using Append = srb::BlockAppend<128, unsigned long long>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (unsigned long long b = (unsigned long long)blockIdx.x * 128; b < n; b += (unsigned long long)gridDim.x * 128) {
        unsigned long long i = b + threadIdx.x;
        bool keep = i < n && (x[i] & 1);
        app.append(keep, keep ? x[i] : 0ull);
    }
    app.finish();
}
"#;
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let src = format!("#include <sized_readback/append.cuh>\n{KERNEL}");
    let f = ctx
        .load_module(sized_readback::append::compile(&ctx, &src, &[])?)?
        .load_function("odd")?;
    let host: Vec<u64> = (0..100_000u64).map(pattern::mix).collect();
    let x = stream.clone_htod(&host)?;
    let n = host.len() as u64;
    let rb = AppendReadback::new(&ctx, &schema_of(&[8]), ReadbackConfig::new(host.len()))?;
    let ticket = rb.append(&stream, |d| {
        let mut b = stream.launch_builder(&f);
        b.arg(d).arg(&x).arg(&n);
        let cfg = LaunchConfig {
            grid_dim: (50, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: odd(srb_append_desc, const unsigned long long*, unsigned long long), 128
        // threads per block as its BlockAppend.
        unsafe { b.launch(cfg) }.map(drop)
    })?;
    let out = ticket.wait()?;
    let mut got: Vec<u64> = out.column_as::<u64>(0)?.to_vec();
    got.sort_unstable();
    let mut want: Vec<u64> = host.iter().copied().filter(|v| v & 1 == 1).collect();
    want.sort_unstable();
    ensure!(got == want, "{} rows, {} expected", got.len(), want.len());
    Ok(())
}

/// The header's own rules, checked on the host side: it compiles as a self-contained source
/// (HEADER) and its include directory holds both files.
pub(super) fn header_is_shipped() -> Result<()> {
    // INCLUDE_DIR is the build machine's path (for dependents' build scripts); the files are
    // looked for in this copy of the tree.
    ensure!(sized_readback::append::INCLUDE_DIR.ends_with("/include"));
    let dir = source_root().join("include");
    for f in ["sized_readback/append.cuh", "sized_readback/slot.h"] {
        ensure!(dir.join(f).is_file(), "{f} missing from {}", dir.display());
    }
    // The one system include (C's <stdint.h>) is the non-NVRTC branch of slot.h.
    let h = sized_readback::append::HEADER;
    let includes: Vec<&str> = h
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("#include <"))
        .collect();
    ensure!(
        includes == ["#include <stdint.h>"],
        "system includes {includes:?}"
    );
    let rtc = h
        .find("#if defined(__CUDACC_RTC__)")
        .context("no NVRTC branch")?;
    let other = rtc + h[rtc..].find("#else").context("no #else")?;
    let std = h.find("#include <stdint.h>").context("stdint")?;
    ensure!(other < std && std < other + h[other..].find("#endif").context("#endif")?);
    Ok(())
}
