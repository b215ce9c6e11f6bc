#!/usr/bin/env bash
# The test command (README quick start; CI runs it through .ci/run).
# Checks formatting and lints, runs every test, then proves the install story and tests the
# packages: the library, its tests and the seed build with Rust alone (the kernels and the slot
# bindings are committed); the packaged crate builds for a dependent and for docs.rs with no
# CUDA toolkit or libclang; the committed kernel images are regenerated and compared byte for
# byte, and their PTX assembled by CUDA 12.0's ptxas (scripts/dev-env.sh then installs libclang
# for bindgen, and nvcc for the CUDA C++ host programs); the C API's packages, the host
# programs on it, and the Python package and its manylinux_2_28 wheel. CMake, pkg-config, a
# C/C++ and Fortran compiler and mpicxx come from .ci/run; elsewhere a step whose tool is
# missing says so and skips, except under SRB_CI=1. Without a GPU the GPU tests are reported as
# ignored; with one, they all run.
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "test.sh: rustfmt not installed, skipping the format check" >&2
fi
# The README's tables of committed results against their JSON records.
python3 scripts/readme-tables.py --check
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --all-targets --locked -- -D warnings
  cargo clippy --all-targets --locked -p xtask -- -D warnings
else
  echo "test.sh: clippy not installed, skipping lints" >&2
fi
# The crate as crates.io would get it (no CI files, logs or results), built from the package
# alone (cargo package's verify step), then as a dependent and docs.rs would build it, before
# anything below installs a CUDA tool.
cargo package --locked --allow-dirty -p sized-readback
bash scripts/test-dependent.sh
# The maintainers' tools from here on: libclang for bindgen, nvcc for the CUDA C++ host programs
# (the Fortran seed's kernel among the tests).
source scripts/dev-env.sh
cargo test --locked "$@"
bash scripts/test-dev-env.sh
# The committed kernel images and bindings, regenerated (NVRTC 12.0 and 12.8 from PyPI) and
# compared byte for byte; their PTX assembled by CUDA 12.0's ptxas, the stand-in for an R525
# driver's JIT; the append docs' user kernel compiled by NVRTC straight to machine code.
cargo xtask regen --check
cargo xtask ptxas
cargo xtask user-kernel
# The C API's packages (CMake, pkg-config, plain cc) from an installed, then moved, prefix; the
# host programs on the C API (the seed's C++ port, the MPI mini-app). One release build of the
# C library serves both.
cargo build --release --locked -p sized-readback-clib
export SRB_LIBDIR="${CARGO_TARGET_DIR:-$PWD/target}/release"
bash scripts/test-packages.sh
bash scripts/test-host-programs.sh
unset SRB_LIBDIR
bash scripts/python.sh install  # the Python package (python/): one release build of the extension, through pip and maturin
bash scripts/python.sh test     # its pytest suite (GPU tests are reported as skipped without a GPU)
bash scripts/python.sh wheel "${CARGO_TARGET_DIR:-$PWD/target}/wheels"  # the abi3 manylinux_2_28 wheel, checked by auditwheel
