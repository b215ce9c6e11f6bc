#!/usr/bin/env bash
# The main job (README quick start): the seed program's pipeline on this crate (seed/).
# First checks for an NVIDIA driver (libcuda.so.1, a few milliseconds); without one it says so and
# stops before building anything (`--build-only` builds anyway). Then it runs the seed, which
# builds the library and the seed's two dependencies only (not the dev-dependencies of the
# tests and benchmarks). The build needs Rust alone: the kernels are committed images.
# Extra arguments go to the program, e.g. `bash scripts/seed.sh --strategy naive`.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
have_driver() { # libcuda.so.1 where the dynamic loader will find it
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && return 0
  local d
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib /usr/local/nvidia/lib64; do
    [ -e "$d/libcuda.so.1" ] && return 0
  done
  return 1
}
if [ $build_only = 0 ] && ! have_driver; then
  echo "seed: no NVIDIA driver here (libcuda.so.1 not found): the seed runs on a CUDA GPU." >&2
  echo "seed: nothing was built. 'bash scripts/seed.sh --build-only' builds it anyway;" >&2
  echo "seed: 'cargo test' runs the tests that need no GPU (GPU tests show as ignored)." >&2
  exit 1
fi
if [ $build_only = 1 ]; then
  cargo build --release --locked -p sized-readback-seed
  echo "seed: built ${CARGO_TARGET_DIR:-target}/release/seed_pipeline"
  exit 0
fi
cargo run --release --locked -p sized-readback-seed -- "$@"
