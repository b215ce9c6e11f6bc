#!/usr/bin/env bash
# Builds and runs scripts/probes/publish_fence_probe.cu on the GPU host (issue 34: what the
# trailer's publication costs with fence.sc.sys, fence.acq_rel.sys or a release store).
# Usage: bash scripts/probes/run-publish-fence-probe.sh OUTDIR [SAMPLES]
exec bash "$(dirname "${BASH_SOURCE[0]}")/run-probe.sh" publish_fence_probe "$@"
