//! The test harness of the GPU test binaries (libtest-mimic), as wgpu's GPU test binary has one:
//! every test is a [`Test`], built by [`tests!`](crate::tests) from the function's own name, so
//! the name a run prints, filters and lists is the function's identifier (with its module:
//! `pack::bad_counts`).
//!
//! - A test needs a GPU unless marked [`cpu`](Test::cpu), or several with
//!   [`gpus`](Test::gpus). Without them it is reported as *ignored*, never as passed; forced
//!   with `--include-ignored`, it is still ignored, at run time, with the reason.
//! - A test marked [`exclusive`](Test::exclusive) runs alone: it holds the write side of one
//!   lock while every other test holds its read side. For tests that measure time or memory,
//!   and for every test that captures a graph (building a sized launch captures its bodies):
//!   the driver refuses a context synchronization while any stream of the context is
//!   capturing, whichever thread captures, and invalidates that capture. The synchronizations
//!   cannot be kept apart instead: dropping a graph readback or a sized launch synchronizes the
//!   context, and so does cudarc's `CudaContext::new_stream` when the context object has no
//!   live stream (with event tracking on, its default), which nearly every test calls.
//!   On the GPU host (H200, driver 580) an enqueue on one thread stalled until the device was
//!   idle while other tests freed device or pinned memory (cuMemFree/cuMemFreeHost synchronize
//!   the device and hold the driver's lock meanwhile); runs alone never stalled.
use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};
use std::sync::RwLock;

/// A test's body: `Ok`, or an error that says what differed.
pub type TestFn = fn() -> anyhow::Result<()>;

/// One test: its name, its body, what it needs and whether it runs alone.
#[derive(Clone, Copy, Debug)]
pub struct Test {
    /// `module_path!()::function`, as [`tests!`](crate::tests) writes it; listed without the
    /// crate's name.
    pub name: &'static str,
    /// The body.
    pub run: TestFn,
    /// CUDA devices it needs: 0 runs everywhere.
    pub devices: usize,
    /// Runs alone (no other test of the binary at the same time).
    pub exclusive: bool,
}

impl Test {
    /// A test that needs one GPU and may run beside others.
    pub const fn new(name: &'static str, run: TestFn) -> Self {
        Test {
            name,
            run,
            devices: 1,
            exclusive: false,
        }
    }

    /// Needs no GPU: runs (and must pass) everywhere.
    pub const fn cpu(self) -> Self {
        Test { devices: 0, ..self }
    }

    /// Needs `n` CUDA devices.
    pub const fn gpus(self, n: usize) -> Self {
        Test { devices: n, ..self }
    }

    /// Runs alone.
    pub const fn exclusive(self) -> Self {
        Test {
            exclusive: true,
            ..self
        }
    }

    /// The name without the crate's: `pack::bad_counts` (a test at the crate's root keeps its
    /// bare name).
    pub fn listed_name(&self) -> &'static str {
        self.name.split_once("::").map_or(self.name, |(_, n)| n)
    }

    fn trial(self, devices: usize) -> Trial {
        let need = self.devices;
        let trial = Trial::ignorable_test(self.listed_name(), move || {
            if devices < need {
                let what = match need {
                    1 => "a CUDA device".to_string(),
                    n => format!("{n} CUDA devices"),
                };
                return Ok(Completion::ignored_with(format!(
                    "needs {what}, {devices} present"
                )));
            }
            // Poisoning only means another test failed; the lock guards no data.
            let _alone = self
                .exclusive
                .then(|| ALONE.write().unwrap_or_else(|p| p.into_inner()));
            let _shared =
                (!self.exclusive).then(|| ALONE.read().unwrap_or_else(|p| p.into_inner()));
            (self.run)()
                .map(|()| Completion::Completed)
                .map_err(|e| Failed::from(format!("{e:#}")))
        });
        if need == 0 {
            trial
        } else {
            trial.with_kind("gpu").with_ignored_flag(devices < need)
        }
    }
}

/// Held for writing by an exclusive test, for reading by every other.
static ALONE: RwLock<()> = RwLock::new(());

/// The tests of a module, each under its function's name, with its flags as [`Test`]'s
/// builder calls:
///
/// ```ignore
/// pub const TESTS: &[Test] = test_support::tests![
///     counts_at_the_edges,
///     polling_and_timeouts.exclusive(),
///     header_is_shipped.cpu(),
///     two_gpus.gpus(2),
/// ];
/// ```
#[macro_export]
macro_rules! tests {
    ($($name:ident $(.$flag:ident($($arg:expr)?))*),* $(,)?) => {
        &[$(
            $crate::harness::Test::new(concat!(module_path!(), "::", stringify!($name)), $name)
                $(.$flag($($arg)?))*
        ),*]
    };
}

/// Whether a driver and at least one device are present.
pub fn gpu_present() -> bool {
    matches!(sized_readback::device::count(), Ok(n) if n > 0)
}

/// Runs `tests` under the command line's arguments (libtest's: filters, `--list`,
/// `--include-ignored`, `--test-threads`, ...), and returns the conclusion for the caller to
/// report and exit with.
pub fn run(tests: &[Test]) -> Conclusion {
    let args = Arguments::from_args();
    let devices = sized_readback::device::count().unwrap_or(0);
    if devices == 0 {
        eprintln!("no CUDA driver or device: GPU tests are reported as ignored");
    }
    let trials = tests.iter().map(|t| t.trial(devices)).collect();
    libtest_mimic::run(&args, trials)
}
