#!/usr/bin/env bash
# Builds examples/seed_capi.cu (the seed's C++ program on the C API) against the static library,
# and with --run runs it and compares its output with the seed's expected lines.
#
# Usage: scripts/build-seed-capi.sh [--run] [LIBDIR] [OUTPUT]
#   LIBDIR  holds libsized_readback.a (default: target/release; built with cargo if missing and
#           cargo is there). The GPU host has nvcc but no Rust: copy the .a there.
#   OUTPUT  the executable (default: LIBDIR/seed_capi).
# Needs nvcc (NVCC=..., else scripts/find-nvcc.sh finds one, the pip wheel of scripts/dev-env.sh
# included). The command it runs:
#   nvcc -O2 -std=c++17 -o OUTPUT examples/seed_capi.cu -Icapi/include -Iinclude LIBDIR/libsized_readback.a \
#        -lpthread -ldl -lm -lrt
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run=0
if [ "${1:-}" = "--run" ]; then run=1; shift; fi
libdir="${1:-$root/target/release}"
out="${2:-$libdir/seed_capi}"
lib="$libdir/libsized_readback.a"
if [ ! -f "$lib" ]; then
  # Build it only where cargo puts it; a LIBDIR given without the library is a mistake to report.
  [ "$libdir" = "$root/target/release" ] || { echo "build-seed-capi: no libsized_readback.a in $libdir" >&2; exit 1; }
  command -v cargo >/dev/null || { echo "build-seed-capi: $lib is missing and there is no cargo" >&2; exit 1; }
  (cd "$root" && cargo build --release --locked -p sized-readback-capi)
fi
source "$root/scripts/find-nvcc.sh"
# The .a by path (not -l), so a libsized_readback.so beside it is not picked instead.
"$NVCC" -O2 -std=c++17 -o "$out" "$root/examples/seed_capi.cu" -I"$root/capi/include" -I"$root/include" "$lib" \
  "${NVCC_LINK_FLAGS[@]}" -lpthread -ldl -lm -lrt
echo "build-seed-capi: built $out"
if [ "$run" = 1 ]; then
  log="$(mktemp)"
  "$out" | tee "$log"
  if grep -v '^in kernel:' "$log" | diff -u "$root/examples/seed_capi.expected" -; then
    echo "build-seed-capi: output matches the seed's expected output ($(wc -l < "$root/examples/seed_capi.expected") lines)"
  else
    echo "build-seed-capi: OUTPUT DIFFERS from examples/seed_capi.expected" >&2
    exit 1
  fi
fi
