#!/usr/bin/env bash
# bfs-host-syncs.sh: counts the host's synchronizing driver calls in the BFS's level loop, per
# way (issue 36: no host synchronization per level).
#
# On the GPU host, from the project root, after cargo xtask stage:
#   OUT=dir bash scripts/bfs-host-syncs.sh [SCALE] [REPEATS]
# Runs .gpu/bin/example-bfs --only WAY for over, over-graph, sync, sized, sized-graph, sized-grid
# and sized-grid-graph with scripts/sync_count_inject.c injected into the driver
# (CUDA_INJECTION64_PATH; CUPTI's
# driver-API callbacks), which counts the calls that block the host on the device (stream,
# event and context synchronize, synchronous copies, implicitly synchronizing allocations, the
# queries a polling wait would make, copies to the host and host callbacks). Every run makes
# the same few outside its level loop (setup, reset, the end, the check's copy); the
# over-launch makes none inside it (launches only), so for each call a way's count must equal
# the over-launch's done the same way (over for the stream ways, over-graph for the graph ways,
# whose graph is destroyed once, after the last run): the sum over the calls of the
# differences' magnitudes, over (runs x levels), is the way's host involvement per level (a
# call made less often cannot hide one made more). The sync way is the control: its copy and
# its synchronize, two per level. nsys cannot serve
# here: the GPU host's nsys writes a .qdstrm it cannot import.
# The injection library: $SRB_CUPTI_DIR/libsynccount.so (with libcupti.so.* beside it) if
# set, else built here with gcc against the toolkit's CUPTI (scripts/cupti-inject.sh).
# Writes $OUT/bfs-host-syncs.json (a record with targets) and each way's counts.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/srb-bfs-syncs}"
scale="${1:-20}"
repeats="${2:-3}"
mkdir -p "$out"
. scripts/cupti-inject.sh
cupti_inject_lib scripts/sync_count_inject.c libsynccount.so "$out" || exit 2
lib="$CUPTI_LIB"; libdir="$CUPTI_LIBDIR"
echo "bfs-host-syncs: injecting $lib (CUPTI from $libdir)"
for way in over over-graph sync sized sized-graph sized-grid sized-grid-graph; do
  CUDA_INJECTION64_PATH="$lib" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    SRB_SYNC_COUNT_OUT="$out/bfs-$way-calls.json" \
    .gpu/bin/example-bfs --scale "$scale" --repeats "$repeats" --only "$way" > "$out/bfs-$way.log" 2>&1 \
    || { echo "bfs-host-syncs: $way failed" >&2; tail -n 5 "$out/bfs-$way.log"; exit 1; }
  echo "bfs-host-syncs: $way: $(cat "$out/bfs-$way-calls.json" 2>/dev/null)"
done
python3 - "$out" "$scale" "$repeats" <<'EOF'
import json, os, re, sys
out, scale, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def counts(way):
    rec = json.load(open(f"{out}/bfs-{way}-calls.json"))
    if rec["driver_calls"] == 0:
        raise SystemExit(f"{way}: the injection saw no driver call")
    return {k: v for k, v in rec["blocking"].items() if v}
log = open(f"{out}/bfs-sync.log").read()
levels = int(re.search(r"(\d+) levels", log).group(1))
runs = repeats + 2
ways = {w: counts(w) for w in ["over", "over-graph", "sync", "sized", "sized-graph", "sized-grid", "sized-grid-graph"]}
# A graph way against the over-launch recorded the same way: both capture one graph, launch it
# per run and destroy it once (the destroy waits for its stream: one call per process, outside
# the level loop).
base = {w: "over-graph" if w.endswith("graph") else "over" for w in ways}
total = {w: sum(c.values()) for w, c in ways.items()}
names = sorted(set().union(*ways.values()))
per_level = {
    w: sum(abs(ways[w].get(k, 0) - ways[base[w]].get(k, 0)) for k in names) / (runs * levels)
    for w in ways
}
for w in ways:
    print(f"{w:12} blocking calls {total[w]:5} {ways[w]}  per level {per_level[w]:.3f}")
def target(w, limit):
    return {"name": f"host synchronizing calls per BFS level, {w} (CUPTI driver-API count)",
            "measured": per_level[w], "limit": limit, "comparison": "<=",
            "holds": per_level[w] <= limit, "why": None}
record = {
    "date": os.environ.get("SRB_DATE", ""), "commit": os.environ.get("SRB_COMMIT", "unknown"),
    "machine": os.environ.get("SRB_MACHINE", ""),
    "command": f"scripts/bfs-host-syncs.sh {scale} {repeats}",
    "note": f"example-bfs --scale {scale} --repeats {repeats} --only WAY with scripts/sync_count_inject.c in the driver (CUDA_INJECTION64_PATH, CUPTI driver-API callbacks); {runs} BFS runs of {levels} levels per way; calls counted: stream/event/context synchronize, synchronous copies, implicitly synchronizing allocations, stream and event queries, copies to the host, host callbacks; per level: for each call the magnitude of the way's count less the over-launch's recorded the same way (over for the stream ways, over-graph for the graph ways; each launches only, in its loop), summed, over runs x levels. A host spinning on mapped memory makes no driver call; the sized ways' loops call no wait.",
    "calls": ways, "levels": levels, "runs": runs,
    "targets": [target("sized", 0.0), target("sized-graph", 0.0),
                target("sized-grid", 0.0), target("sized-grid-graph", 0.0),
                {"name": "host synchronizing calls per BFS level, sync (the control: the method sees its copy and synchronize per level)",
                 "measured": per_level["sync"], "limit": 1.0, "comparison": ">=",
                 "holds": per_level["sync"] >= 1.0, "why": None}],
}
json.dump(record, open(f"{out}/bfs-host-syncs.json", "w"), indent=1)
sys.exit(0 if all(t["holds"] for t in record["targets"]) else 1)
EOF
