#!/usr/bin/env bash
# CI test of the set-up's libclang detection (scripts/libclang.sh, used by scripts/dev-env.sh)
# against fake library trees, and of dev-env.sh leaving the caller's shell options alone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fake="$(mktemp -d)"
trap 'rm -rf "$fake"' EXIT
fail=0
expect() { # expect WHAT yes|no COMMAND...
  local what=$1 want=$2; shift 2
  if "$@" >/dev/null 2>&1; then got=yes; else got=no; fi
  if [ "$got" = "$want" ]; then echo "test-dev-env: $what: $got (ok)"; else echo "test-dev-env: $what: $got, expected $want" >&2; fail=1; fi
}
mkdir -p "$fake/cpp-only" "$fake/real" "$fake/versioned"
touch "$fake/cpp-only/libclang-cpp.so.14" "$fake/real/libclang.so" "$fake/versioned/libclang-14.so.1"
source "$root/scripts/libclang.sh"
expect "a tree with only libclang-cpp.so.14 has libclang" no libclang_dir "$fake/cpp-only"
expect "a tree with libclang.so has libclang" yes libclang_dir "$fake/real"
expect "a tree with libclang-14.so.1 has libclang" yes libclang_dir "$fake/versioned"
# LIBCLANG_PATH at a libclang-cpp-only tree is not believed (and is unset).
check_path() { LIBCLANG_PATH="$fake/cpp-only"; have_libclang >/dev/null 2>&1 || true; [ -z "${LIBCLANG_PATH:-}" ]; }
expect "LIBCLANG_PATH at a libclang-cpp-only tree is dropped" yes check_path
# Sourcing dev-env.sh from a shell without set -u / set -e leaves them off.
expect "sourcing dev-env.sh leaves the caller's set -u and set -e off" yes \
  bash -c "set +eu; source '$root/scripts/dev-env.sh' >/dev/null 2>&1; [[ \$- != *u* && \$- != *e* ]]"
# Without a driver, the quick start's seed.sh stops at once, having built nothing (whatever
# LD_LIBRARY_PATH holds).
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  seed_stops() { out="$(env -u LD_LIBRARY_PATH bash "$root/scripts/seed.sh" 2>&1)"; [ $? = 1 ] && grep -q "no NVIDIA driver" <<<"$out"; }
  expect "seed.sh without a driver (LD_LIBRARY_PATH unset) stops with its message" yes seed_stops
  seed_stops_set() { out="$(LD_LIBRARY_PATH=/nonexistent:/usr/lib bash "$root/scripts/seed.sh" 2>&1)"; [ $? = 1 ] && grep -q "no NVIDIA driver" <<<"$out"; }
  expect "seed.sh without a driver (LD_LIBRARY_PATH set) stops with its message" yes seed_stops_set
fi
[ $fail = 0 ] && echo "test-dev-env: ok" || exit 1
