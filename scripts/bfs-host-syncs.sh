#!/usr/bin/env bash
# bfs-host-syncs.sh: counts the host's synchronizing driver calls in the BFS's level loop, per
# way, from an nsys trace of the CUDA API (issue 36: no host synchronization per level).
#
# On the GPU host, from the project root, after cargo xtask stage:
#   OUT=dir bash scripts/bfs-host-syncs.sh [SCALE] [REPEATS]
# Runs .gpu/bin/example-bfs --only WAY under `nsys profile -t cuda` for over, sync, sized and
# sized-graph, and counts the calls that block the host on the device (stream, event and
# context synchronize, synchronous copies, and the queries a polling wait would make). Every
# run makes the same few outside its level loop (setup, reset, the end, the check's copy); the
# over-launch makes none inside it (launches only), so a way's count less over's, over
# (runs x levels), is its synchronizations per level. The sync way is the control: one per
# level (its copy's synchronize).
# Writes $OUT/bfs-host-syncs.json (a record with targets) and each trace's table.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-/tmp/srb-bfs-syncs}"
scale="${1:-20}"
repeats="${2:-3}"
mkdir -p "$out"
nsys="$(command -v nsys || find /usr/local /opt /usr/lib /usr/bin -name nsys -type f -perm -u+x 2>/dev/null | sort | tail -n 1)"
[ -x "$nsys" ] || { echo "bfs-host-syncs: nsys not found" >&2; exit 2; }
for way in over sync sized sized-graph; do
  "$nsys" profile -t cuda -o "$out/bfs-$way" -f true \
    .gpu/bin/example-bfs --scale "$scale" --repeats "$repeats" --only "$way" \
    > "$out/bfs-$way.log" 2>&1 || { echo "bfs-host-syncs: $way failed" >&2; cat "$out/bfs-$way.log"; exit 1; }
  "$nsys" stats --force-export=true -r cuda_api_sum -f csv -o "$out/bfs-$way" "$out/bfs-$way.nsys-rep" \
    > "$out/bfs-$way-stats.log" 2>&1
  csv="$(ls "$out"/bfs-"$way"*cuda_api_sum*.csv 2>/dev/null | head -n 1)"
  [ -n "$csv" ] && mv "$csv" "$out/bfs-$way-api.csv"
  echo "bfs-host-syncs: $way: $(wc -l < "$out/bfs-$way-api.csv" 2>/dev/null) lines of API summary"
  head -n 3 "$out/bfs-$way-api.csv" 2>/dev/null; tail -n 3 "$out/bfs-$way-stats.log"
  rm -f "$out/bfs-$way.sqlite" "$out/bfs-$way.nsys-rep"
done
python3 - "$out" "$scale" "$repeats" <<'EOF'
import csv, json, os, re, subprocess, sys
out, scale, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Calls that make the host wait for the device, or that a polling wait would make.
blocking = re.compile(r"^cu(StreamSynchronize|EventSynchronize|CtxSynchronize|MemcpyDtoH|MemcpyHtoD|Memcpy(_v2)?$|StreamQuery|EventQuery)")
def counts(way):
    calls = {}
    with open(f"{out}/bfs-{way}-api.csv") as f:
        rows = list(csv.reader(f))
    # The header is the row naming the columns; the calls column is named "Num Calls" (or so).
    head = next(i for i, r in enumerate(rows) if "Name" in r and any("Calls" in c for c in r))
    name_col = rows[head].index("Name")
    calls_col = next(i for i, c in enumerate(rows[head]) if "Calls" in c)
    for r in rows[head + 1:]:
        if len(r) <= max(name_col, calls_col):
            continue
        name = r[name_col]
        if blocking.match(name):
            calls[name] = calls.get(name, 0) + int(r[calls_col].replace(",", ""))
    if not rows[head + 1:]:
        raise SystemExit(f"{way}: an empty API summary")
    return calls
log = open(f"{out}/bfs-sync.log").read()
levels = int(re.search(r"(\d+) levels", log).group(1))
runs = repeats + 2
ways = {w: counts(w) for w in ["over", "sync", "sized", "sized-graph"]}
total = {w: sum(c.values()) for w, c in ways.items()}
per_level = {w: (total[w] - total["over"]) / (runs * levels) for w in ways}
for w in ways:
    print(f"{w:12} blocking calls {total[w]:5} {ways[w]}  per level {per_level[w]:.3f}")
def target(w, limit):
    return {"name": f"host synchronizing calls per BFS level, {w} (nsys cuda_api_sum)",
            "measured": per_level[w], "limit": limit, "comparison": "<=",
            "holds": per_level[w] <= limit, "why": None}
record = {
    "date": os.environ.get("SRB_DATE", ""), "commit": os.environ.get("SRB_COMMIT", "unknown"),
    "machine": os.environ.get("SRB_MACHINE", ""),
    "command": f"scripts/bfs-host-syncs.sh {scale} {repeats}",
    "note": f"example-bfs --scale {scale} --repeats {repeats} --only WAY under nsys profile -t cuda; {runs} BFS runs of {levels} levels per way; blocking calls counted: stream/event/context synchronize, synchronous copies, stream and event queries; per level: the way's count less the over-launch's (which launches only, in its loop), over runs x levels.",
    "calls": ways, "levels": levels, "runs": runs,
    "targets": [target("sized", 0.0), target("sized-graph", 0.0),
                {"name": "host synchronizing calls per BFS level, sync (the control: the method sees its one per level)",
                 "measured": per_level["sync"], "limit": 1.0, "comparison": ">=",
                 "holds": per_level["sync"] >= 1.0, "why": None}],
}
json.dump(record, open(f"{out}/bfs-host-syncs.json", "w"), indent=1)
sys.exit(0 if all(t["holds"] for t in record["targets"]) else 1)
EOF
