//! The Fortran interface (`capi/fortran/sized_readback.f90`) against the C header, and the
//! seed's Fortran port (`examples/seed_fortran.f90`). Runs without a GPU (CI).
//!
//! - Always: every `srb_*` function the header declares has a `bind(c, name="srb_...")`
//!   interface under its C name, public, and no interface binds a name the header lacks; every
//!   `#define SRB_*` is a parameter of the same name and value; the module's `srb_append_desc`
//!   has `sized_readback/slot.h`'s fields, in order, of the same sizes.
//! - With gfortran (`FC`, default `gfortran`): the module, the formatter and the seed's program
//!   compile with `-std=f2018 -Wall -Wextra -Werror -pedantic`; the module's `srb_append_desc`
//!   has the C layout (sizes and offsets, run); the formatter prints as C's `%g` (so as
//!   `std::cout`) on a few thousand values.
//! - With gfortran, nvcc (`NVCC`, which `cargo xtask ci` sets from `cargo xtask dev-env`) and
//!   the static library (`SRB_LIBDIR`, else `<target>/release/`):
//!   `scripts/build-seed-fortran.sh` builds the seed,
//!   which without a driver or GPU must exit 1 with the library's own message (the one
//!   `srb_create` gives in this process), and with one print the seed's expected output.
//!
//! A missing tool skips that test, reported as ignored with the reason, except under
//! `SRB_CI=1` (CI installs them), where it fails; under `SRB_CI=1` a missing library is built with cargo (the release
//! build `cargo xtask ci` makes next anyway).
//!
//! Here: the shared helpers and the list; the checks are in `interface` (static), `compiled`
//! (gfortran) and `library` (linked and run).
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod compiled;
mod interface;
mod library;

use compiled::{
    fortran_append_desc_has_the_c_layout, fortran_formatter_prints_like_cout,
    fortran_sources_compile_with_werror,
};
use interface::{
    fortran_append_desc_matches_slot_h, fortran_module_binds_every_c_function,
    fortran_module_has_every_c_constant,
};
use library::{fortran_module_calls_the_library, fortran_seed_builds_and_runs};

fn root() -> PathBuf {
    test_support::source_root::source_root()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn in_ci() -> bool {
    std::env::var("SRB_CI").is_ok_and(|v| v == "1")
}

/// What a test ends with: completed, or ignored at run time with the reason (a tool or the
/// library is missing here); a failed assertion panics, which the harness reports as a failure.
type Outcome = Result<Completion, Failed>;

/// Skips the rest of a test, reported as *ignored* with the reason (never as passed), or fails
/// it under SRB_CI=1, where every tool is installed.
fn skip(why: &str) -> Outcome {
    if in_ci() {
        return Err(Failed::from(format!("SRB_CI=1 and {why}")));
    }
    Ok(Completion::ignored_with(format!("skipped: {why}")))
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fortran-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("creating the scratch directory");
    d
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `FC` (default gfortran) if it runs.
fn gfortran() -> Option<String> {
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    let works = Command::new(&fc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(fc)
}

const STRICT: [&str; 5] = ["-std=f2018", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Each test under its function's name (libtest-mimic, so that a skip shows as ignored).
macro_rules! trials {
    ($($name:ident),* $(,)?) => {
        vec![$(Trial::ignorable_test(stringify!($name), $name)),*]
    };
}

fn main() {
    let args = Arguments::from_args();
    let trials = trials![
        fortran_module_binds_every_c_function,
        fortran_module_has_every_c_constant,
        fortran_append_desc_matches_slot_h,
        fortran_sources_compile_with_werror,
        fortran_append_desc_has_the_c_layout,
        fortran_formatter_prints_like_cout,
        fortran_module_calls_the_library,
        fortran_seed_builds_and_runs,
    ];
    libtest_mimic::run(&args, trials).exit();
}
