#!/usr/bin/env bash
# Builds and runs scripts/probes/publish_fence_probe.cu on the GPU host (issue 34: what the
# trailer's publication costs with fence.sc.sys, fence.acq_rel.sys or a release store).
# Usage: bash scripts/probes/run-publish-fence-probe.sh OUTDIR [SAMPLES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?OUTDIR}"; shift
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
"$NVCC" -O3 -std=c++17 -arch=sm_90 "$root/scripts/probes/publish_fence_probe.cu" -o "$out/publish_fence_probe" "${NVCC_LINK_FLAGS[@]}" 2>&1 | tee "$out/build.txt"
"$out/publish_fence_probe" "$@" 2>&1 | tee "$out/probe.txt"
rm -f "$out/publish_fence_probe"
