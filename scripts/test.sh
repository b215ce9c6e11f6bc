#!/usr/bin/env bash
# The test command (README quick start; CI runs it through .ci/run).
# Sets up what the build needs (scripts/dev-env.sh), checks formatting and lints, runs every
# test, then tests the C API's packages and the host programs built on it (CMake, pkg-config,
# a C compiler, mpicxx: .ci/run installs them; a step whose tool is missing says so and skips,
# except under SRB_CI=1). Without a GPU the GPU tests are reported as ignored; with one, they
# all run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-env.sh
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "test.sh: rustfmt not installed, skipping the format check" >&2
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --all-targets --locked -- -D warnings
else
  echo "test.sh: clippy not installed, skipping lints" >&2
fi
cargo test --locked "$@"
# The crate as crates.io would get it: packaged (no CI files, logs or results) and built from
# the package alone (cargo package's verify step; NVCC comes from dev-env.sh).
cargo package --locked --allow-dirty -p sized-readback
# The set-up's libclang detection against fake trees (no build).
bash scripts/test-dev-env.sh
# The C API's packages (CMake, pkg-config, plain cc) from an installed, then moved, prefix; the
# host programs on the C API (the seed's C++ port, the MPI mini-app). One release build of the
# C library serves both.
cargo build --release --locked -p sized-readback-capi
export SRB_LIBDIR="${CARGO_TARGET_DIR:-$PWD/target}/release"
bash scripts/test-packages.sh
bash scripts/test-host-programs.sh
unset SRB_LIBDIR
bash scripts/python.sh install  # the Python package (python/): one release build of the extension, through pip and maturin
bash scripts/python.sh test     # its pytest suite (GPU tests are reported as skipped without a GPU)
