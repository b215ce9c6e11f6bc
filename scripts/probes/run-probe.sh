#!/usr/bin/env bash
# Builds one single-file probe, scripts/probes/NAME.cu, with nvcc for sm_90 on the GPU host and
# runs it with ARGS: the build's output in OUTDIR/build.txt, the run's in OUTDIR/probe.txt (the
# binary is removed after the run, so OUTDIR holds text only).
# Usage: bash scripts/probes/run-probe.sh NAME OUTDIR [ARGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
name="${1:?NAME (scripts/probes/NAME.cu)}"; out="${2:?OUTDIR}"; shift 2
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
trap 'rm -f "$out/$name"' EXIT  # the binary goes even when the probe fails
"$NVCC" -O3 -std=c++17 -arch=sm_90 "$root/scripts/probes/$name.cu" -o "$out/$name" "${NVCC_LINK_FLAGS[@]}" 2>&1 | tee "$out/build.txt"
"$out/$name" "$@" 2>&1 | tee "$out/probe.txt"
