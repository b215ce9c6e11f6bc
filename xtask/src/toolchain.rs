//! Every pinned tool the tasks fetch (from PyPI, and mdBook from crates.io); the pins live here
//! only (maturin's is `python/pyproject.toml`'s build requirement, read from there).
//!
//! - The generators (NVRTC 12.0 and 12.8, CUDA 12.0's ptxas), each installed once into
//!   `target/xtask/` with `pip install --no-deps --target` (no nvcc, no CUDA toolkit, no GPU).
//! - nvcc 13.0 for the CUDA C++ host programs, into `.venv-nvcc/` (`cargo xtask dev-env`).
//! - The wheel's tools: zig (maturin's linker for manylinux_2_28) and auditwheel.
//! - mdBook for the guide, from crates.io (`cargo install`, by `cargo xtask guide` under CI).
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

/// nvcc 13.0 and what it needs to compile and link (the CUDA C++ host programs), as pip
/// requirements.
pub const NVCC_13_0: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
];

/// The wheel's linker (`maturin build --zig`) and its check.
pub const WHEEL_TOOLS: &[&str] = &["ziglang==0.13.*", "auditwheel==6.*"];

/// The maturin requirement of `python/pyproject.toml` (`[build-system] requires`), the one
/// place maturin's version is written: pip builds the package with it, and the Python tasks
/// install it.
pub fn maturin_requirement(root: &Path) -> Result<String> {
    let text = std::fs::read_to_string(root.join("python/pyproject.toml"))?;
    let build_system = text
        .split("[build-system]")
        .nth(1)
        .context("python/pyproject.toml has no [build-system]")?;
    let start = build_system
        .find("\"maturin")
        .context("python/pyproject.toml's [build-system] requires no maturin")?
        + 1;
    let len = build_system[start..]
        .find('"')
        .context("an unclosed string")?;
    Ok(build_system[start..start + len].to_string())
}

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
    crate::cmd::target_dir(root).join("xtask")
}

/// mdBook, which builds and tests the guide (`docs/guide`); `cargo xtask guide` installs this
/// version with `cargo install --locked` under CI.
pub const MDBOOK: &str = "0.5.4";

#[cfg(test)]
mod tests {
    #[test]
    fn maturin_requirement_is_pyprojects() {
        let r = super::maturin_requirement(&crate::cmd::root()).unwrap();
        assert!(r.starts_with("maturin>=") && r.contains(",<"), "{r}");
    }
}
