#!/usr/bin/env bash
# sanitize.sh: runs compute-sanitizer (memcheck with --leak-check full, racecheck, synccheck,
# initcheck) over the staged GPU test binary, one subject (module) of test-gpu per run
# (reliability, pack, seed, kernel_image, append, buckets, embedding: the graph replays,
# staged_switch: the sized copy's graphs, except under racecheck), the C
# API's tests (test-capi), the seed example (pack and append) and, when SRB_PYTHONPATH
# names an installed package, the Python suite's PyTorch, graph and CuPy tests through pytest,
# on the GPU host. What is skipped, and why, is listed below and in RELIABILITY.md.
#
# Usage, from the project root on the GPU host, with the staged .gpu/ unpacked there (as
# scripts/gpu-verify.sh does; its `sanitize` phase runs this script):
#   OUT=/some/dir bash scripts/sanitize.sh
# Writes $OUT/sanitize-summary.txt (one line per run: tool, target, exit status, time, the
# sanitizer's summary line) and $OUT/sanitize-logs.tar.gz (the full logs). Exits non-zero if
# any run reported an error, failed, or was not run (budget spent, or a Python run that ran no
# test).
#
# Knobs (environment):
#   SANITIZE_BUDGET_S  stop starting new runs after this many seconds (default 200)
#   SANITIZE_RUN_S     per-run timeout in seconds (default 90)
# The four tools run in parallel, each over its targets in turn.
#   SANITIZE_TOOLS     tools to run (default "memcheck racecheck synccheck initcheck")
#   SANITIZE_PACK_FILTER  test-name filter of the pack run (default: pack::, all its tests)
#   SANITIZE_APPEND_FILTER, RACECHECK_APPEND_FILTER  the same for the append run
#   RACECHECK_SOAK_READBACKS, RACECHECK_PACK_FILTER, RACECHECK_BUCKETS_FILTER,
#   RACECHECK_EMBEDDING_FILTER  racecheck's smaller soak and its test filters for the pack,
#                      buckets and embedding runs (its Python subset: py_racecheck_tests)
#   SANITIZE_SET       "kernels": only the small dedicated case of each library kernel, under
#                      every tool (see below); "python-leaks": memcheck's leak check over the
#                      Python subset alone; unset: every run below
#   SANITIZE_PRINT_LIMIT  errors (leaks) printed per run (default 20)
#   SRB_PYTHONPATH     where the wheel is installed (pip --target); without it the Python runs
#                      are reported as not run
# The device-fault tests (test-gpu's reliability::faults) are skipped: they plant an illegal
# address on purpose. One of them runs alone under memcheck first, as a control: the sanitizer must
# report it. Timing-dependent tests are skipped too (see below).
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.gpu/bin"
out="${OUT:-/tmp}"
logs="$(mktemp -d)/sanitize-logs"
mkdir -p "$logs"
summary="$out/sanitize-summary.txt"
budget="${SANITIZE_BUDGET_S:-200}"
per_run="${SANITIZE_RUN_S:-90}"
tools="${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}"
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
start=$(date +%s)
fail=0
# compute-sanitizer saves the host call stack of every allocation for its leak report, Python
# frames included, and holds each of those Python frames (and so every object they reference)
# until the allocation is freed: under --leak-check full, an allocation made from a test
# function keeps that function's frame, and with it the readback that would free the
# allocation, alive to the exit, a leak of the tool's own making (every readback of the subset,
# and PyTorch's and CuPy's arrays, at 82173de). "--show-backtrace device" saves no host
# backtrace, and the leak check then reports what the program really left allocated
# (results/2026-12-04/gpu-verify-82173de). SANITIZE_PY_BACKTRACE_OPT overrides it ("" keeps the
# host backtraces, to find an allocation's owner, with that caveat).
read -ra py_bt_opt <<<"${SANITIZE_PY_BACKTRACE_OPT---show-backtrace device}"
{
  echo "# compute-sanitizer runs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# $("$cs" --version 2>&1 | tail -n 1)"
  echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
  echo "# Python runs: ${py_bt_opt[*]:-host backtraces kept}"
} > "$summary"

