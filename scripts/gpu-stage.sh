#!/usr/bin/env bash
# gpu-stage.sh: builds here everything the GPU host runs (it has no Rust toolchain) and stages it
# for scripts/gpu-verify.sh: the test and example executables in .gpu/ (../shared/tools/gpu-stage),
# the comparison harness and the seed as .gpu/bin/example-compare and example-seed_pipeline, the criterion bench with --benches, and the
# C library (libsized_readback.a) with the C API's headers in .gpu-capi/.
# Usage, from the project root: bash scripts/gpu-stage.sh [--benches]
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=(--only tests --only examples)
[ "${1:-}" = "--benches" ] && kinds+=(--only benches)
../shared/tools/gpu-stage "${kinds[@]}"
# trybuild's compile-fail tests need cargo: they run here and in CI, not on the GPU host.
rm -f .gpu/bin/test-compile_fail
cargo build --release --locked -p sized-readback-harness -p sized-readback-capi -p sized-readback-seed
for b in compare seed_pipeline; do
  cp "target/release/$b" ".gpu/bin/example-$b"
  strip --strip-debug ".gpu/bin/example-$b" 2>/dev/null || true
done
rm -rf .gpu-capi && mkdir -p .gpu-capi
cp target/release/libsized_readback.a .gpu-capi/
strip --strip-debug .gpu-capi/libsized_readback.a
# One compressed bundle travels (the binaries embed every kernel image; packed they are a third
# of their size): .gpu/, .gpu-capi/ and the Python wheel if one was built
# (bash scripts/python.sh wheel target/wheels). gpu-verify.sh unpacks it there.
mkdir -p .gpu-pack
grep -qx '/.gpu-pack/' .git/info/exclude 2>/dev/null || echo '/.gpu-pack/' >> .git/info/exclude
tar czf .gpu-pack/stage.tgz .gpu .gpu-capi $(ls target/wheels/sized_readback-*.whl 2>/dev/null)
du -sh .gpu .gpu-capi .gpu-pack/stage.tgz
echo "gpu-stage: carry .gpu-pack (the device tool's carry: [\".gpu-pack\"]); there: OUT=dir bash scripts/gpu-verify.sh"
