#!/usr/bin/env bash
# CI test of the host programs built on the C API with nvcc: the seed's C++ port
# (examples/seed_capi.cu) and the MPI particle exchange (examples/mpi_exchange.cu, with the
# system MPI's mpicxx). Both are built as their scripts build them; without a GPU each must exit
# non-zero with a clear message (not a crash: exit status below 128); with one, the seed must
# print its expected output (the MPI mini-app's GPU runs are scripts/mpi-runs.sh).
# Usage: bash scripts/test-host-programs.sh   (SRB_LIBDIR=dir with libsized_readback.a skips
# the cargo build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
libdir="${SRB_LIBDIR:-}"
if [ -z "$libdir" ]; then
  (cd "$root" && cargo build --release --locked -p sized-readback-clib)
  libdir="${CARGO_TARGET_DIR:-$root/target}/release"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
source "$root/scripts/host-program.sh"
gpu=0
if srb_gpu_present; then gpu=1; fi
expect_clean_error() { # LABEL PATTERN EXE [ARGS...]
  local label=$1 pattern=$2 rc out; shift 2
  set +e; out="$("$@" 2>&1)"; rc=$?; set -e
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "$pattern" <<<"$out"; then
    echo "test-host-programs: $label without a GPU: exit $rc, \"$(grep -m1 "$pattern" <<<"$out")\" (ok)"
  else
    echo "test-host-programs: $label: exit $rc, expected a clean error matching '$pattern': $out" >&2; fail=1
  fi
}
bash "$root/scripts/build-seed-capi.sh" "$libdir" "$work/seed_capi"
if [ $gpu = 0 ]; then
  expect_clean_error "seed_capi" "driver library (libcuda) was not found" "$work/seed_capi"
else
  "$work/seed_capi" | grep -v '^in kernel' | diff - "$root/examples/seed_capi.expected" && echo "test-host-programs: seed_capi output as expected (ok)" || fail=1
fi
if command -v "${MPICXX:-mpicxx}" >/dev/null || [ "${SRB_CI:-0}" = 1 ]; then
  bash "$root/scripts/build-mpi-exchange.sh" "$libdir" "$work/mpi_exchange"
  if [ $gpu = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    expect_clean_error "mpi_exchange (singleton)" "this program needs a GPU" "$work/mpi_exchange" --steps 2
    expect_clean_error "mpi_exchange (mpirun -np 2)" "this program needs a GPU" \
      mpirun --oversubscribe -np 2 "$work/mpi_exchange" --steps 2
    expect_clean_error "mpi_exchange --bad-option" "usage: mpi_exchange" "$work/mpi_exchange" --bad-option
  fi
else
  echo "test-host-programs: no mpicxx (apt-get install libopenmpi-dev): skipped the MPI mini-app"
fi
[ $fail = 0 ] && echo "test-host-programs: ok" || exit 1
