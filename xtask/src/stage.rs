//! `cargo xtask stage [--benches]`: builds here everything the GPU host runs (it has no Rust
//! toolchain) and stages it for `scripts/gpu-verify.sh`, from a plain clone (nothing outside the
//! repository is used):
//! - `.gpu/bin/`: every test executable of the workspace's default members (`test-<target>`,
//!   unit tests as `test-<kind>-<crate>`), the examples (`example-<name>`), the comparison
//!   harness and the seed (`example-compare`, `example-seed_pipeline`), and with `--benches` the
//!   criterion bench (`bench-readback`); all release builds, debug info stripped; `.gpu/COMMIT`
//!   names the commit;
//! - `.gpu-capi/libsized_readback.a`: the C library, for the host programs built there with nvcc;
//! - `.gpu-pack/stage.tgz`: both, with the Python wheel if one was built (`cargo xtask python
//!   wheel target/wheels`), in one compressed bundle.
//!
//! There: `OUT=dir bash scripts/gpu-verify.sh` unpacks it afresh and runs the verification.
use crate::cmd;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Tests that run cargo need a Rust toolchain, which the GPU host lacks; they check no GPU
/// behaviour and run here and in CI: trybuild's compile-fail tests, and the C header's test
/// (cbindgen reads the C API crate through `cargo metadata`).
const NEEDS_CARGO: &[&str] = &["test-compile_fail", "test-c_header"];

pub fn task(root: &Path, benches: bool) -> Result<()> {
    let target = cmd::target_dir(root);
    for dir in [".gpu", ".gpu-capi"] {
        let _ = fs::remove_dir_all(root.join(dir));
    }
    let bin = root.join(".gpu/bin");
    fs::create_dir_all(&bin)?;
    fs::create_dir_all(root.join(".gpu-capi"))?;
    fs::create_dir_all(root.join(".gpu-pack"))?;
    let mut staged = executables(root, "test", &["test", "--no-run", "--release"])?;
    staged.extend(executables(
        root,
        "example",
        &["build", "--examples", "--release"],
    )?);
    if benches {
        staged.extend(executables(root, "bench", &["bench", "--no-run"])?);
    }
    for (name, exe) in &staged {
        if !NEEDS_CARGO.contains(&name.as_str()) {
            fs::copy(exe, bin.join(name)).with_context(|| exe.display().to_string())?;
        }
    }
    cmd::run(cmd::cargo(root).args([
        "build",
        "--release",
        "--locked",
        "-p",
        "sized-readback-harness",
        "-p",
        "sized-readback-clib",
        "-p",
        "sized-readback-seed",
    ]))?;
    let release = target.join("release");
    fs::copy(release.join("compare"), bin.join("example-compare"))?;
    fs::copy(
        release.join("seed_pipeline"),
        bin.join("example-seed_pipeline"),
    )?;
    let archive = root.join(".gpu-capi/libsized_readback.a");
    fs::copy(release.join("libsized_readback.a"), &archive)?;
    let mut strip = Command::new("strip");
    strip.arg("--strip-debug").arg(&archive);
    for e in fs::read_dir(&bin)? {
        strip.arg(e?.path());
    }
    if let Err(e) = cmd::run(&mut strip) {
        eprintln!("stage: {e:#} (the binaries keep their debug info)");
    }
    let commit = commit(root);
    fs::write(root.join(".gpu/COMMIT"), format!("{commit}\n"))?;
    let wheels: Vec<PathBuf> = fs::read_dir(target.join("wheels"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("sized_readback-") && n.contains("manylinux_2_28") && n.ends_with(".whl")
        })
        .collect();
    match wheels.as_slice() {
        [] => eprintln!(
            "stage: no wheel in {} (cargo xtask python wheel target/wheels): the python phase \
             will have none",
            target.join("wheels").display()
        ),
        [one] => {
            fs::create_dir_all(root.join(".gpu/wheels"))?;
            fs::copy(one, root.join(".gpu/wheels").join(one.file_name().unwrap()))?;
        }
        several => bail!("several manylinux wheels in target/wheels: {several:?}"),
    }
    cmd::run(
        Command::new("tar")
            .args(["czf", ".gpu-pack/stage.tgz", ".gpu", ".gpu-capi"])
            .current_dir(root),
    )?;
    let mut names: Vec<String> = fs::read_dir(&bin)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    println!("{}", names.join("\n"));
    let size = fs::metadata(root.join(".gpu-pack/stage.tgz"))?.len();
    println!(
        "stage: {commit} staged in .gpu-pack/stage.tgz ({:.1} MiB); carry .gpu-pack; there: \
         OUT=dir bash scripts/gpu-verify.sh",
        size as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// `(LABEL-[KIND-]NAME, executable)` for each executable `cargo ARGS` builds: a test target
/// `gpu` gives `test-gpu`, a library's unit tests `test-lib-sized_readback`.
fn executables(root: &Path, label: &str, args: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    // Built once with the messages shown, so that errors show in full.
    cmd::run(cmd::cargo(root).args(args).arg("--locked"))?;
    let json = cmd::output(
        cmd::cargo(root)
            .args(args)
            .args(["--locked", "--message-format=json"]),
    )?;
    let mut v = Vec::new();
    for line in json.lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = m["executable"].as_str() else {
            continue;
        };
        let kind = m["target"]["kind"][0].as_str().unwrap_or_default();
        let name = m["target"]["name"].as_str().unwrap_or_default();
        if label == "test" && m["profile"]["test"] != true {
            continue;
        }
        if label != "test" && kind != label {
            continue;
        }
        let staged = if kind == label {
            format!("{label}-{name}")
        } else {
            format!("{label}-{kind}-{name}")
        };
        v.push((staged, PathBuf::from(exe)));
    }
    Ok(v)
}

/// The short commit, `+dirty` when the tree differs from it.
fn commit(root: &Path) -> String {
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(root).output();
    let Ok(o) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let mut c = String::from_utf8_lossy(&o.stdout).trim().to_string();
    if c.is_empty() {
        return "unknown".into();
    }
    if git(&["diff", "--quiet", "HEAD"]).is_ok_and(|o| !o.status.success()) {
        c.push_str("+dirty");
    }
    c
}
