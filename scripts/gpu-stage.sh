#!/usr/bin/env bash
# gpu-stage.sh: builds here everything the GPU host runs (it has no Rust toolchain) and stages it
# for scripts/gpu-verify.sh, from a plain clone (nothing outside the repository is used):
# - .gpu/bin/: every test executable of the workspace's default members (test-<target>, unit
#   tests as test-<kind>-<crate>), the examples (example-<name>), the comparison harness and the
#   seed (example-compare, example-seed_pipeline), and with --benches the criterion bench
#   (bench-readback); all release builds, debug info stripped; .gpu/COMMIT names the commit;
# - .gpu-capi/libsized_readback.a: the C library, for the host programs built there with nvcc;
# - .gpu-pack/stage.tgz: both, with the Python wheel if one was built (bash scripts/python.sh
#   wheel target/wheels), in one compressed bundle for the device tool's size limit.
# Usage, from anywhere: bash scripts/gpu-stage.sh [--benches]
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf .gpu .gpu-capi && mkdir -p .gpu/bin .gpu-capi .gpu-pack
# Prints "LABEL-[KIND-]NAME EXECUTABLE" for each executable a cargo build reports.
executables() { # executables LABEL CARGO-ARGS...
  local label=$1; shift
  cargo "$@" --locked --message-format=json 2>/dev/null | LABEL=$label python3 -c '
import json, os, sys
label = os.environ["LABEL"]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind, name = m["target"]["kind"][0], m["target"]["name"]
    if label == "test" and not m["profile"]["test"]:
        continue
    if label in ("example", "bench") and kind != label:
        continue
    print(f"{label}-{name}" if kind == label else f"{label}-{kind}-{name}", m["executable"])'
}
cargo test --no-run --release --locked >/dev/null   # errors show here, in full
cargo build --examples --release --locked >/dev/null
list="$(executables test test --no-run --release; executables example build --examples --release)"
if [ "${1:-}" = "--benches" ]; then
  cargo bench --no-run --locked >/dev/null
  list+=$'\n'"$(executables bench bench --no-run)"
fi
while read -r name exe; do
  [ -n "$name" ] || continue
  cp "$exe" ".gpu/bin/$name"
done <<<"$list"
# Tests that run cargo need a Rust toolchain, which the GPU host lacks; they check no GPU
# behaviour and run here and in CI: trybuild's compile-fail tests, and the C header's test
# (cbindgen reads the C API crate through `cargo metadata`).
rm -f .gpu/bin/test-compile_fail .gpu/bin/test-c_header
cargo build --release --locked -p sized-readback-harness -p sized-readback-clib -p sized-readback-seed
cp "$target/release/compare" .gpu/bin/example-compare
cp "$target/release/seed_pipeline" .gpu/bin/example-seed_pipeline
cp "$target/release/libsized_readback.a" .gpu-capi/
strip --strip-debug .gpu/bin/* .gpu-capi/libsized_readback.a 2>/dev/null || true
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
echo "$commit" > .gpu/COMMIT
wheels=("$target"/wheels/sized_readback-*manylinux_2_28*.whl)
if [ -e "${wheels[0]}" ]; then
  [ ${#wheels[@]} -eq 1 ] || { echo "gpu-stage: several manylinux wheels in $target/wheels: ${wheels[*]}" >&2; exit 1; }
  mkdir -p .gpu/wheels && cp "${wheels[0]}" .gpu/wheels/
else
  echo "gpu-stage: no wheel in $target/wheels (bash scripts/python.sh wheel target/wheels): the python phase will have none" >&2
fi
tar czf .gpu-pack/stage.tgz .gpu .gpu-capi
ls .gpu/bin
du -sh .gpu .gpu-capi .gpu-pack/stage.tgz
echo "gpu-stage: $commit staged; carry .gpu-pack (the device tool's carry: [\".gpu-pack\"]); there: OUT=dir bash scripts/gpu-verify.sh"
