//! `cargo xtask guide`: the guide under `docs/guide`, built with mdBook and its Rust examples
//! compiled against the crate, as CI does (`cargo xtask ci`).
//!
//! The examples use the crate (and need a GPU to run), so they are `no_run` with a hidden
//! `extern crate sized_readback;`, and `mdbook test` gets the crate through `-L`: the library
//! is built alone into its own target folder, so that folder holds one `sized_readback` and
//! one of each dependency (a shared `deps/` holds several, which rustc refuses to choose from).
//! Under `SRB_CI=1` mdBook is installed when missing (the pinned version,
//! [`toolchain::MDBOOK`]); elsewhere the step is skipped with a message.
use crate::{cmd, toolchain};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn check(root: &Path) -> Result<()> {
    let Some(mdbook) = mdbook(root)? else {
        return Ok(());
    };
    let book = root.join("docs/guide");
    let target = cmd::target_dir(root);
    // Written to the target folder, not docs/guide/book/: CI leaves the work tree clean.
    let out = cmd::capture(
        Command::new(&mdbook)
            .arg("build")
            .arg(&book)
            .arg("--dest-dir")
            .arg(target.join("guide")),
    )?;
    let log = String::from_utf8_lossy(&out.stderr);
    eprint!("{log}");
    if !out.status.success() || log.contains("WARN") || log.contains("ERROR") {
        bail!("guide: mdbook build failed or warned (above)");
    }
    let lib = target.join("guide-lib");
    cmd::run(
        cmd::cargo(root)
            .args(["build", "--locked", "-p", "sized-readback", "--target-dir"])
            .arg(&lib),
    )?;
    cmd::run(
        Command::new(&mdbook)
            .arg("test")
            .arg(&book)
            .arg("-L")
            .arg(lib.join("debug/deps")),
    )?;
    println!(
        "guide: built into {} and its Rust examples compiled",
        target.join("guide").display()
    );
    Ok(())
}

/// mdBook's path: on PATH or in cargo's bin folder; installed there under CI when missing or
/// not the pinned version; `None` (the step skipped) elsewhere when missing.
fn mdbook(root: &Path) -> Result<Option<PathBuf>> {
    let found = cmd::which("mdbook").or_else(|| {
        let p = cargo_home().join("bin/mdbook");
        p.is_file().then_some(p)
    });
    let pinned = |p: &Path| {
        Command::new(p).arg("--version").output().is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).trim() == format!("mdbook v{}", toolchain::MDBOOK)
        })
    };
    match found {
        Some(p) if pinned(&p) || !cmd::in_ci() => Ok(Some(p)),
        _ if cmd::in_ci() => {
            cmd::run(cmd::cargo(root).args([
                "install",
                "mdbook",
                "--locked",
                "--version",
                toolchain::MDBOOK,
            ]))?;
            let p = cargo_home().join("bin/mdbook");
            if !pinned(&p) {
                bail!(
                    "guide: cargo install mdbook left no mdbook {} at {}",
                    toolchain::MDBOOK,
                    p.display()
                );
            }
            Ok(Some(p))
        }
        _ => {
            eprintln!(
                "guide: no mdbook here: skipped the guide's build and test \
                 (cargo install mdbook --version {} --locked)",
                toolchain::MDBOOK
            );
            Ok(None)
        }
    }
}

/// Where `cargo install` puts its binaries: `CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
        })
}
