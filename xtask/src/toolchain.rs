//! The pinned generators, each installed once from PyPI into `target/xtask/` with
//! `pip install --no-deps --target` (no nvcc, no CUDA toolkit, no GPU). The pins live here only.
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A wheel and the file inside it that a task uses.
pub struct Pin {
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the tool inside the install folder.
    pub file: &'static str,
}

/// NVRTC 12.0: PTX `.version 8.0` (JIT-able by R525+ drivers) and sm_70–sm_90 machine code.
pub const NVRTC_12_0: Pin = Pin {
    package: "nvidia-cuda-nvrtc-cu12",
    version: "12.0.140",
    file: "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
};
/// NVRTC 12.8: machine code for Blackwell (sm_100, sm_120), whose drivers are all R570+.
pub const NVRTC_12_8: Pin = Pin {
    package: "nvidia-cuda-nvrtc-cu12",
    version: "12.8.93",
    file: "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
};
/// CUDA 12.0's ptxas: the stand-in for an R525 driver's PTX JIT.
pub const PTXAS_12_0: Pin = Pin {
    package: "nvidia-cuda-nvcc-cu12",
    version: "12.0.140",
    file: "nvidia/cuda_nvcc/bin/ptxas",
};

/// The pinned tool's path, installing its wheel first if this checkout has not yet.
pub fn install(root: &Path, pin: &Pin) -> Result<PathBuf> {
    let dir = cache_dir(root).join(format!("{}-{}", pin.package, pin.version));
    let tool = dir.join(pin.file);
    if tool.exists() {
        return Ok(tool);
    }
    let spec = format!("{}=={}", pin.package, pin.version);
    eprintln!("xtask: installing {spec} into {}", dir.display());
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(&dir)
        .arg(&spec)
        .status()
        .with_context(|| format!("running {python} -m pip (pip is needed to fetch {spec})"))?;
    if !status.success() || !tool.exists() {
        bail!("pip install {spec} failed or did not provide {}", pin.file);
    }
    Ok(tool)
}

fn cache_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("xtask")
}
