#!/usr/bin/env python3
"""Whether three new harness runs keep every ratio inside the range of three earlier ones (issue
32's "no behaviour change"): for each target of the runs, the old three values, the new three,
how many new ones lie inside the old [min, max] and inside that range widened by its own width
on each side (scripts/harness-vs-runs.py's noise band).

Usage: python3 scripts/harness-range.py OLD_DIR NEW_DIR --out OUT.json --date D --machine M
OLD_DIR and NEW_DIR hold run-1/, run-2/, run-3/ with compare.json each."""
import argparse
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("old")
ap.add_argument("new")
ap.add_argument("--out", required=True)
ap.add_argument("--date", required=True)
ap.add_argument("--machine", required=True)
a = ap.parse_args()


def runs(d):
    out = []
    for i in (1, 2, 3):
        with open(os.path.join(d, f"run-{i}", "compare.json")) as f:
            out.append(json.load(f))
    return out


old, new = runs(a.old), runs(a.new)
commit_of = lambda rs: rs[0]["commit"]
values = lambda rs, name: [next(t["measured"] for t in r["targets"] if t["name"] == name) for r in rs]
names = [t["name"] for t in new[0]["targets"] if all(any(u["name"] == t["name"] for u in r["targets"]) for r in old)]
rows, outside = [], []
for name in names:
    o, n = values(old, name), values(new, name)
    lo, hi = min(o), max(o)
    w = hi - lo
    inside = sum(lo <= v <= hi for v in n)
    widened = sum(lo - w <= v <= hi + w for v in n)
    rows.append({"name": name, f"old_{commit_of(old)}": o, f"new_{commit_of(new)}": n, "old_range": [lo, hi],
                 "new_inside_old_range": inside, "new_inside_widened_range": widened,
                 "median_old": sorted(o)[1], "median_new": sorted(n)[1]})
    if widened < 3:
        outside.append(f"{name}: old {lo:.4g}..{hi:.4g}, new {min(n):.4g}..{max(n):.4g}")
all_in = sum(r["new_inside_old_range"] == 3 for r in rows)
all_widened = sum(r["new_inside_widened_range"] == 3 for r in rows)
record = {
    "date": a.date,
    "commit": commit_of(new),
    "machine": a.machine,
    "command": f"python3 scripts/harness-range.py {a.old} {a.new} --out {a.out}",
    "note": "issue 32 asks that the harness's ratios stay inside the range of the last three committed runs "
            f"of 102cf48's code (harness-{commit_of(old)}). Each row: one target of the runs, its old three "
            "values and its new three.",
    "rows": rows,
    "targets": [
        {"name": "harness targets whose three new values all lie inside the old three runs' [min, max]",
         "measured": all_in, "limit": len(rows), "comparison": ">=", "holds": all_in == len(rows),
         "why": None if all_in == len(rows) else
         f"{len(rows) - all_in} targets have a new value outside the old range; the widened band is the next row"},
        {"name": "harness targets whose three new values all lie inside the old range widened by its width on "
                 "each side (scripts/harness-vs-runs.py's noise band)",
         "measured": all_widened, "limit": len(rows), "comparison": ">=", "holds": all_widened == len(rows),
         "why": None if not outside else "outside in at least one run: " + "; ".join(outside)},
    ],
}
with open(a.out, "w") as f:
    json.dump(record, f, indent=1)
    f.write("\n")
for t in record["targets"]:
    print(f"{t['name']}: {t['measured']} of {t['limit']} ({'holds' if t['holds'] else 'MISSES'})")
for o in outside:
    print("  outside:", o)
