#!/usr/bin/env bash
# Builds and runs scripts/probes/sized_step_hops_probe.cu on the GPU host (issue 36's second
# probe: the per-step cost of each way of choosing a SWITCH's class inside one graph).
# Usage: bash scripts/probes/run-hops-probe.sh OUTDIR [STEPS REPEATS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?OUTDIR}"; shift
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
"$NVCC" -O3 -std=c++17 -arch=sm_90 "$root/scripts/probes/sized_step_hops_probe.cu" -o "$out/hops_probe" "${NVCC_LINK_FLAGS[@]}" 2>&1 | tee "$out/build.txt"
"$out/hops_probe" "$@" 2>&1 | tee "$out/probe.txt"
