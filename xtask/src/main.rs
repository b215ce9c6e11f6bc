//! `cargo xtask`: the developer tasks of sized-readback (rust-analyzer's alias pattern:
//! `.cargo/config.toml` runs this crate). `cargo xtask --help` lists them. Each task is a file:
//! `ci` (what CI runs), `cycles`, `dev_env`, `dependent`, `install_capi`, `packages`, `host_programs`,
//! `python`, `stage`, `kernels` (regen, ptxas, user-kernel), `guide`; `cmd` runs the tools, `toolchain`
//! holds every pin.
//!
//! What runs on the GPU host, which has no Rust, stays in shell under `scripts/` (listed by
//! `--help`).
mod bindings;
mod ci;
mod cmd;
mod count_kinds;
mod cycles;
mod dependent;
mod dev_env;
mod file_length;
mod guide;
mod host_programs;
mod images;
mod install_capi;
mod kernels;
mod manifest;
mod nvrtc;
mod packages;
mod python;
mod stage;
mod toolchain;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Developer tasks of sized-readback",
    after_help = GPU_HOST_SCRIPTS
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The scripts that run where there is no Rust (the GPU host), shown under the task list.
const GPU_HOST_SCRIPTS: &str = "\
On the GPU host (no Rust there; after `cargo xtask stage` here), from the repository root:
  scripts/gpu-verify.sh         the GPU verification, phase by phase (OUT=dir bash scripts/gpu-verify.sh)
  scripts/sanitize.sh           compute-sanitizer's four tools over the staged tests (gpu-verify's sanitize)
  scripts/mpi-runs.sh           the MPI particle exchange at 1, 2, 4 ranks (gpu-verify's mpi)
  scripts/build-seed-capi.sh    the seed's C++ port on the C API (nvcc), and its check
  scripts/build-seed-fortran.sh the seed's Fortran port (gfortran, nvcc), and its check
  scripts/build-mpi-exchange.sh the MPI mini-app (nvcc, mpicxx)
  scripts/find-nvcc.sh          the one nvcc finder (sourced by the build scripts and dev-env)
  scripts/host-program.sh       what the build scripts share (sourced)
  scripts/first-load.py         fresh processes' first readback (gpu-verify's load)
