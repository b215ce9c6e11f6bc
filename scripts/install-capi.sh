#!/usr/bin/env bash
# Installs the C API into PREFIX (any path; a relative one is taken from the current directory):
#   lib/libsized_readback.a, lib/libsized_readback.so.X.Y.Z (+ .so.X, .so links)
#   include/sized_readback.h, include/sized_readback/{slot.h,append.cuh}
#   lib/cmake/sized_readback/ (find_package(sized_readback 0.1 CONFIG), relocatable)
#   lib/pkgconfig/sized_readback.pc (shared), sized_readback-static.pc (static; relocatable)
#   share/sized_readback/fortran/sized_readback.f90 (the Fortran module's source)
# It builds the libraries with `cargo build --release -p sized-readback-clib` (set SRB_LIBDIR to a
# directory that holds built ones to skip that) and installs with CMake's package helpers
# (capi/CMakeLists.txt; CMake >= 3.20).
set -euo pipefail
usage="usage: bash scripts/install-capi.sh PREFIX   (e.g. bash scripts/install-capi.sh \$HOME/.local)"
[ $# -eq 1 ] && [ -n "$1" ] || { echo "$usage" >&2; exit 2; }
case "$1" in -h|--help) echo "$usage"; exit 0 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"
command -v cmake >/dev/null || { echo "install-capi: cmake (>= 3.20) is needed: apt-get install cmake" >&2; exit 1; }
libdir="${SRB_LIBDIR:-}"
if [ -z "$libdir" ]; then
  (cd "$root" && cargo build --release --locked -p sized-readback-clib)
  libdir="${CARGO_TARGET_DIR:-$root/target}/release"
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
cmake -S "$root/capi" -B "$build" -DSRB_LIBDIR="$libdir" >/dev/null
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "install-capi: installed into $prefix"
echo "  CMake:      cmake -DCMAKE_PREFIX_PATH=$prefix ...   then find_package(sized_readback 0.1 CONFIG REQUIRED)"
echo "  pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs sized_readback-static"
echo "  plain cc:   cc prog.c -I$prefix/include $prefix/lib/libsized_readback.a -lpthread -ldl -lm -lrt"
