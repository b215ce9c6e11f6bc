//! `cargo xtask ci [CARGO-TEST-ARGS]`: every check, as CI runs it (`.ci/run`, through the
//! README's test command `bash scripts/test.sh`), on a machine without a GPU or CUDA toolkit.
//!
//! Formatting, lints, the module import cycles and the source files' length; the README's and
//! the guide's tables, pictures and links; the guide's mdBook build and Rust examples; every
//! test; then the install story and the packages: the library, its tests and the seed build
//! with Rust alone (the kernels and the slot bindings are committed); the packaged crate builds
//! for a dependent and for docs.rs with no CUDA toolkit or libclang; the committed kernel
//! images are regenerated and compared byte for byte, and their PTX assembled by CUDA 12.0's
//! ptxas (`dev-env` first installs libclang for bindgen, and nvcc for the CUDA C++ host
//! programs); the C API's packages and the README's and the guide's C, Fortran and CUDA code,
//! the host programs on it, and the Python package and its manylinux_2_28 wheel. CMake,
//! pkg-config, a C/C++ and Fortran compiler and mpicxx come from `.ci/run`; elsewhere a step
//! whose tool is missing says so and skips, except under `SRB_CI=1`. Without a GPU the GPU
//! tests are reported as ignored; with one, they run.
use crate::{
    cmd, cycles, dependent, dev_env, file_length, guide, host_programs, install_capi, kernels,
    packages, python,
};
use anyhow::{ensure, Result};
use std::path::Path;
use std::process::Command;

