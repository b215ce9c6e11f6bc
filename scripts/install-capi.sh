#!/usr/bin/env bash
# Installs the C API into PREFIX: lib/libsized_readback.{a,so}, include/sized_readback.h,
# lib/pkgconfig/sized_readback.pc and lib/cmake/sized_readback/sized_readbackConfig.cmake.
# Usage: scripts/install-capi.sh PREFIX   (builds `cargo build --release --lib` first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:?usage: scripts/install-capi.sh PREFIX}"
(cd "$root" && cargo build --release --lib)
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/cmake/sized_readback" "$prefix/include"
install -m 644 "$root/target/release/libsized_readback.a" "$prefix/lib/"
install -m 755 "$root/target/release/libsized_readback.so" "$prefix/lib/"
install -m 644 "$root/include/sized_readback.h" "$prefix/include/"
install -m 644 "$root/cmake/sized_readbackConfig.cmake" "$prefix/lib/cmake/sized_readback/"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$root/pkgconfig/sized_readback.pc.in" \
  > "$prefix/lib/pkgconfig/sized_readback.pc"
echo "install-capi: installed into $prefix (pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig; CMake: CMAKE_PREFIX_PATH=$prefix)"
