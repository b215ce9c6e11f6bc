#!/usr/bin/env bash
# Builds examples/mpi_exchange.cu (the MPI particle exchange on the C API, library and baseline
# in one program) with nvcc and the system MPI's mpicxx, against the static C library.
#
# Usage: scripts/build-mpi-exchange.sh [LIBDIR] [OUTPUT]
#   LIBDIR  holds libsized_readback.a (default: target/release; built with cargo if missing and
#           cargo is there). The GPU host has nvcc and MPI but no Rust: copy the .a there.
#   OUTPUT  the executable (default: LIBDIR/mpi_exchange).
# Needs nvcc (NVCC=..., else as scripts/build-seed-capi.sh finds it) and mpicxx (MPICXX=...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
libdir="${1:-$root/target/release}"
out="${2:-$libdir/mpi_exchange}"
source "$root/scripts/host-program.sh"
srb_capi_lib build-mpi-exchange "$libdir"
source "$root/scripts/find-nvcc.sh"
mpicxx="${MPICXX:-mpicxx}"
command -v "$mpicxx" >/dev/null || { echo "build-mpi-exchange: no $mpicxx (install libopenmpi-dev or set MPICXX)" >&2; exit 1; }
"$NVCC" -O3 -std=c++17 -ccbin "$mpicxx" -arch=sm_75 -gencode=arch=compute_90,code=sm_90 \
  -o "$out" "$root/examples/mpi_exchange.cu" -I"$root/capi/include" -I"$root/include" "$lib" \
  "${NVCC_LINK_FLAGS[@]}" -lpthread -ldl -lm -lrt
echo "build-mpi-exchange: built $out"