# Small settings so the instrumented runs stay short; the same tests run in full unsanitized.
# The create/drop loop still runs under every tool, but its memory figures are not asserted
# (other processes share the GPU meanwhile); the plain run of the suite asserts them.
export SRB_SOAK_READBACKS=2000 SRB_THREADS_READBACKS=800 SRB_LEAK_ITERS=20 SRB_MEM_ASSERT=0 \
  SRB_OTHER_STREAMS_READBACKS=1000 SRB_APPEND_CYCLES=100

# run NAME TOOL EXPECT -- COMMAND...   (EXPECT: clean | errors)
run() {
  local name=$1 tool=$2 expect=$3; shift 4
  local now; now=$(date +%s)
  if [ $((now - start)) -ge "$budget" ]; then
    echo "$tool $name: NOT RUN (sanitize budget of ${budget}s spent)" | tee -a "$summary"
    touch "$logs/FAILED"
    return
  fi
  local log="$logs/$tool-$name.log" extra=()
  # The leak check everywhere, the Python run included: there conftest.py (SRB_RELEASE_AT_EXIT)
  # frees the graph readbacks dropped after recording (sized_readback.release_retired) and
  # empties PyTorch's and CuPy's pools before the exit, so what is left is a real leak.
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$name" = python ] && extra+=("${py_bt_opt[@]}")
  local t0; t0=$(date +%s%N)
  timeout "$per_run" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit "${SANITIZE_PRINT_LIMIT:-20}" "$@" > "$log" 2>&1
  local rc=$?
  local dt; dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  local line; line=$(grep -E "(ERROR|RACECHECK|SYNCCHECK|INITCHECK|LEAK) SUMMARY" "$log" | tr '\n' ';' | sed 's/========= //g')
  # libtest's closing line, or pytest's ("N passed, ... in S s").
  local tests; tests=$(grep -E "^test result:|[0-9]+ passed" "$log" | tail -n 1)
  if [ "$name" = python ] && [ $rc = 0 ] && ! grep -qE "[1-9][0-9]* passed" <<<"$tests"; then
    rc=98  # a Python run that ran no test (no framework installed) proves nothing
  fi
  local verdict=ok
  case "$expect:$rc" in
    clean:0) verdict=ok ;;
    errors:99) verdict="ok (planted fault reported)" ;;
    *:124) verdict="TIMEOUT after ${per_run}s" ;;
    *:98) verdict="FAILED (pytest ran no test)" ;;
    *) verdict="FAILED (exit $rc)" ;;
  esac
  [ "$verdict" = "${verdict#ok}" ] && touch "$logs/FAILED"
  printf '%s %s: %s, %d ms; %s %s\n' "$tool" "$name" "$verdict" "$dt" "${line:-no summary line}" "$tests" | tee -a "$summary"
}

# Control first: the planted illegal address (a child scenario of the fault tests) must be
# reported, or a clean summary below would mean nothing.
SRB_RELIABILITY_SCENARIO=fault_staged_event run planted_fault memcheck errors -- "$bin/test-gpu"

# Skipped under every tool, because the sanitizer makes each launch return only once the
# kernel has run, so "still in flight" assertions cannot hold: the fault tests (planted
# faults), wait_timeout_returns_timeout, pack::polling_and_timeouts,
# seed::naive_reproduces_the_bug (which needs the copy to overtake the kernel) and
# staged_switch::building_waits_for_no_other_work (instrumented, a build outlasts the half
# second of other work that it checks it did not wait for), and the lifecycle's device reset
# (a child process that destroys its primary context, a case for the plain run). The
# remaining timing checks are switched off by SRB_TIMING_ASSERT=0. Each run takes one subject
# of test-gpu by its module's name: a test binary takes one filter, which matches any part of
# a test's name, and any number of --skip.
export SRB_TIMING_ASSERT=0
rel_skip=(--skip fault --skip wait_timeout --skip device_reset)
pack_skip=(--skip polling_and_timeouts)
seed_skip=(--skip naive_reproduces_the_bug)
switch_skip=(--skip building_waits_for_no_other_work)
# The C API's fault test plants a fault in a child process, as the reliability ones do.
capi_skip=(--skip fault)
# Python: the library's paths through PyTorch (tensors, streams, every count type), graph
# capture and CuPy (arrays, RawKernel appends). Not JAX and Numba (the same library paths
# through other frameworks; their runtimes under instrumentation exceed the per-run time), nor
# the fault test (a planted fault).
py_tests=(python/tests/test_gpu_torch.py python/tests/test_gpu_graph.py python/tests/test_gpu_cupy.py
  python/tests/test_gpu_allocations.py)
