#!/usr/bin/env bash
# CI: the packaged crate (target/package/sized-readback-*.crate, from `cargo package`) as a
# dependent gets it, built and documented with no CUDA toolkit and no libclang reachable: the
# environment is emptied (PATH, CUDA_HOME, CUDA_PATH, NVCC, LIBCLANG_PATH, VIRTUAL_ENV,
# CONDA_PREFIX gone; PATH is Rust's bin/ and /usr/bin:/bin) and no .venv-nvcc is near. The
# dependent (.ci/dependent/main.rs) must build, its build graph must hold no bindgen or
# clang-sys, and its run must print the library's "no driver" error and exit 0 without a GPU
# (with one, read back one count). `cargo doc` of the packaged crate must succeed likewise.
# Usage: bash scripts/test-dependent.sh   (after cargo package -p sized-readback)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$(ls "${CARGO_TARGET_DIR:-$root/target}"/package/sized-readback-*.crate | sort -V | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$crate" -C "$work"
lib="$(basename "$crate" .crate)"
mkdir -p "$work/dependent/src"
cp "$root/.ci/dependent/main.rs" "$work/dependent/src/main.rs"
cp "$root/Cargo.lock" "$work/dependent/Cargo.lock"  # the same versions as the workspace
cat > "$work/dependent/Cargo.toml" <<TOML
[package]
name = "dependent"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
sized-readback = { path = "../$lib" }

[workspace]
TOML
cargo_bin="$(dirname "$(command -v cargo)")"
clean=(env -i HOME="$HOME" PATH="$cargo_bin:/usr/bin:/bin" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
       RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_TARGET_DIR="$work/target")
if "${clean[@]}" bash -c 'command -v nvcc' >/dev/null; then
  echo "test-dependent: nvcc is reachable in the emptied environment: the check would prove nothing" >&2; exit 1
fi
cd "$work/dependent"
"${clean[@]}" cargo build --quiet
echo "test-dependent: the dependent of $lib.crate built with no toolkit (PATH=$cargo_bin:/usr/bin:/bin, no CUDA_HOME, CUDA_PATH, NVCC, LIBCLANG_PATH, VIRTUAL_ENV, CONDA_PREFIX)"
if "${clean[@]}" cargo tree --quiet --prefix none -e normal,build | grep -E '^(bindgen|clang-sys|cc|cudarc-sys) ' ; then
  echo "test-dependent: the dependent's build graph holds a C toolchain or libclang user (above)" >&2; exit 1
fi
echo "test-dependent: its build graph has no bindgen, clang-sys or cc"
out="$("${clean[@]}" "$work/target/debug/dependent")"
echo "$out"
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  grep -q "^dependent: read back 3 rows" <<<"$out" || { echo "test-dependent: no readback on this GPU host" >&2; exit 1; }
else
  grep -qx "dependent: the CUDA driver library (libcuda) was not found: install an NVIDIA driver" <<<"$out" \
    || { echo "test-dependent: expected the library's no-driver error" >&2; exit 1; }
fi
cd "$work/$lib"
"${clean[@]}" RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --quiet --no-deps
echo "test-dependent: cargo doc of $lib.crate (as docs.rs builds it) with no toolkit: ok ($(ls "$work/target/doc/sized_readback" | wc -l) entries)"
