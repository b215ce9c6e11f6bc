//! `cargo xtask install-capi PREFIX`: the C API installed into PREFIX (any path; a relative one
//! is taken from the current folder), relocatable:
//!   lib/libsized_readback.a, lib/libsized_readback.so.X.Y.Z (+ .so.X, .so links)
//!   include/sized_readback.h, include/sized_readback/{slot.h,append.cuh}
//!   lib/cmake/sized_readback/ (find_package(sized_readback 0.1 CONFIG))
//!   lib/pkgconfig/sized_readback.pc (shared), sized_readback-static.pc (static)
//!   share/sized_readback/fortran/sized_readback.f90 (the Fortran module's source)
//!
//! The libraries come from `cargo build --release -p sized-readback-clib` (or a folder that
//! holds built ones); CMake's package helpers install them (`capi/CMakeLists.txt`, CMake >=
//! 3.20). cargo-c would install the libraries, the header and pkg-config files, but not the
//! CMake package, the device headers beside the C header, or the Fortran module, which CMake
//! installs here along with the rest.
use crate::cmd::{self, TempDir};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder of a release build of the C libraries: `libdir` if given, else cargo's, built
/// first.
pub fn libraries(root: &Path, libdir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(dir) = libdir {
        return dir
            .canonicalize()
            .with_context(|| dir.display().to_string());
    }
    cmd::run(cmd::cargo(root).args([
        "build",
        "--release",
        "--locked",
        "-p",
        "sized-readback-clib",
    ]))?;
    Ok(cmd::target_dir(root).join("release"))
}

/// Installs into `prefix` the libraries of `libdir` (built first when `None`); returns the
/// prefix's absolute path.
pub fn install(root: &Path, prefix: &Path, libdir: Option<PathBuf>) -> Result<PathBuf> {
    cmd::which("cmake").context("cmake (>= 3.20) is needed: apt-get install cmake")?;
    std::fs::create_dir_all(prefix)?;
    let prefix = prefix
        .canonicalize()
        .with_context(|| prefix.display().to_string())?;
    let libdir = libraries(root, libdir)?;
    let build = TempDir::new("install-capi")?;
    cmd::output(
        Command::new("cmake")
            .arg("-S")
            .arg(root.join("capi"))
            .arg("-B")
            .arg(build.path())
            .arg(format!("-DSRB_LIBDIR={}", libdir.display())),
    )?;
    cmd::output(
        Command::new("cmake")
            .arg("--install")
            .arg(build.path())
            .arg("--prefix")
            .arg(&prefix),
    )?;
    Ok(prefix)
}

/// The task: installs, then says how to use the prefix.
pub fn task(root: &Path, prefix: &Path, libdir: Option<PathBuf>) -> Result<()> {
    let p = install(root, prefix, libdir)?.display().to_string();
    println!("install-capi: installed into {p}");
    println!(
        "  CMake:      cmake -DCMAKE_PREFIX_PATH={p} ...   then find_package(sized_readback 0.1 CONFIG REQUIRED)"
    );
    println!(
        "  pkg-config: PKG_CONFIG_PATH={p}/lib/pkgconfig pkg-config --cflags --libs sized_readback-static"
    );
    println!(
        "  plain cc:   cc prog.c -I{p}/include {p}/lib/libsized_readback.a -lpthread -ldl -lm -lrt"
    );
    Ok(())
}
