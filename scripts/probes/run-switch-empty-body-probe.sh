#!/usr/bin/env bash
# Builds and runs scripts/probes/switch_empty_body_probe.cu on the GPU host (issue 34: does a
# SWITCH whose chosen body is empty cost what one that launches a body does?).
# Usage: bash scripts/probes/run-switch-empty-body-probe.sh OUTDIR [SAMPLES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?OUTDIR}"; shift
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
"$NVCC" -O3 -std=c++17 -arch=sm_90 "$root/scripts/probes/switch_empty_body_probe.cu" -o "$out/switch_empty_body_probe" "${NVCC_LINK_FLAGS[@]}" 2>&1 | tee "$out/build.txt"
"$out/switch_empty_body_probe" "$@" 2>&1 | tee "$out/probe.txt"
rm -f "$out/switch_empty_body_probe"
