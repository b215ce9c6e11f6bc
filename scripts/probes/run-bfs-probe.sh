#!/usr/bin/env bash
# Builds and runs scripts/probes/bfs_sized_probe.cu on the GPU host (issue 36's BFS, four ways
# of sizing each level), writing its output to OUTDIR/bfs.txt.
# Usage: bash scripts/probes/run-bfs-probe.sh OUTDIR [SCALE REPEATS]   (defaults 22 20)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?OUTDIR}"; shift
mkdir -p "$out"
source "$root/scripts/find-nvcc.sh"
"$NVCC" -O3 -std=c++17 -arch=sm_90 "$root/scripts/probes/bfs_sized_probe.cu" -o "$out/bfs_sized_probe" \
  "${NVCC_LINK_FLAGS[@]}"
"$out/bfs_sized_probe" "${1:-22}" "${2:-20}" 2>&1 | tee "$out/bfs.txt"
