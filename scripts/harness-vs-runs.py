#!/usr/bin/env python3
"""Whether one harness run's ratios are within the run-to-run noise of earlier runs: for each
named target, the earlier runs' range [min, max] widened by its own width on each side.
Usage: python3 scripts/harness-vs-runs.py NEW.json OLD.json... --out OUT.json [--name PREFIX]..."""
import argparse, json

ap = argparse.ArgumentParser()
ap.add_argument("new")
ap.add_argument("old", nargs="+")
ap.add_argument("--out", required=True)
ap.add_argument("--name", action="append", default=["n 1..4096, cap 1M: crate p50", "n 16M:"],
                help="target-name prefixes to compare")
a = ap.parse_args()
load = lambda f: json.load(open(f))
new = load(a.new)
olds = [load(f) for f in a.old]
measured = lambda d: {t["name"]: t["measured"] for t in d["targets"]}
now = measured(new)
targets = []
for name, value in now.items():
    if not any(name.startswith(p) for p in a.name):
        continue
    before = [measured(d)[name] for d in olds]
    lo, hi = min(before), max(before)
    w = hi - lo
    holds = lo - w <= value <= hi + w
    targets.append({"name": f"{name}: within the noise of the earlier runs", "measured": round(value, 4),
                    "limit": [round(lo - w, 4), round(hi + w, 4)], "comparison": "within", "holds": holds,
                    "why": f"earlier runs {', '.join(f'{b:.4f}' for b in before)} (commits "
                           f"{', '.join(sorted({d['commit'] for d in olds}))}): range widened by its width on each side"})
record = {"what": "one harness run against earlier ones", "date_utc": new["date_utc"], "commit": new["commit"],
          "machine": new["machine"], "new_run": a.new, "earlier_runs": a.old, "targets": targets}
json.dump(record, open(a.out, "w"), indent=2)
for t in targets:
    print(f"{t['name']}: {t['measured']} in {t['limit']}: {'holds' if t['holds'] else 'MISSES'}")
