#!/usr/bin/env bash
# Builds and runs scripts/probes/sized_grid_probe.cu on the GPU host (issue 36's third probe: a
# consumer's grid set on the device through a device-updatable kernel node, against the SWITCH
# the library records today, the exact grid and a capped over-launch, in one run).
# Usage: bash scripts/probes/run-grid-probe.sh OUTDIR [STEPS REPEATS]
out="${1:?OUTDIR}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/run-probe.sh" sized_grid_probe "$out" "${2:-64}" "${3:-50}" "$out/probe.json"
