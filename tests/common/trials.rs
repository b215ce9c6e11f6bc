//! The custom test harness the GPU suites share (libtest-mimic): GPU tests are reported as
//! *ignored* without a CUDA driver or device, never as passed; tests that need no GPU run
//! everywhere. Included with `#[path]` by the suites (and by capi/tests/capi.rs).
#![allow(dead_code)]

use libtest_mimic::{Arguments, Failed, Trial};

/// A test: `Ok` or an error that says what differed.
pub type TestFn = fn() -> anyhow::Result<()>;

/// Whether a driver and at least one device are present.
pub fn gpu_present() -> bool {
    matches!(sized_readback::device::count(), Ok(n) if n > 0)
}

fn trial(name: &str, f: TestFn) -> Trial {
    Trial::test(name, move || {
        f().map_err(|e| Failed::from(format!("{e:#}")))
    })
}

/// Runs `gpu_tests` (kind `gpu`, ignored without a GPU) and `cpu_tests` (always) and exits.
/// `serial` makes one test thread the default (suites whose tests measure time or memory).
pub fn run(gpu_tests: &[(&str, TestFn)], cpu_tests: &[(&str, TestFn)], serial: bool) -> ! {
    let mut args = Arguments::from_args();
    if serial && args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let gpu = gpu_present();
    let mut trials: Vec<Trial> = gpu_tests
        .iter()
        .map(|&(name, f)| trial(name, f).with_kind("gpu").with_ignored_flag(!gpu))
        .collect();
    trials.extend(cpu_tests.iter().map(|&(name, f)| trial(name, f)));
    if !gpu {
        eprintln!("no CUDA driver or device: GPU tests are reported as ignored");
    }
    libtest_mimic::run(&args, trials).exit()
}
