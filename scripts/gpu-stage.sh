#!/usr/bin/env bash
# gpu-stage.sh: builds here everything the GPU host runs (it has no Rust toolchain) and stages it
# for scripts/gpu-verify.sh, from a plain clone (nothing outside the repository is used):
# - .gpu/bin/: every test executable of the workspace's default members (test-<target>, unit
#   tests as test-<kind>-<crate>), the examples (example-<name>), the comparison harness and the
#   seed (example-compare, example-seed_pipeline), and with --benches the criterion bench
#   (bench-readback); all release builds, debug info stripped;
# - .gpu-capi/libsized_readback.a: the C library, for the host programs built there with nvcc;
# - .gpu-pack/stage.tgz: both, with the Python wheel if one was built (bash scripts/python.sh
#   wheel target/wheels), in one compressed bundle for the device tool's size limit.
# Usage, from anywhere: bash scripts/gpu-stage.sh [--benches]
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu .gpu-capi && mkdir -p .gpu/bin .gpu-capi .gpu-pack
# Executables cargo reports for a build ("label name path" per line).
executables() { # executables LABEL CARGO-ARGS...
  local label=$1; shift
  cargo "$@" --release --locked --message-format=json 2>/dev/null | LABEL=$label python3 -c '
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
list="$(executables test test --no-run; executables example build --examples)"
if [ "${1:-}" = "--benches" ]; then
  cargo bench --no-run --locked >/dev/null
  list+=$'\n'"$(cargo bench --no-run --locked --message-format=json 2>/dev/null | LABEL=bench python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"][0] == "bench":
        print("bench-" + m["target"]["name"], m["executable"])')"
fi
while read -r name exe; do
  [ -n "$name" ] || continue
  cp "$exe" ".gpu/bin/$name"
done <<<"$list"
# trybuild's compile-fail tests need cargo: they run here and in CI, not on the GPU host.
rm -f .gpu/bin/test-compile_fail
cargo build --release --locked -p sized-readback-harness -p sized-readback-capi -p sized-readback-seed
cp target/release/compare .gpu/bin/example-compare
cp target/release/seed_pipeline .gpu/bin/example-seed_pipeline
cp target/release/libsized_readback.a .gpu-capi/
strip --strip-debug .gpu/bin/* .gpu-capi/libsized_readback.a 2>/dev/null || true
grep -qx '/.gpu-pack/' .git/info/exclude 2>/dev/null || echo '/.gpu-pack/' >> .git/info/exclude
tar czf .gpu-pack/stage.tgz .gpu .gpu-capi $(ls target/wheels/sized_readback-*manylinux*.whl 2>/dev/null)
ls .gpu/bin
du -sh .gpu .gpu-capi .gpu-pack/stage.tgz
echo "gpu-stage: carry .gpu-pack (the device tool's carry: [\".gpu-pack\"]); there: OUT=dir bash scripts/gpu-verify.sh"