pub fn task(root: &Path, test_args: &[String]) -> Result<()> {
    let cargo = || cmd::cargo(root);
    let has = |sub: &str| {
        cmd::cargo(root)
            .args([sub, "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has("fmt") {
        cmd::run(cargo().args(["fmt", "--all", "--check"]))?;
    } else {
        eprintln!("ci: rustfmt not installed, skipping the format check");
    }
    // No import cycle among capi/src's modules; src/engine's and python/src's are printed
    // until their cycles are gone (then cycles::ENFORCED takes them).
    cycles::ci(root)?;
    // No source file over 700 lines (issue 32), generated ones aside.
    file_length::check(root)?;
    // The tables of committed results in the README and the guide against their JSON records.
    cmd::run(
        Command::new("python3")
            .args(["scripts/readme-tables.py", "--check"])
            .current_dir(root),
    )?;
    // results/README.md, the index of committed runs, against the records (and its self-test).
    cmd::run(
        Command::new("python3")
            .args(["scripts/results-index.py", "--self-test", "--check"])
            .current_dir(root),
    )?;
    // The pictures of committed runs (docs/pictures/*.svg) against their records.
    cmd::run(
        Command::new("python3")
            .args(["scripts/pictures.py", "--check"])
            .current_dir(root),
    )?;
    // The README's and the guide's links to files of the repository resolve.
    cmd::run(
        Command::new("python3")
            .args(["scripts/doc-links.py", "--self-test", "--check"])
            .current_dir(root),
    )?;
    // The guide's Python API reference matches the package's docstrings.
    cmd::run(
        Command::new("python3")
            .args(["scripts/python-api.py", "--check"])
            .current_dir(root),
    )?;
    // The guide's C API reference says what the generated header says.
    cmd::run(
        Command::new("python3")
            .args(["scripts/c-api.py", "--check"])
            .current_dir(root),
    )?;
    // The guide: mdbook build (no warning) and mdbook test (its Rust examples against the
    // crate); under SRB_CI=1 mdBook is installed if missing.
    guide::check(root)?;
    if has("clippy") {
        cmd::run(cargo().args([
            "clippy",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]))?;
        // The workspace's default members leave out xtask and the Python binding (built by
        // maturin, and the crate with most of the FFI's unsafe code): lint them by name.
        cmd::run(cargo().args([
            "clippy",
            "--all-targets",
            "--locked",
            "-p",
            "xtask",
            "-p",
            "sized-readback-python",
            "--",
            "-D",
            "warnings",
        ]))?;
    } else {
        eprintln!("ci: clippy not installed, skipping lints");
    }
    // The crate as crates.io would get it (no CI files, logs or results), built from the
    // package alone (cargo package's verify step), then as a dependent and docs.rs would build
    // it, before anything below installs a CUDA tool.
    cmd::run(cargo().args([
        "package",
        "--locked",
        "--allow-dirty",
        "-p",
        "sized-readback",
    ]))?;
    package_leaves_out(root)?;
    dependent::check(root)?;
    // The maintainers' tools from here on: libclang for bindgen, nvcc for the CUDA C++ host
    // programs (the Fortran seed's kernel among the tests).
    let nvcc = dev_env::ensure(root)?;
    // Edition 2021, one thread: every later step (cargo test's Fortran test, the build
    // scripts) finds it there.
    std::env::set_var("NVCC", &nvcc);
    eprintln!("ci: NVCC={}", nvcc.display());
    // One release build of the C library serves the Fortran tests (which find it in the target
    // directory's release/), the C API's packages and the host programs below.
    let libdir = install_capi::libraries(root, None)?;
    cmd::run(cargo().args(["test", "--locked"]).args(test_args))?;
    cmd::run(cargo().args(["test", "--locked", "-p", "xtask"]))?;
    seed_stops_without_a_driver(root)?;
    // The committed kernel images and bindings, regenerated (NVRTC 12.0 and 12.8 from PyPI) and
    // compared byte for byte; their PTX assembled by CUDA 12.0's ptxas, the stand-in for an
    // R525 driver's JIT; the append docs' user kernel compiled by NVRTC straight to machine code.
    kernels::regen(root, true)?;
    kernels::ptxas(root)?;
    kernels::user_kernel(root)?;
    // The C API's packages (CMake, pkg-config, plain cc) from an installed, then moved, prefix;
    // the host programs on the C API (the seed's C++ port, the MPI mini-app).
    packages::check(root, Some(libdir.clone()))?;
    host_programs::check(root, Some(libdir))?;
    // The Python package: one release build of the extension, through pip and maturin; its
    // pytest suite (GPU tests skipped without a GPU); the abi3 manylinux_2_28 wheel.
    python::task(root, python::Python::Install)?;
    python::task(root, python::Python::Test { args: vec![] })?;
    python::task(
        root,
        python::Python::Wheel {
            dir: cmd::target_dir(root).join("wheels"),
        },
    )?;
    println!("ci: every check passed");
    Ok(())
}

/// What the published crate must not hold: the test kernels' images (`kernels/testing/`,
/// 3.9 MB), which only the `testing` feature embeds and only the repository's crates use.
const NOT_PACKAGED: &[&str] = &["kernels/testing/"];

/// `cargo package --list` of the library names nothing under [`NOT_PACKAGED`].
fn package_leaves_out(root: &Path) -> Result<()> {
    let list = cmd::output(cmd::cargo(root).args([
        "package",
        "--list",
        "--locked",
        "--allow-dirty",
        "-p",
        "sized-readback",
    ]))?;
    let packaged = not_packaged_in(&list);
    ensure!(
        packaged.is_empty(),
        "the package holds what Cargo.toml's exclude leaves out ({NOT_PACKAGED:?}): {packaged:?}"
    );
    println!("ci: the package holds nothing under {NOT_PACKAGED:?}");
    Ok(())
}

/// The files of a `cargo package --list` under [`NOT_PACKAGED`].
fn not_packaged_in(list: &str) -> Vec<&str> {
    list.lines()
        .map(str::trim)
        .filter(|f| NOT_PACKAGED.iter().any(|dir| f.starts_with(dir)))
        .collect()
}

/// Without a driver, the quick start's `scripts/seed.sh` stops at once with its message,
/// having built nothing, whatever LD_LIBRARY_PATH holds.
fn seed_stops_without_a_driver(root: &Path) -> Result<()> {
    if cmd::driver_present() {
        return Ok(());
    }
    for ld in [None, Some("/nonexistent:/usr/lib")] {
        let mut c = cmd::bash(root, "scripts/seed.sh");
        match ld {
            Some(v) => c.env("LD_LIBRARY_PATH", v),
            None => c.env_remove("LD_LIBRARY_PATH"),
        };
        let o = cmd::capture(&mut c)?;
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(
            o.status.code() == Some(1) && err.contains("no NVIDIA driver"),
            "seed.sh without a driver (LD_LIBRARY_PATH {ld:?}): {}\n{err}",
            o.status
        );
    }
    println!("ci: seed.sh without a driver stops with its message (LD_LIBRARY_PATH unset and set)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_kernels_in_a_package_list_are_found() {
        let list = "Cargo.toml\nkernels/library/sm_90.cubin\nkernels/testing/sm_90.cubin\n\
                    src/testing/mod.rs\nkernels/testing/compute_70.ptx\n";
        assert_eq!(
            not_packaged_in(list),
            [
                "kernels/testing/sm_90.cubin",
                "kernels/testing/compute_70.ptx"
            ]
        );
        assert!(not_packaged_in("kernels/library/sm_90.cubin\nsrc/lib.rs\n").is_empty());
    }
}
