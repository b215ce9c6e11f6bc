//! The two tools that only the maintainers' checks need (building the library, its tests, the
//! seed, the C library and the Python package needs Rust alone):
//! - libclang (bindgen, in `cargo xtask regen`), from apt-get's libclang-dev when missing;
//! - nvcc, for the host programs written in CUDA C++ (examples/seed_capi.cu, mpi_exchange.cu,
//!   seed_fortran_kernel.cu): found by `scripts/find-nvcc.sh` (the one finder; the GPU host's
//!   build scripts use it too), else nvcc 13.0 installed from PyPI into `.venv-nvcc/`.
//!
//! Only what is missing is installed; running it again is cheap.
use crate::{cmd, toolchain};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes sure both tools are here; returns nvcc's path. A `LIBCLANG_PATH` that holds no
/// libclang is dropped from this process's environment (bindgen would believe it).
pub fn ensure(root: &Path) -> Result<PathBuf> {
    if !have_libclang() {
        eprintln!("dev-env: installing libclang-dev (bindgen, for cargo xtask regen)");
        cmd::apt_install(&["libclang-dev"]).context("installing libclang-dev")?;
    }
    if let Some(nvcc) = find_nvcc(root) {
        return Ok(nvcc);
    }
    let venv = root.join(".venv-nvcc");
    eprintln!(
        "dev-env: no nvcc found; installing nvcc 13.0 from PyPI into {} (for the CUDA C++ host \
         programs; about 280 MB on disk, once)",
        venv.display()
    );
    let python = cmd::which("python3").context("python3 is needed to install nvcc")?;
    cmd::run(Command::new(python).arg("-m").arg("venv").arg(&venv))?;
    cmd::run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .args(toolchain::NVCC_13_0),
    )?;
    find_nvcc(root).context("nvcc still not found after the install")
}

/// A working nvcc, as `scripts/find-nvcc.sh` finds it (NVCC, CUDA_HOME, CUDA_PATH, PATH,
/// /usr/local/cuda, an active environment's wheel, `.venv-nvcc/`).
pub fn find_nvcc(root: &Path) -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" >/dev/null 2>&1 && printf %s "$NVCC""#)
        .arg("find-nvcc")
        .arg(root.join("scripts/find-nvcc.sh"))
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// Where bindgen (through clang-sys) looks for libclang when `LIBCLANG_PATH` is unset.
const LIBCLANG_DIRS: &[&str] = &["/usr/lib64", "/usr/local/lib"];

/// Whether bindgen will find a libclang. A `LIBCLANG_PATH` without one is reported and removed
/// from this process's environment.
pub fn have_libclang() -> bool {
    if let Some(p) = std::env::var_os("LIBCLANG_PATH") {
        let p = PathBuf::from(p);
        if libclang_dir(std::slice::from_ref(&p)).is_some() {
            return true;
        }
        eprintln!(
            "dev-env: LIBCLANG_PATH={} holds no libclang.so (libclang-cpp does not count); \
             ignoring it",
            p.display()
        );
        // The tasks run their steps on one thread; the children started later inherit this.
        std::env::remove_var("LIBCLANG_PATH");
    }
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("llvm-") {
            dirs.push(entry.path().join("lib"));
        } else if name.ends_with("-linux-gnu") {
            dirs.push(entry.path());
        }
    }
    dirs.extend(LIBCLANG_DIRS.iter().map(PathBuf::from));
    libclang_dir(&dirs).is_some()
}

/// The first of `dirs` that holds a libclang bindgen accepts: `libclang.so`, `libclang-*.so`,
/// `libclang.so.*` or `libclang-*.so.*`, but not `libclang-cpp*` (the C++ library that
/// clang-format and llvm-*-dev install without the real one).
pub fn libclang_dir(dirs: &[PathBuf]) -> Option<&PathBuf> {
    dirs.iter().find(|d| {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                is_libclang(&name)
            })
    })
}

fn is_libclang(name: &str) -> bool {
    if name.starts_with("libclang-cpp") {
        return false;
    }
    let Some(rest) = name.strip_prefix("libclang") else {
        return false;
    };
    // libclang.so, libclang.so.N...; libclang-V.so, libclang-V.so.N...
    let rest = rest
        .strip_prefix('-')
        .map_or(rest, |r| r.find(".so").map_or("", |i| &r[i..]));
    rest == ".so" || rest.starts_with(".so.")
}

/// `cargo xtask dev-env`: installs what is missing, then prints `export NVCC=...` for a shell's
/// `eval`.
pub fn task(root: &Path) -> Result<()> {
    let nvcc = ensure(root)?;
    let s = nvcc.to_string_lossy();
    if s.contains('\'') {
        bail!("nvcc's path holds a quote: {s}");
    }
    eprintln!("dev-env: NVCC={s}");
    println!("export NVCC='{s}'");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libclang_names_bindgen_accepts() {
        for ok in [
            "libclang.so",
            "libclang.so.1",
            "libclang-14.so",
            "libclang-14.so.1",
            "libclang.so.18.1",
        ] {
            assert!(is_libclang(ok), "{ok}");
        }
        for no in [
            "libclang-cpp.so.14",
            "libclang-cpp.so",
            "libclang.a",
            "libclangBasic.a",
            "libclang-14.a",
            "libclang.so_backup",
        ] {
            assert!(!is_libclang(no), "{no}");
        }
    }

    /// The fake library trees of the set-up's former shell test: a libclang-cpp-only tree has
    /// none; trees with libclang.so or libclang-14.so.1 have one.
    #[test]
    fn libclang_in_fake_trees() {
        let t = cmd::TempDir::new("libclang").unwrap();
        let tree = |name: &str, file: &str| {
            let d = t.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join(file), b"").unwrap();
            d
        };
        let cpp = tree("cpp-only", "libclang-cpp.so.14");
        let real = tree("real", "libclang.so");
        let versioned = tree("versioned", "libclang-14.so.1");
        assert_eq!(libclang_dir(std::slice::from_ref(&cpp)), None);
        assert_eq!(libclang_dir(std::slice::from_ref(&real)), Some(&real));
        assert_eq!(
            libclang_dir(std::slice::from_ref(&versioned)),
            Some(&versioned)
        );
        assert_eq!(
            libclang_dir(&[cpp.clone(), versioned.clone()]),
            Some(&versioned)
        );
    }
}
