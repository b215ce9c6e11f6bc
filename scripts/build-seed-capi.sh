#!/usr/bin/env bash
# Builds examples/seed_capi.cu (the seed's C++ program on the C API) against the static library,
# and with --run runs it and compares its output with the seed's expected lines.
#
# Usage: scripts/build-seed-capi.sh [--run] [LIBDIR] [OUTPUT]
#   LIBDIR  holds libsized_readback.a (default: target/release; built with cargo if missing and
#           cargo is there). The GPU host has nvcc but no Rust: copy the .a there.
#   OUTPUT  the executable (default: LIBDIR/seed_capi).
# Needs nvcc (NVCC=..., else scripts/find-nvcc.sh finds one, the pip wheel of `cargo xtask dev-env`
# included). The command it runs:
#   nvcc -O2 -std=c++17 -o OUTPUT examples/seed_capi.cu -Icapi/include -Iinclude LIBDIR/libsized_readback.a \
#        -lpthread -ldl -lm -lrt
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run=0
if [ "${1:-}" = "--run" ]; then run=1; shift; fi
libdir="${1:-$root/target/release}"
out="${2:-$libdir/seed_capi}"
source "$root/scripts/host-program.sh"
srb_capi_lib build-seed-capi "$libdir"
source "$root/scripts/find-nvcc.sh"
# The .a by path (not -l), so a libsized_readback.so beside it is not picked instead.
"$NVCC" -O2 -std=c++17 -o "$out" "$root/examples/seed_capi.cu" -I"$root/capi/include" -I"$root/include" "$lib" \
  "${NVCC_LINK_FLAGS[@]}" -lpthread -ldl -lm -lrt
echo "build-seed-capi: built $out"
if [ "$run" = 1 ]; then
  srb_run_seed build-seed-capi "$out"
fi