The README's two commands: scripts/seed.sh (the seed; builds nothing without a driver) and
scripts/test.sh (cargo xtask ci). Analysis of committed runs: scripts/*.py.";

#[derive(Subcommand)]
enum Task {
    /// Every check CI runs (what `bash scripts/test.sh` runs)
    ///
    /// Format, lints, every test, the packaged crate as a dependent, dev-env, regen --check,
    /// ptxas, user-kernel, packages, host programs, Python. Arguments after it go to `cargo test`.
    Ci {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_test_args: Vec<String>,
    },
    /// Install libclang and nvcc for the maintainers' checks; print `export NVCC=...`
    ///
    /// libclang-dev through apt-get (bindgen, for regen); nvcc as scripts/find-nvcc.sh finds it,
    /// else nvcc 13.0 from PyPI into .venv-nvcc/. Use: eval "$(cargo xtask dev-env)".
    DevEnv,
    /// Build and document the packaged crate as a dependent and docs.rs would, with no toolkit
    ///
    /// After `cargo package -p sized-readback`: no CUDA toolkit or libclang is reachable.
    Dependent,
    /// Install the C API into PREFIX (relocatable)
    ///
    /// The static and shared libraries, the headers, the CMake and pkg-config packages and the
    /// Fortran module's source.
    InstallCapi {
        prefix: PathBuf,
        /// A folder with built libraries (else `cargo build --release -p sized-readback-clib`).
        #[arg(long, env = "SRB_LIBDIR")]
        libdir: Option<PathBuf>,
    },
    /// Test the C API's packages from an installed, moved prefix, and the README's C snippets
    ///
    /// CMake, pkg-config, plain cc and c++, Fortran; then the README's C, C++, Fortran and CUDA
    /// snippets compiled against the prefix.
    Packages {
        /// A folder with built libraries (else built first).
        #[arg(long, env = "SRB_LIBDIR")]
        libdir: Option<PathBuf>,
    },
    /// Build and check the host programs on the C API (the seed's C++ port, the MPI mini-app)
    ///
    /// Without a GPU each must exit with a clean error; with one the seed prints its expected
    /// output.
    HostPrograms {
        /// A folder with libsized_readback.a (else built first).
        #[arg(long, env = "SRB_LIBDIR")]
        libdir: Option<PathBuf>,
    },
    /// The Python package: install, test, or build its wheel
    #[command(subcommand)]
    Python(python::Python),
    /// Run the seed program on the library (scripts/seed.sh)
    ///
    /// The README's quick start: it checks for a driver before building anything. Arguments go
    /// to the program.
    Seed {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build and stage for the GPU host: .gpu-pack/stage.tgz
    ///
    /// .gpu/ (test and example binaries, the wheel if built) and .gpu-capi/ (the C library),
    /// packed for scripts/gpu-verify.sh there.
    Stage {
        /// Also stage the criterion bench.
        #[arg(long)]
        benches: bool,
    },
    /// Regenerate the count kinds' files, the committed kernel images, the slot bindings and
    /// kernels/MANIFEST
    ///
    /// The count kinds from their table (xtask/src/count_kinds.rs); NVRTC 12.0 and 12.8 from
    /// PyPI; bindgen (libclang).
    Regen {
        /// Regenerate into memory and fail unless every committed file is byte-identical.
        #[arg(long)]
        check: bool,
    },
    /// Assemble the committed PTX with CUDA 12.0's ptxas (an R525 driver's JIT)
    ///
    /// compute_70 for sm_70, compute_90 for sm_90.
    Ptxas,
    /// Fail on an import cycle among the modules of source directories
    ///
    /// Without DIRs, CI's check: none in capi/src; src/engine's and python/src's printed.
    Cycles {
        /// Source directories (e.g. capi/src, src/engine), from the repository root.
        dirs: Vec<PathBuf>,
    },
    /// Build the guide (docs/guide) with mdBook and compile its Rust examples
    ///
    /// Into the target folder (guide/); the examples against the crate, built alone
    /// (guide-lib/). Under SRB_CI=1 installs the pinned mdBook when missing.
    Guide,
    /// Compile the append docs' user kernel with NVRTC to machine code
    ///
    /// `src/append.rs`'s kernel for sm_70, sm_90 (NVRTC 12.0) and sm_120 (NVRTC 12.8): the path
    /// the docs recommend for users' own kernels; then the library's `append::compile` tests
    /// with NVRTC 12.0 on LD_LIBRARY_PATH. Compile only: no GPU.
    UserKernel,
}

fn main() -> Result<()> {
    let root = cmd::root();
    match Cli::parse().task {
        Task::Ci { cargo_test_args } => ci::task(&root, &cargo_test_args),
        Task::DevEnv => dev_env::task(&root),
        Task::Dependent => dependent::check(&root),
        Task::InstallCapi { prefix, libdir } => install_capi::task(&root, &prefix, libdir),
        Task::Packages { libdir } => packages::check(&root, libdir),
        Task::HostPrograms { libdir } => host_programs::check(&root, libdir),
        Task::Python(what) => python::task(&root, what),
        Task::Seed { args } => cmd::run(cmd::bash(&root, "scripts/seed.sh").args(args)),
        Task::Stage { benches } => stage::task(&root, benches),
        Task::Regen { check } => kernels::regen(&root, check),
        Task::Ptxas => kernels::ptxas(&root),
        Task::UserKernel => kernels::user_kernel(&root),
        Task::Cycles { dirs } => cycles::task(&root, &dirs),
        Task::Guide => guide::check(&root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments after `ci`, `seed` and `python test` pass through, hyphens and all.
    #[test]
    fn trailing_arguments_pass_through() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("cargo xtask").chain(args.iter().copied()))
                .unwrap()
                .task
        };
        match parse(&["ci", "--test", "gpu", "--", "--list"]) {
            Task::Ci { cargo_test_args } => {
                assert_eq!(cargo_test_args, ["--test", "gpu", "--", "--list"])
            }
            _ => panic!("not ci"),
        }
        match parse(&["seed", "--strategy", "naive"]) {
            Task::Seed { args } => assert_eq!(args, ["--strategy", "naive"]),
            _ => panic!("not seed"),
        }
        match parse(&["python", "test", "-k", "torch"]) {
            Task::Python(python::Python::Test { args }) => assert_eq!(args, ["-k", "torch"]),
            _ => panic!("not python test"),
        }
    }
}
