//! `cargo xtask python install|test|wheel`: the Python package (python/, `import
//! sized_readback`).
//!
//! - `install`: builds the extension (maturin, release) and pip-installs ./python;
//! - `test [ARGS]`: pytest python/tests (GPU tests are skipped without a GPU);
//! - `wheel DIR`: an abi3 wheel (cp39-abi3, manylinux_2_28) into DIR, for other hosts.
//!
//! It uses the active virtual environment (VIRTUAL_ENV or CONDA_PREFIX), else makes
//! python/.venv/, installing python3-venv through apt-get when Debian's python3 lacks it (as
//! root, or with sudo). The build needs Rust, and neither nvcc nor libclang (the kernels are
//! committed). The wheel is linked by maturin's zig linker (ziglang from PyPI) against glibc
//! 2.28's symbols (RHEL/Rocky 8 and newer) and checked with auditwheel. Every version pin is in
//! `toolchain` (maturin's is the package's own build requirement).
use crate::{cmd, toolchain};
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Subcommand)]
pub enum Python {
    /// Build the extension (maturin, release) and pip-install ./python with pytest, numpy and hypothesis.
    Install,
    /// Run pytest over python/tests (GPU tests are skipped without a GPU).
    Test {
        /// More arguments for pytest.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build the abi3 manylinux_2_28 wheel into DIR and check it with auditwheel.
    Wheel { dir: PathBuf },
}

pub fn task(root: &Path, what: Python) -> Result<()> {
    let py = interpreter(root)?;
    let pip = |args: &[&str]| {
        cmd::run(
            Command::new(&py)
                .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .args(args)
                .current_dir(root),
        )
    };
    match what {
        Python::Install => {
            let path = build_tools(root, &py, &pip)?;
            pip(&["pytest", "numpy", "hypothesis"])?;
            // --no-build-isolation: build with the maturin just installed (pinned), not a
            // fresh one.
            cmd::run(
                Command::new(&py)
                    .args(["-m", "pip", "install", "--disable-pip-version-check"])
                    .args(["--no-build-isolation", "--force-reinstall", "--no-deps"])
                    .arg("./python")
                    .env("PATH", path)
                    .current_dir(root),
            )?;
            cmd::run(Command::new(&py).args([
                "-c",
                "import sized_readback as s; print('python: installed sized_readback', \
                 s.__version__, 'kernels', s.KERNEL_TARGETS)",
            ]))
        }
        Python::Test { args } => {
            let imported = Command::new(&py)
                .args(["-c", "import sized_readback"])
                .output()?;
            if !imported.status.success() {
                bail!(
                    "sized_readback is not installed in {}: run `cargo xtask python install` first",
                    py.display()
                );
            }
            cmd::run(
                Command::new(&py)
                    .args(["-m", "pytest", "python/tests", "-rs"])
                    .args(args)
                    .current_dir(root),
            )
        }
        Python::Wheel { dir } => {
            std::fs::create_dir_all(&dir)?;
            let dir = dir.canonicalize()?;
            let path = build_tools(root, &py, &pip)?;
            pip(toolchain::WHEEL_TOOLS)?;
            for old in wheels(&dir)? {
                std::fs::remove_file(old)?;
            }
            // abi3-py39: one wheel for every CPython >= 3.9; it links no CUDA library (libcuda
            // is loaded at run time).
            cmd::run(
                Command::new(&py)
                    .args(["-m", "maturin", "build", "--release"])
                    .args(["--manifest-path", "python/Cargo.toml", "--out"])
                    .arg(&dir)
                    .args(["--zig", "--compatibility", "manylinux_2_28"])
                    .env("PATH", path)
                    .current_dir(root),
            )?;
            let whl = match wheels(&dir)?.as_slice() {
                [one] => one.clone(),
                other => bail!("expected one wheel in {}, found {other:?}", dir.display()),
            };
            let report = cmd::output(
                Command::new(&py)
                    .args(["-m", "auditwheel", "show"])
                    .arg(&whl),
            )?;
            println!("{report}");
            // auditwheel folds its lines; one line makes the verdict findable.
            let one_line = report.split_whitespace().collect::<Vec<_>>().join(" ");
            if !one_line
                .contains("consistent with the following platform tag: \"manylinux_2_28_x86_64\"")
            {
                bail!(
                    "auditwheel does not place {} at manylinux_2_28",
                    whl.display()
                );
            }
            println!(
                "python: {} ({} bytes)",
                whl.display(),
                std::fs::metadata(&whl)?.len()
            );
            Ok(())
        }
    }
}

/// The `sized_readback-*.whl` files in `dir`.
fn wheels(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("sized_readback-") && n.ends_with(".whl")
            })
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Installs maturin (the package's pinned build requirement) and returns a PATH with the
/// interpreter's bin/ first (the PEP 517 backend runs the `maturin` executable by name).
fn build_tools(
    root: &Path,
    py: &Path,
    pip: &dyn Fn(&[&str]) -> Result<()>,
) -> Result<std::ffi::OsString> {
    pip(&[toolchain::maturin_requirement(root)?.as_str()])?;
    let bin = py.parent().context("the interpreter's folder")?;
    let mut dirs = vec![bin.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    Ok(std::env::join_paths(dirs)?)
}

/// The interpreter to install into and run with: the active virtual or conda environment's,
/// else python/.venv's (made on first use).
fn interpreter(root: &Path) -> Result<PathBuf> {
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(env) = std::env::var_os(var) {
            let py = PathBuf::from(env).join("bin/python");
            if py.is_file() {
                return Ok(py);
            }
        }
    }
    let venv = root.join("python/.venv");
    let py = venv.join("bin/python");
    if py.is_file() {
        return Ok(py);
    }
    let system = cmd::which("python3").context("python3 is needed")?;
    let has_venv = Command::new(&system)
        .args(["-c", "import ensurepip, venv"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_venv {
        eprintln!("python: installing python3-venv (Debian's python3 has no ensurepip without it)");
        cmd::apt_install(&["python3-venv", "python3-dev"]).context("installing python3-venv")?;
    }
    eprintln!("python: creating {}", venv.display());
    cmd::run(Command::new(&system).arg("-m").arg("venv").arg(&venv))?;
    Ok(py)
}
