#!/usr/bin/env bash
# gpu-verify.sh: the whole GPU verification in one go, on a GPU host that has no Rust toolchain.
#
# Here (with Rust):   ../shared/tools/gpu-stage --only tests --only examples
#                     cargo build --release --lib && mkdir -p .gpu-capi &&
#                     cp target/release/libsized_readback.a .gpu-capi/
# There (with .gpu/ and .gpu-capi/ copied into the project root):
#                     OUT=/some/dir bash scripts/gpu-verify.sh
# Runs every staged test binary with --include-ignored (GPU tests included), the seed example
# with each strategy, the comparison harness, the 1,000,000-readback soak, the seed's C++ program
# on the C API, and compute-sanitizer. Writes $OUT/summary.txt and $OUT/verify.tgz (all logs and
# the harness's table, JSON and plot). Exits non-zero if anything failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/srb-verify}"
work="$(mktemp -d)/verify"
mkdir -p "$out" "$work"
summary="$out/summary.txt"
fail=0
step() { # step NAME COMMAND...: runs it, logs to $work/NAME.log, records the verdict
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$work/$name.log" 2>&1
  local rc=$?
  printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'test result|verified|gpu-stage run|matches|DIFFERS|targets|ERROR SUMMARY' "$work/$name.log" | tail -n 3 | tr '\n' ' ')" | tee -a "$summary"
  [ "$rc" -eq 0 ] || fail=1
}
{
  echo "# gpu-verify $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
} | tee "$summary"

grep -x 'example-seed_pipeline' .gpu/examples.txt > .gpu/examples.only && mv .gpu/examples.only .gpu/examples.txt
step tests env OUT="$work" bash .gpu/run.sh
for s in mapped staged naive sync; do
  step "seed-$s" .gpu/bin/example-seed_pipeline --strategy "$s" --sleep-ms 200 --no-kernel-printf
done
step compare .gpu/bin/example-compare --out "$work/compare"
step soak .gpu/bin/example-soak --readbacks 1000000
export NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
step seed-capi bash scripts/build-seed-capi.sh --run .gpu-capi "$work/seed_capi"
step sanitize env OUT="$work" SANITIZE_BUDGET_S="${SANITIZE_BUDGET_S:-150}" bash scripts/sanitize.sh
tar czf "$out/verify.tgz" -C "$(dirname "$work")" verify
echo "gpu-verify: $([ $fail = 0 ] && echo ALL OK || echo SOME FAILED)" | tee -a "$summary"
exit $fail
