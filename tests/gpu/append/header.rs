//! The shipped header `include/sized_readback/append.cuh`: self-contained, and usable from a
//! kernel NVRTC compiles.
use super::ctx;
use super::rows::schema_of;
use anyhow::{ensure, Context as _, Result};
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use sized_readback::testing::pattern;
use sized_readback::{AppendReadback, ReadbackConfig};
use std::sync::Arc;
use test_support::source_root::source_root;

/// `source` compiled by NVRTC straight to machine code for `ctx`'s device (`sm_XY` from its
/// compute capability), as the append docs recommend: no PTX reaches the driver, so the NVRTC's
/// version never has to be one the driver can JIT.
fn nvrtc_cubin(ctx: &Arc<CudaContext>, source: &str) -> Result<cudarc::nvrtc::Ptx> {
    use cudarc::nvrtc::{result, sys};
    let (major, minor) = sized_readback::device::compute_capability(ctx)?;
    let src = std::ffi::CString::new(source)?;
    let prog = result::create_program(&src, None)?;
    let opts = [
        format!("--gpu-architecture=sm_{major}{minor}"),
        "-std=c++17".into(),
    ];
    // SAFETY: a live program, destroyed once below whatever happened; compiled for a real
    // architecture, so it holds a cubin of the size NVRTC reports.
    let cubin = unsafe {
        let built = result::compile_program(prog, &opts)
            .map_err(|e| {
                let log = result::get_program_log(prog).unwrap_or_default();
                let log: Vec<u8> = log.iter().map(|&c| c as u8).collect();
                anyhow::anyhow!("NVRTC: {e:?}: {}", String::from_utf8_lossy(&log))
            })
            .and_then(|()| {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
                let mut cubin = vec![0u8; size];
                sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()).result()?;
                Ok(cubin)
            });
        result::destroy_program(prog)?;
        built?
    };
    ensure!(cubin.starts_with(b"\x7fELF"), "NVRTC gave no cubin");
    Ok(cudarc::nvrtc::Ptx::from_binary(cubin))
}

/// A kernel compiled at run time with NVRTC from the header, straight to machine code for this
/// device (the path the append docs recommend to users).
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
    let src = format!("{}\n{KERNEL}", sized_readback::append::HEADER);
    let f = ctx
        .load_module(nvrtc_cubin(&ctx, &src)?)?
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
