#!/usr/bin/env bash
# gpu-verify.sh: the GPU verification, on a GPU host that has no Rust toolchain.
#
# Here (with Rust):  cargo xtask stage                   (packs .gpu/ and .gpu-capi/ into
#                                                        .gpu-pack/stage.tgz; carry .gpu-pack)
# There, from the project root:
#                    OUT=/some/dir bash scripts/gpu-verify.sh [PHASE...]
# Phases (default: tests ptx load seeds examples soak capi sanitize compare), in the order given:
#   tests      every staged test binary with --include-ignored (GPU tests included)
#   ptx        the PTX path: every staged test binary and the seed again under
#              CUDA_FORCE_PTX_JIT=1 (the driver JIT-compiles the committed compute_90 PTX)
#   load       the first readback of fresh processes, machine code against forced JIT with the
#              JIT cache off (scripts/first-load.py; JSON in verify.tgz as load.json)
#   seeds      the seed example in every strategy (mapped, staged, naive, sync, append, append-staged)
#   examples   the particle example (left_box, its kernel compiled with NVRTC)
#   soak       the long soak (>= 1,000,000 verified readbacks: pack, append, graph replay)
#   capi       the seed's C++ program on the C API, built with nvcc against libsized_readback.a,
#              and its Fortran port on the Fortran module (FC, default gfortran-13), both
#              compared with examples/seed_capi.expected
#   sanitize   compute-sanitizer's four tools (scripts/sanitize.sh)
#   compare    one comparison-harness run; compare3: three in a row; compare-quick: a fifth of it
#   bench      the criterion bench (staged with cargo xtask stage --benches)
#   python     the Python package: the staged abi3 wheel (.gpu/wheels/, from cargo xtask python wheel)
#              installed with pip --target, its whole pytest suite (torch, CuPy, JAX, Numba), the
#              CuPy append example, the binding's profile (python/bench/profile_binding.py) and the
#              benchmark (python/bench/bench.py); their JSON in verify.tgz, under python/
#   pytest     the Python package's wheel and its whole pytest suite only
#   grid-probe issue 36's third probe (scripts/probes/sized_grid_probe.cu, built with the host's
#              nvcc): what the driver accepts of device-updatable kernel nodes and what they
#              cost per step; its text and JSON in verify.tgz, under grid-probe/
#   mpi        the MPI particle exchange at 1, 2, 4 ranks under MPS and 2, 4 without
#              (scripts/mpi-runs.sh; its JSON records in verify.tgz, under mpi/)
#   sized      the sized launch measured: the seed's loop with its next kernel sized
#              (example-sized_loop, capacities 1M and 16K) and three consecutive runs of the BFS
#              on SizedLaunch (example-bfs, scale 22), and the host's synchronizing calls per
#              BFS level counted from nsys traces (scripts/bfs-host-syncs.sh); their JSON
#              records in verify.tgz, under sized/
# Writes $OUT/summary.txt and $OUT/verify.tgz (every log, and each harness run's table, JSON and
# plot). Exits non-zero if anything failed.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# What cargo xtask stage packed, unpacked afresh (a warm machine keeps an older .gpu/).
if [ -f .gpu-pack/stage.tgz ]; then rm -rf .gpu .gpu-capi && tar xzf .gpu-pack/stage.tgz; fi
out="${OUT:-/tmp/srb-verify}"
work="$(mktemp -d)/verify"
mkdir -p "$out" "$work"
summary="$out/summary.txt"
fail=0
# The commit measured, for every JSON record (the GPU host's copy may have no git metadata).
export SRB_COMMIT="${SRB_COMMIT:-$(cat .gpu/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# Tests that read the repository's files find them here, not at the build machine's path.
export SRB_SOURCE_DIR="$PWD"
# The Fortran tests (test-fortran) and the Fortran seed: the host's gfortran, nvcc and the
# staged C library.
export FC="${FC:-$(command -v gfortran-13 || command -v gfortran || echo gfortran-13)}"
export NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
export SRB_LIBDIR="${SRB_LIBDIR:-$PWD/.gpu-capi}"
# NVRTC (the left_box example, the append tests) from the toolkit.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
step() { # step NAME COMMAND...: runs it, logs to $work/NAME.log, records the verdict
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$work/$name.log" 2>&1
  local rc=$?
  printf '%-26s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'test result|verified|gpu-stage run|matches|DIFFERS|targets hold|ERROR SUMMARY|agrees|ALL CLEAN|SOME FAILED|passed|failed|Successfully' "$work/$name.log" | tail -n 3 | tr '\n' ' ')" | tee -a "$summary"
  [ "$rc" -eq 0 ] || fail=1
}
seed_ok() { # seed_ok STRATEGY EXPECTED: the seed example's lines (kernel printf off) match
  .gpu/bin/example-seed_pipeline --strategy "$1" --sleep-ms 200 --no-kernel-printf > "$work/seed-$1.out" || return 1
  diff -u "$2" "$work/seed-$1.out" && echo "seed $1: output matches $2"
}
ptx_seed() { # the seed example on the PTX path
  CUDA_FORCE_PTX_JIT=1 .gpu/bin/example-seed_pipeline --strategy mapped --sleep-ms 200 --no-kernel-printf > "$work/seed-ptx.out" || return 1
  diff -u examples/seed_capi.expected "$work/seed-ptx.out" && echo "seed mapped (CUDA_FORCE_PTX_JIT=1): output matches"
}
{
  echo "# gpu-verify $(date -u +%Y-%m-%dT%H:%M:%SZ) $SRB_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
} | tee "$summary"
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(tests ptx load seeds examples soak capi sanitize compare)
for ph in "${phases[@]}"; do
  case "$ph" in
    tests)
      for b in .gpu/bin/test-*; do
        step "$(basename "$b")" "$b" --include-ignored
      done ;;
    ptx)
      for b in .gpu/bin/test-*; do
        step "ptx-$(basename "$b")" env CUDA_FORCE_PTX_JIT=1 "$b" --include-ignored
      done
      step ptx-seed-mapped ptx_seed ;;
    load)
      step load python3 scripts/first-load.py "$work/load.json" "${LOAD_RUNS:-15}" ;;
    seeds)
      for s in mapped staged sync append append-staged; do
        step "seed-$s" seed_ok "$s" examples/seed_capi.expected
      done
      step seed-naive seed_ok naive examples/seed_naive.expected ;;
    examples)
      step left_box .gpu/bin/example-left_box ;;
    soak)
      step soak .gpu/bin/example-soak --readbacks "${SOAK_READBACKS:-1000000}" ;;
    capi)
      step seed-capi bash scripts/build-seed-capi.sh --run .gpu-capi "$work/seed_capi"
      step seed-fortran bash scripts/build-seed-fortran.sh --run .gpu-capi "$work/seed_fortran" ;;
    sanitize)
      [ -d "$work/pysite" ] || step py-install python3 -m pip install --no-deps --no-index --target "$work/pysite" .gpu/wheels/sized_readback-*.whl
      step sanitize env OUT="$work" SRB_PYTHONPATH="$work/pysite" SANITIZE_BUDGET_S="${SANITIZE_BUDGET_S:-170}" bash scripts/sanitize.sh ;;
    compare|compare-quick|compare3)
      runs=1; extra=()
      [ "$ph" = compare3 ] && runs=3
      [ "$ph" = compare-quick ] && extra=(--quick)
      for r in $(seq 1 $runs); do
        step "compare-$r" .gpu/bin/example-compare "${extra[@]}" --out "$work/compare-$r"
        grep -E '^(target|---|n |one |seed |realistic)' "$work/compare-$r/table.txt" 2>/dev/null | grep -E 'yes|NO' | sed "s/^/compare-$r: /" >> "$summary"
      done ;;
    bench)
      step bench .gpu/bin/bench-readback --bench ;;
    pytest)
      step py-install python3 -m pip install --no-deps --no-index --target "$work/pysite" .gpu/wheels/sized_readback-*.whl
      step py-tests env PYTHONPATH="$work/pysite" SRB_REQUIRE_GPU=1 python3 -m pytest python/tests -rs -q ;;
    python)
      pyt="$work/pysite"
      step py-install python3 -m pip install --no-deps --no-index --target "$pyt" .gpu/wheels/sized_readback-*.whl
      step py-tests env PYTHONPATH="$pyt" SRB_REQUIRE_GPU=1 python3 -m pytest python/tests -rs -q
      step py-cupy-append env PYTHONPATH="$pyt" python3 python/examples/cupy_append.py
      step py-profile env PYTHONPATH="$pyt" python3 python/bench/profile_binding.py --out "$work/python/profile.json"
      step py-bench env PYTHONPATH="$pyt" python3 python/bench/bench.py --out "$work/python/bench.json"
      grep -E 'holds|MISS|yes|NO' "$work/python/bench.md" 2>/dev/null | sed 's/^/python: /' >> "$summary" ;;
    sized)
      mkdir -p "$work/sized"
      rec=(env SRB_COMMIT="$SRB_COMMIT" SRB_DATE="$(date -u +%F)"
        SRB_MACHINE="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)")
      step sized-loop "${rec[@]}" .gpu/bin/example-sized_loop --out "$work/sized/sized_loop.json"
      step sized-loop-16k "${rec[@]}" .gpu/bin/example-sized_loop --capacity 16384 --out "$work/sized/sized_loop_16k.json"
      for r in 1 2 3; do
        step "bfs-$r" "${rec[@]}" .gpu/bin/example-bfs --scale 22 --repeats 10 --out "$work/sized/bfs-$r.json"
        grep -E '^(median level|time per level)' "$work/bfs-$r.log" | sed "s/^/bfs-$r: /" >> "$summary"
      done
      # The same BFS timed by events before each level, as information beside the stamps.
      step bfs-events "${rec[@]}" .gpu/bin/example-bfs --scale 22 --repeats 10 --timing events --out "$work/sized/bfs-events.json"
      grep -E '^(median level|time per level)' "$work/bfs-events.log" | sed "s/^/bfs-events: /" >> "$summary"
      step bfs-host-syncs "${rec[@]}" OUT="$work/sized/syncs" bash scripts/bfs-host-syncs.sh 20 3
      grep -E 'per level' "$work/bfs-host-syncs.log" | sed 's/^/bfs-host-syncs: /' >> "$summary"
      cp "$work/sized/syncs/bfs-host-syncs.json" "$work/sized/" 2>/dev/null
      find "$work/sized/syncs" -type f ! -name '*.csv' ! -name '*.json' ! -name '*.log' -delete 2>/dev/null ;;
    grid-probe)
      step grid-probe bash scripts/probes/run-grid-probe.sh "$work/grid-probe" 64 50
      grep -E '^(accept|n=1000|log-uniform)' "$work/grid-probe/probe.txt" 2>/dev/null | sed 's/^/grid-probe: /' >> "$summary" ;;
    mpi)
      step mpi env OUT="$work" bash scripts/mpi-runs.sh
      sed 's/^/mpi: /' "$work/mpi/summary.txt" >> "$summary" ;;
    *) echo "gpu-verify: unknown phase $ph" | tee -a "$summary"; fail=1 ;;
  esac
done
tar czf "$out/verify.tgz" -C "$(dirname "$work")" verify
echo "gpu-verify: $([ $fail = 0 ] && echo ALL OK || echo SOME FAILED)" | tee -a "$summary"
exit $fail
