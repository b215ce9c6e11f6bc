//! The packaged crate (`target/package/sized-readback-*.crate`, from `cargo package`) as a
//! dependent gets it, built and documented with no CUDA toolkit and no libclang reachable: the
//! environment is emptied (PATH, CUDA_HOME, CUDA_PATH, NVCC, LIBCLANG_PATH, VIRTUAL_ENV,
//! CONDA_PREFIX gone; PATH is cargo's folder and /usr/bin:/bin) and no .venv-nvcc is near. The
//! dependent (`.ci/dependent/main.rs`) must build, its build graph must hold no bindgen,
//! clang-sys, cc or cudarc-sys, and its run must print the library's "no driver" error and
//! exit 0 without a GPU (with one, read back one count). `cargo doc` of the packaged crate, as
//! docs.rs builds it, must succeed likewise.
use crate::cmd::{self, TempDir};
use anyhow::{bail, ensure, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Checks the newest packaged crate (run `cargo package -p sized-readback` first).
pub fn check(root: &Path) -> Result<()> {
    let crate_file = newest_crate(&cmd::target_dir(root).join("package"))?;
    let lib = crate_file
        .file_stem()
        .context("a .crate file")?
        .to_string_lossy()
        .into_owned();
    let work = TempDir::new("dependent")?;
    let w = work.path();
    cmd::run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&crate_file)
            .arg("-C")
            .arg(w),
    )?;
    let dep = w.join("dependent");
    fs::create_dir_all(dep.join("src"))?;
    fs::copy(root.join(".ci/dependent/main.rs"), dep.join("src/main.rs"))?;
    // The same versions as the workspace.
    fs::copy(root.join("Cargo.lock"), dep.join("Cargo.lock"))?;
    fs::write(
        dep.join("Cargo.toml"),
        format!(
            "[package]\nname = \"dependent\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nsized-readback = {{ path = \"../{lib}\" }}\n\n\
             [workspace]\n"
        ),
    )?;
    let cargo_bin = cmd::which("cargo")
        .and_then(|c| c.parent().map(Path::to_path_buf))
        .context("cargo is not on PATH")?;
    let path = format!("{}:/usr/bin:/bin", cargo_bin.display());
    let home = std::env::var_os("HOME").context("HOME is unset")?;
    let clean = |program: &str, dir: &Path| {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", w.join("target"))
            .current_dir(dir);
        for var in ["CARGO_HOME", "RUSTUP_HOME"] {
            if let Some(v) = std::env::var_os(var) {
                c.env(var, v);
            }
        }
        c
    };
    let reachable = clean("bash", &dep)
        .args(["-c", "command -v nvcc"])
        .output()?;
    ensure!(
        !reachable.status.success(),
        "nvcc is reachable in the emptied environment: the check would prove nothing"
    );
    cmd::run(clean("cargo", &dep).args(["build", "--quiet"]))?;
    println!(
        "dependent: the dependent of {lib}.crate built with no toolkit (PATH={path}, no \
         CUDA_HOME, CUDA_PATH, NVCC, LIBCLANG_PATH, VIRTUAL_ENV, CONDA_PREFIX)"
    );
    let tree = cmd::output(clean("cargo", &dep).args([
        "tree",
        "--quiet",
        "--prefix",
        "none",
        "-e",
        "normal,build",
    ]))?;
    let tools: Vec<&str> = tree
        .lines()
        .filter(|l| {
            ["bindgen ", "clang-sys ", "cc ", "cudarc-sys "]
                .iter()
                .any(|t| l.starts_with(t))
        })
        .collect();
    ensure!(
        tools.is_empty(),
        "the dependent's build graph holds a C toolchain or libclang user: {tools:?}"
    );
    println!("dependent: its build graph has no bindgen, clang-sys, cc or cudarc-sys");
    let out = cmd::output(&mut clean(
        &w.join("target/debug/dependent").to_string_lossy(),
        &dep,
    ))?;
    print!("{out}");
    if cmd::driver_present() {
        ensure!(
            out.lines()
                .any(|l| l.starts_with("dependent: read back 3 rows")),
            "no readback on this GPU host"
        );
    } else if !out.lines().any(|l| {
        l == "dependent: the CUDA driver library (libcuda) was not found: install an NVIDIA driver"
    }) {
        bail!("expected the library's no-driver error");
    }
    cmd::run(
        clean("cargo", &w.join(&lib))
            .env("RUSTDOCFLAGS", "--cfg docsrs -D warnings")
            // docs.rs's features (Cargo.toml's [package.metadata.docs.rs]).
            .args(["doc", "--quiet", "--no-deps", "--features", "nvrtc"]),
    )?;
    let entries = fs::read_dir(w.join("target/doc/sized_readback"))?.count();
    println!(
        "dependent: cargo doc of {lib}.crate (as docs.rs builds it) with no toolkit: ok \
         ({entries} entries)"
    );
    Ok(())
}

/// The highest-versioned `sized-readback-*.crate` in `dir`.
fn newest_crate(dir: &Path) -> Result<PathBuf> {
    let mut crates: Vec<(Vec<u64>, PathBuf)> = fs::read_dir(dir)
        .with_context(|| format!("{} (run cargo package -p sized-readback)", dir.display()))?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name
                .strip_prefix("sized-readback-")?
                .strip_suffix(".crate")?;
            let key = version
                .split(['.', '-'])
                .map(|p| p.parse().unwrap_or(0))
                .collect();
            Some((key, e.path()))
        })
        .collect();
    crates.sort();
    crates
        .pop()
        .map(|(_, p)| p)
        .with_context(|| format!("no sized-readback-*.crate in {}", dir.display()))
}