# Under racecheck (whose shared-memory instrumentation made the whole subset run past the
# per-run time): the paths with shared memory in their kernels, the appends (a RawKernel
# appending through the header) and a graph replay, and one pack of mixed columns.
py_racecheck_tests=(
  python/tests/test_gpu_cupy.py::test_the_append_example
  python/tests/test_gpu_cupy.py::test_append_context_manager_and_cancel
  python/tests/test_gpu_graph.py::test_graph_replays_with_replays_in_flight
  python/tests/test_gpu_torch.py::test_columns_of_mixed_dtypes
)
python_run() { # python_run TOOL: the pytest subset under TOOL, or a line saying why not
  if [ -z "${SRB_PYTHONPATH:-}" ]; then
    echo "$1 python: NOT RUN (SRB_PYTHONPATH unset: no installed package)" | tee -a "$summary"
    touch "$logs/FAILED"; return
  fi
  local tests=("${py_tests[@]}")
  [ "$1" = racecheck ] && tests=("${py_racecheck_tests[@]}")
  # The tests' leftovers collected and the frameworks' pools emptied before the exit
  # (conftest.py), so that memcheck's leak check reports only what was really left allocated.
  # SRB_ALLOC_REPORT: the library's live allocations after each test (conftest.py).
  (cd "$root" && PYTHONPATH="$SRB_PYTHONPATH" SRB_RELEASE_AT_EXIT=1 SRB_ALLOC_REPORT="$logs/allocs-$1.json" \
    run python "$1" clean -- python3 -m pytest -q -p no:cacheprovider "${tests[@]}")
}

finish() { # finish LABEL: the logs packed, the verdict of every run, the exit status
  [ -e "$logs/FAILED" ] && fail=1
  tar -czf "$out/sanitize-logs.tar.gz" -C "$(dirname "$logs")" sanitize-logs
  echo "sanitize$1: $([ $fail = 0 ] && echo ALL CLEAN || echo SOME FAILED) in $(( $(date +%s) - start )) s" | tee -a "$summary"
  exit $fail
}

# SANITIZE_SET=python-leaks: memcheck's leak check over the Python subset alone.
if [ "${SANITIZE_SET:-}" = python-leaks ]; then
  python_run memcheck
  finish " (python-leaks)"
fi

# SANITIZE_SET=kernels: one small dedicated case per kernel of the library under every tool
# (the pack, the bucket pack, the staged sized copy's pack in its graph, an append kernel
# through the header), each a test of test-gpu alone; nothing else runs. Racecheck without
# programmatic dependent launch, as below.
if [ "${SANITIZE_SET:-}" = kernels ]; then
  for tool in $tools; do
    (
      pdl=1; [ "$tool" = racecheck ] && pdl=0
      SIZED_READBACK_PDL=$pdl run kernel_pack "$tool" clean -- "$bin/test-gpu" --test-threads=1 pack::counts_at_the_edges
      SIZED_READBACK_PDL=$pdl run kernel_bucket_pack "$tool" clean -- "$bin/test-gpu" --test-threads=1 buckets::pack_partitioned_data
      SIZED_READBACK_PDL=$pdl run kernel_switch_pack "$tool" clean -- "$bin/test-gpu" --test-threads=1 staged_switch::rows_past_the_class_are_not_copied
      SIZED_READBACK_PDL=$pdl run kernel_append "$tool" clean -- "$bin/test-gpu" --test-threads=1 append::counts_at_the_edges
    ) &
  done
  wait
  finish " (kernels)"
