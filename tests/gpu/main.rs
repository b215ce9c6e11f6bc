//! The GPU test binary (wgpu's pattern: one binary, a module per subject). Each module lists
//! its tests in `TESTS` with `test_support::tests!`, under their functions' names
//! (`pack::bad_counts`); the harness (`test_support::harness`) reports GPU tests as *ignored*
//! without a CUDA driver or device, never as passed, and runs those marked `exclusive` alone.
//!
//! ```text
//! cargo test --test gpu -- --list               every test
//! cargo test --release --test gpu reliability   one subject (a filter matches names)
//! ```
//!
//! The reliability suite's fault scenarios run in child processes of this binary: with
//! `SRB_RELIABILITY_SCENARIO` set it runs that one scenario and exits.
mod append;
mod auto;
mod buckets;
mod count_kinds;
mod embedding;
mod info;
mod interop;
mod kernel_image;
mod pack;
mod reliability;
mod seed;
mod sized_grid;
mod sized_launch;
mod staged_switch;

use test_support::Test;

/// Every test of the binary, subject by subject.
const SUBJECTS: &[&[Test]] = &[
    pack::TESTS,
    count_kinds::TESTS,
    seed::TESTS,
    kernel_image::TESTS,
    append::TESTS,
    buckets::TESTS,
    staged_switch::TESTS,
    sized_launch::TESTS,
    sized_grid::TESTS,
    auto::TESTS,
    interop::TESTS,
    embedding::TESTS,
    info::TESTS,
    reliability::load::TESTS,
    reliability::lifecycle::TESTS,
    reliability::bad_input::TESTS,
    reliability::faults::TESTS,
];

fn main() {
    reliability::faults::run_scenario_if_child();
    let conclusion = test_support::run(&SUBJECTS.concat());
    if let Some(tally) = reliability::tally() {
        println!("{tally}");
    }
    conclusion.exit();
}
