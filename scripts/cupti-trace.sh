#!/usr/bin/env bash
# cupti-trace.sh: a kernel and copy timeline of one command on the GPU host, where nsys records
# a trace it cannot import. Injects scripts/cupti_trace_inject.c (CUPTI's activity API) into
# the command's CUDA driver and summarizes what ran: per kernel and per copy kind, the count,
# the p50 and total GPU time, and for copies and memsets the bytes and GB/s.
#
# On the GPU host, from the project root:
#   OUT=dir bash scripts/cupti-trace.sh COMMAND [ARG...]
# e.g. OUT=/tmp/t bash scripts/cupti-trace.sh python3 python/bench/bench.py --quick
# Writes $OUT/trace.csv (one line per kernel, copy and memset; see the .c file) and
# $OUT/trace-summary.txt. The library: $SRB_CUPTI_DIR/libcuptitrace.so if set (with
# libcupti.so.* beside it), else built here (scripts/cupti-inject.sh).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-/tmp/srb-trace}"
mkdir -p "$out"
[ $# -gt 0 ] || { echo "usage: OUT=dir bash scripts/cupti-trace.sh COMMAND [ARG...]" >&2; exit 2; }
. "$here/scripts/cupti-inject.sh"
cupti_inject_lib "$here/scripts/cupti_trace_inject.c" libcuptitrace.so "$out" || exit 2
CUDA_INJECTION64_PATH="$CUPTI_LIB" LD_LIBRARY_PATH="$CUPTI_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  SRB_TRACE_OUT="$out/trace.csv" "$@"
rc=$?
python3 - "$out/trace.csv" > "$out/trace-summary.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    d = int(r["end_ns"]) - int(r["start_ns"])
    g = groups.setdefault((r["kind"], r["name"], r["grid"], r["block"]), [])
    g.append((d, int(r["bytes"] or 0)))
print(f"{len(rows)} records")
print(f"{'kind':7} {'count':>7} {'p50 us':>9} {'total ms':>9} {'GB/s p50':>9}  name [grid block]")
for (kind, name, grid, block), v in sorted(groups.items(), key=lambda kv: -sum(d for d, _ in kv[1])):
    ds = [d for d, _ in v]
    rates = [b / d for d, b in v if d > 0 and b > 0]
    rate = f"{statistics.median(rates):9.2f}" if rates else f"{'':9}"
    shape = f" [{grid} {block}]" if grid else ""
    print(f"{kind:7} {len(v):7} {statistics.median(ds) / 1e3:9.2f} {sum(ds) / 1e6:9.3f} {rate}  {name[:80]}{shape}")
PY
cat "$out/trace-summary.txt"
exit "$rc"
