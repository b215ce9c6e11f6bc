//! `cargo xtask host-programs`: the host programs built on the C API with nvcc, the seed's C++
//! port (examples/seed_capi.cu) and the MPI particle exchange (examples/mpi_exchange.cu, with
//! the system MPI's mpicxx), each built by its script in scripts/ (the GPU host builds them with
//! the same scripts). Without a GPU each must exit non-zero with a clear message (not a crash:
//! an exit status below 128); with one, the seed must print its expected output (the MPI
//! mini-app's GPU runs are scripts/mpi-runs.sh, on the GPU host). nvcc comes from
//! scripts/find-nvcc.sh (`cargo xtask dev-env` installs one).
use crate::cmd::{self, TempDir};
use crate::install_capi;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds and checks both programs against the static library of `libdir` (built when `None`).
pub fn check(root: &Path, libdir: Option<PathBuf>) -> Result<()> {
    let libdir = install_capi::libraries(root, libdir)?;
    let work = TempDir::new("host-programs")?;
    let w = work.path();
    let gpu = cmd::gpu_present();
    let mut failed = false;
    let seed = w.join("seed_capi");
    cmd::run(
        cmd::bash(root, "scripts/build-seed-capi.sh")
            .arg(&libdir)
            .arg(&seed),
    )?;
    if gpu {
        let out = cmd::output(&mut Command::new(&seed))?;
        let got: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with("in kernel"))
            .collect();
        let want = std::fs::read_to_string(root.join("examples/seed_capi.expected"))?;
        if got != want.lines().collect::<Vec<_>>() {
            eprintln!("host-programs: seed_capi's output differs from examples/seed_capi.expected:\n{out}");
            failed = true;
        } else {
            println!("host-programs: seed_capi output as expected (ok)");
        }
    } else {
        failed |= !clean_error(
            "seed_capi",
            "driver library (libcuda) was not found",
            &mut Command::new(&seed),
        )?;
    }
    let mpicxx = std::env::var("MPICXX").unwrap_or_else(|_| "mpicxx".into());
    if cmd::which(&mpicxx).is_some() || cmd::in_ci() {
        let exe = w.join("mpi_exchange");
        cmd::run(
            cmd::bash(root, "scripts/build-mpi-exchange.sh")
                .arg(&libdir)
                .arg(&exe),
        )?;
        if !gpu {
            let mpi = |c: &mut Command| {
                c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            };
            let mut single = Command::new(&exe);
            single.args(["--steps", "2"]);
            mpi(&mut single);
            failed |= !clean_error(
                "mpi_exchange (singleton)",
                "this program needs a GPU",
                &mut single,
            )?;
            let mut two = Command::new("mpirun");
            two.args(["--oversubscribe", "-np", "2"])
                .arg(&exe)
                .args(["--steps", "2"]);
            mpi(&mut two);
            failed |= !clean_error(
                "mpi_exchange (mpirun -np 2)",
                "this program needs a GPU",
                &mut two,
            )?;
            let mut bad = Command::new(&exe);
            bad.arg("--bad-option");
            mpi(&mut bad);
            failed |= !clean_error("mpi_exchange --bad-option", "usage: mpi_exchange", &mut bad)?;
        }
    } else {
        println!(
            "host-programs: no mpicxx (apt-get install libopenmpi-dev): skipped the MPI mini-app"
        );
    }
    if failed {
        bail!("host-programs: a program did not behave (above)");
    }
    println!("host-programs: ok");
    Ok(())
}

/// Whether `c` exits non-zero below 128 (an error, not a crash) with a line matching
/// `pattern`; says which.
fn clean_error(label: &str, pattern: &str, c: &mut Command) -> Result<bool> {
    let o = cmd::capture(c)?;
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out.lines().find(|l| l.contains(pattern));
    match (o.status.code(), line) {
        (Some(rc), Some(line)) if rc != 0 && rc < 128 => {
            println!("host-programs: {label} without a GPU: exit {rc}, \"{line}\" (ok)");
            Ok(true)
        }
        (rc, _) => {
            eprintln!(
                "host-programs: {label}: exit {rc:?}, expected a clean error matching \
                 '{pattern}': {out}"
            );
            Ok(false)
        }
    }
}
