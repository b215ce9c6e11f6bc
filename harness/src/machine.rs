//! The machine a run is made on: the GPU as the driver reports it, nvidia-smi's view of its
//! PCIe link, the host's CPUs; and the run's commit and date.
use crate::cuda;
use crate::data::Machine;
use anyhow::{Context, Result};
use sized_readback::cudarc::driver::{sys, CudaContext};
use std::sync::Arc;

/// The trimmed stdout of `cmd args` if it ran and succeeded.
pub fn shell(cmd: &str, args: &[&str]) -> Option<String> {
    let o = std::process::Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Describes the context's device and this host.
pub fn describe(ctx: &Arc<CudaContext>) -> Result<Machine> {
    let (maj, min) = ctx.compute_capability().context("compute capability")?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("SM count")?;
    let mut ver = 0;
    // SAFETY: valid out-pointer.
    let status = unsafe { sys::cuDriverGetVersion(&mut ver) };
    cuda::check(status, "cuDriverGetVersion")?;
    let mut bus = [0 as std::ffi::c_char; 64];
    // SAFETY: the buffer holds 64 bytes; the device handle is the context's.
    let status = unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, ctx.cu_device()) };
    cuda::check(status, "cuDeviceGetPCIBusId")?;
    // SAFETY: NUL-terminated by the driver within 64 bytes.
    let bus = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let smi = shell(
        "nvidia-smi",
        &[
            "--query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max",
            "--format=csv,noheader",
            "-i",
            &bus,
        ],
    );
    let pcie_link = smi.as_ref().and_then(|s| {
        let f: Vec<&str> = s.split(',').map(str::trim).collect();
        (f.len() >= 6).then(|| format!("Gen{} x{} (max Gen{} x{})", f[2], f[3], f[4], f[5]))
    });
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|x| x.trim().to_string())
    });
    Ok(Machine {
        gpu: ctx.name().context("device name")?,
        compute_capability: format!("{maj}.{min}"),
        multiprocessors: sms,
        pci_bus_id: bus,
        cuda_driver_api: format!("{}.{}", ver / 1000, (ver % 1000) / 10),
        nvidia_smi: smi,
        pcie_link,
        host_cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        host_cpu_model: cpu_model,
        fatbin_targets: sized_readback::KERNEL_TARGETS,
        kernel_image: sized_readback::KernelImage::for_context(ctx)?.to_string(),
    })
}

/// The commit measured: `SRB_COMMIT` (set by scripts/gpu-verify.sh, as the GPU host's copy
/// may have no git metadata), else `git rev-parse --short HEAD`, else "unknown".
pub fn commit() -> String {
    std::env::var("SRB_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| shell("git", &["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".into())
}

/// Now, as `date -u +%Y-%m-%dT%H:%M:%SZ` prints it (else Unix seconds).
pub fn date_utc() -> String {
    shell("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_else(|| {
        let s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        format!("unix {s}")
    })
}
