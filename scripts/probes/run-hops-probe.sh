#!/usr/bin/env bash
# Builds and runs scripts/probes/sized_step_hops_probe.cu on the GPU host (issue 36's second
# probe: the per-step cost of each way of choosing a SWITCH's class inside one graph).
# Usage: bash scripts/probes/run-hops-probe.sh OUTDIR [STEPS REPEATS]
exec bash "$(dirname "${BASH_SOURCE[0]}")/run-probe.sh" sized_step_hops_probe "$@"