fi

# One sequence of runs per tool; the tools run at the same time (separate processes and
# contexts; the GPU time-slices them), so the whole takes about as long as the slowest tool.
# racecheck instruments every shared-memory access and is by far the slowest: it gets the
# short soak (every element size, both transports, error statuses) and pack's count tests.
for tool in $tools; do
  (
    if [ "$tool" = racecheck ]; then
      SRB_SOAK_READBACKS=${RACECHECK_SOAK_READBACKS:-400} \
        run reliability "$tool" clean -- "$bin/test-gpu" reliability::load::soak_short
      run seed_pipeline "$tool" clean -- "$bin/example-seed_pipeline" --sleep-ms 50
      # One test at a time, and no programmatic dependent launch: with both, racecheck 2025.3
      # reported "Internal Sanitizer Error: Detected a failure to track a kernel launch" on the
      # H200 (a tool error, counted as its one "hazard"). Racecheck checks shared memory, which
      # the launch mode does not change.
      SIZED_READBACK_PDL=0 \
        # pack's three tests whose names hold "counts" (append's and buckets' skipped).
        run pack "$tool" clean -- "$bin/test-gpu" "${pack_skip[@]}" --skip append:: --skip buckets:: \
          --test-threads=1 ${RACECHECK_PACK_FILTER:-counts}
      # The append kernels stage rows in shared memory: what racecheck checks.
      run append "$tool" clean -- "$bin/test-gpu" --test-threads=1 ${RACECHECK_APPEND_FILTER:-append::several_columns}
      run seed_append "$tool" clean -- "$bin/example-seed_pipeline" --strategy append --sleep-ms 50
      # Bucketed appends stage rows per bucket in shared memory (BlockAppendTo).
      run buckets "$tool" clean -- "$bin/test-gpu" --test-threads=1 ${RACECHECK_BUCKETS_FILTER:-buckets::append_into_buckets}
      # Embedding's shortest graph replays (the device-sequenced pack, 7 replays); its column
      # tests run the same pack kernel as pack's above. The whole subject, and its seed-loop
      # replay test alone, ran past the per-run time.
      SIZED_READBACK_PDL=0 run embedding "$tool" clean -- "$bin/test-gpu" --test-threads=1 \
        ${RACECHECK_EMBEDDING_FILTER:-embedding::graph_overrun_is_detected}
      SIZED_READBACK_PDL=0 run capi "$tool" clean -- "$bin/test-capi" "${capi_skip[@]}" --test-threads=1
      SIZED_READBACK_PDL=0 python_run "$tool"
    else
      run reliability "$tool" clean -- "$bin/test-gpu" reliability:: "${rel_skip[@]}"
      run seed_pipeline "$tool" clean -- "$bin/example-seed_pipeline" --sleep-ms 50
      run pack "$tool" clean -- "$bin/test-gpu" "${pack_skip[@]}" ${SANITIZE_PACK_FILTER:-pack::}
      run seed "$tool" clean -- "$bin/test-gpu" "${seed_skip[@]}" seed::
      run kernel_image "$tool" clean -- "$bin/test-gpu" kernel_image::
      run append "$tool" clean -- "$bin/test-gpu" ${SANITIZE_APPEND_FILTER:-append::}
      run seed_append "$tool" clean -- "$bin/example-seed_pipeline" --strategy append --sleep-ms 50
      run buckets "$tool" clean -- "$bin/test-gpu" buckets::
      run embedding "$tool" clean -- "$bin/test-gpu" embedding::
      # The sized copy's graphs: the pack, the SWITCH node's bodies, and the floor's slots.
      run staged_switch "$tool" clean -- "$bin/test-gpu" "${switch_skip[@]}" staged_switch::
      run capi "$tool" clean -- "$bin/test-capi" "${capi_skip[@]}"
      python_run "$tool"
    fi
  ) &
done
wait

finish ""
