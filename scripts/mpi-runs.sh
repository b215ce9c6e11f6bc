#!/usr/bin/env bash
# mpi-runs.sh: the MPI particle exchange's runs on a GPU host (the mini-app of
# examples/mpi_exchange.cu, library and baseline in one program): builds it there with nvcc and
# mpicxx against .gpu-capi/libsized_readback.a, then runs it at 1, 2 and 4 ranks sharing the
# GPU under CUDA MPS, and at 2 and 4 ranks without MPS (time-sliced contexts), each writing a
# JSON record; every step of every run is verified by the program itself.
#
# Usage (on the GPU host): OUT=/some/dir bash scripts/mpi-runs.sh [RANKS...]
# Environment: PARTICLES (default 1048576 per rank), LEAVE (0.01), STEPS (200), EXTRA (more
# arguments for the program, e.g. "--push-ns 20000"), NO_MPS_RANKS (default "2 4"), SMALL (1: also
# run 65536 particles per rank under MPS).
# Writes $OUT/mpi/*.json and $OUT/mpi/summary.txt. Exits non-zero if a run failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp}/mpi"
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
ranks=("$@"); [ ${#ranks[@]} -eq 0 ] && ranks=(1 2 4)
bin="$(mktemp -d)/mpi_exchange"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bash scripts/build-mpi-exchange.sh .gpu-capi "$bin" >> "$summary" 2>&1 || { echo "build failed" | tee -a "$summary"; exit 1; }
args=(--particles "${PARTICLES:-1048576}" --leave "${LEAVE:-0.01}" --steps "${STEPS:-200}" ${EXTRA:-})
fail=0
run() { # run LABEL NP
  local label=$1 np=$2
  timeout 240 mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin" "${args[@]}" --json "$out/$label.json" \
    > "$out/$label.log" 2>&1
  local rc=$?
  echo "== $label (rc=$rc)" | tee -a "$summary"
  grep -E '^mpi_exchange' "$out/$label.log" | tee -a "$summary"
  [ $rc -eq 0 ] || fail=1
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
  sleep 1
  for np in "${ranks[@]}"; do run "mps-np$np" "$np"; done
  # The same exchange with 64K particles per rank (push kernel short beside the exchange).
  if [ "${SMALL:-1}" = 1 ]; then
    saved=("${args[@]}")
    args=(--particles 65536 --leave "${LEAVE:-0.01}" --steps "${STEPS:-200}" ${EXTRA:-})
    for np in "${ranks[@]}"; do run "mps-64k-np$np" "$np"; done
    args=("${saved[@]}")
  fi
  echo quit | nvidia-cuda-mps-control
  sleep 2
else
  echo "could not start MPS" | tee -a "$summary"; fail=1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for np in ${NO_MPS_RANKS:-2 4}; do run "nomps-np$np" "$np"; done
echo "mpi-runs: $([ $fail = 0 ] && echo ALL OK || echo SOME FAILED)" | tee -a "$summary"
exit $fail
