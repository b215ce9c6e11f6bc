//! Scenarios that poison their CUDA context on purpose (device faults) run in a child
//! process: the test binary runs itself again with `<env>=<scenario>`, and the child prints
//! `SCENARIO OK` and exits 0 if every expectation held. The parent fails on a non-zero exit, a
//! missing `SCENARIO OK`, or a hang (the child is killed after the timeout).

use anyhow::{bail, ensure, Context as _, Result};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs this binary again with `env=scenario`; returns the child's standard output.
pub fn run_child(env: &str, scenario: &str, timeout: Duration) -> Result<String> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .env(env, scenario)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut so = child.stdout.take().context("stdout")?;
    let mut se = child.stderr.take().context("stderr")?;
    let ro = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let re = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!("scenario {scenario} hung (killed after {timeout:?})");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = ro.join().unwrap_or_default();
    let err = re.join().unwrap_or_default();
    ensure!(
        status.success() && out.contains("SCENARIO OK"),
        "scenario {scenario}: {status}\nstdout:\n{out}\nstderr:\n{err}"
    );
    print!("{}", out.replace("SCENARIO OK\n", ""));
    Ok(out)
}

/// The child's side: runs `f`, prints `SCENARIO OK` and exits 0, or prints the error and
/// exits 1.
pub fn scenario_exit(name: &str, f: impl FnOnce() -> Result<()>) -> ! {
    let t0 = Instant::now();
    match f() {
        Ok(()) => {
            println!("  [{name}] finished in {:?}", t0.elapsed());
            println!("SCENARIO OK");
            std::process::exit(0)
        }
        Err(e) => {
            println!("[{name}] FAILED: {e:#}");
            std::process::exit(1)
        }
    }
}
