//! The C ABI's tests, through the `srb_*` functions themselves, on the GPU tests' harness
//! (`test_support::harness`): without a CUDA driver or device every GPU test is reported as
//! *ignored*; the argument checks, which need no GPU, run everywhere.
//!
//! A module per subject (`arguments`, `seed`, `host_mode`, `graph_mode`, `append`, `fault`);
//! the list below names each test by its function, as the crate root (`capi::capi_append`).
extern crate srb as sized_readback;

use sized_readback_capi as capi;
use std::ffi::CStr;
use std::sync::Arc;
use test_support::{child, SubjectContext, Test};

mod append;
mod arguments;
mod fault;
mod graph_mode;
mod host_mode;
mod seed;
mod sized_grid;
mod sized_launch;

use append::capi_append;
use arguments::capi_argument_errors;
use fault::{capi_fault_wait, capi_wait_after_a_fault};
use graph_mode::{capi_graph_concurrent_consumers, capi_graph_mode};
use host_mode::capi_host_mode;
use seed::seed_capi_expected_output;
use sized_grid::{capi_sized_grid, capi_sized_grid_arguments};
use sized_launch::{capi_sized_launch, capi_sized_launch_arguments};

/// The GPU tests run alone, one at a time: graph capture, and waits they time.
const TESTS: &[Test] = test_support::tests![
    capi_argument_errors.cpu(),
    capi_sized_launch_arguments.cpu(),
    capi_sized_grid_arguments.cpu(),
    seed_capi_expected_output.cpu(),
    capi_host_mode.exclusive(),
    capi_append.exclusive(),
    capi_graph_mode.exclusive(),
    capi_graph_concurrent_consumers.exclusive(),
    capi_wait_after_a_fault.exclusive(),
    capi_sized_launch.exclusive(),
    capi_sized_grid.exclusive(),
];

/// The C API tests' context of device 0 (see `test_support::device`).
fn ctx() -> Arc<cudarc::driver::CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn last_error() -> String {
    // SAFETY: srb_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(capi::srb_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// The child-process scenarios of this binary (a device fault poisons the context).
const SCENARIO_ENV: &str = "SRB_CAPI_SCENARIO";

fn main() {
    if let Ok(name) = std::env::var(SCENARIO_ENV) {
        child::scenario_exit(&name, || match name.as_str() {
            "capi_fault_wait" => capi_fault_wait(),
            other => anyhow::bail!("unknown scenario {other}"),
        });
    }
    test_support::run(TESTS).exit()
}
