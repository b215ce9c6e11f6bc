#!/usr/bin/env bash
# Builds and runs scripts/probes/switch_empty_body_probe.cu on the GPU host (issue 34: does a
# SWITCH whose chosen body is empty cost what one that launches a body does?).
# Usage: bash scripts/probes/run-switch-empty-body-probe.sh OUTDIR [SAMPLES]
exec bash "$(dirname "${BASH_SOURCE[0]}")/run-probe.sh" switch_empty_body_probe "$@"
