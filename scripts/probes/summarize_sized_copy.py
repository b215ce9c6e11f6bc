#!/usr/bin/env python3
"""Writes probe.json (with targets) from the sized_copy_probe outputs run-*.txt in a folder.

Usage: summarize_sized_copy.py FOLDER COMMIT DATE MACHINE
The targets are issue 21's, read on the probe's library-shaped graph (g_set2: the pack in the
graph sets the SWITCH class, two copies per body, kernel-node update per launch) and on the
best graph variant, so the record says whether the graph mechanism itself can meet them.
"""
import glob, json, re, sys

folder, commit, date, machine = sys.argv[1:5]
runs = []
for path in sorted(glob.glob(f"{folder}/run-*.txt")):
    points, host = {}, {}
    for line in open(path):
        m = re.match(r"cap (\d+) n (\d+):(.*)", line)
        if m:
            cells = re.findall(r"(\S+) ([\d.]+)/([\d.]+)", m.group(3))
            points[f"{m.group(1)}/{m.group(2)}"] = {k: {"p50_us": float(a), "p99_us": float(b)} for k, a, b in cells}
        m = re.match(r"cap (\d+) host cost:(.*)", line)
        if m:
            host[m.group(1)] = {k: float(v) for k, v in re.findall(r"host (\S+) ([\d.]+)", m.group(2))}
    runs.append({"file": path.split("/")[-1], "latency": points, "host_cost_p50_us": host})

targets = []
for run in runs:
    small = {k: v for k, v in run["latency"].items() if int(k.split("/")[1]) <= 65536}
    for variant in ("g_set2", "g_1"):
        worst = max(v[variant]["p50_us"] / v["oracle"]["p50_us"] for v in small.values())
        targets.append({
            "name": f"{run['file']}: {variant} p50 / oracle p50, worst n <= 64K",
            "measured": round(worst, 3), "limit": 1.15, "comparison": "<=", "holds": worst <= 1.15,
            "why": "issue 21's first target, read on the bare graph: if the graph alone misses it, the library cannot meet it with this mechanism"})
    big = run["latency"].get("16777216/16777216")
    if big:
        for variant in ("g_set2", "whole", "prefix_host4096"):
            if variant in big:
                bw = big["oracle"]["p50_us"] / big[variant]["p50_us"]
                targets.append({
                    "name": f"{run['file']}: 16M bandwidth, {variant} / oracle",
                    "measured": round(bw, 3), "limit": 0.97, "comparison": ">=", "holds": bw >= 0.97,
                    "why": "issue 21's second target: the copy of a full 16M slot"})
json.dump({"date_utc": date, "commit": commit, "machine": machine,
           "command": "nvcc -O2 -std=c++17 -arch=sm_90 scripts/probes/sized_copy_probe.cu -o /tmp/probe -lcuda && /tmp/probe",
           "runs": runs, "targets": targets}, open(f"{folder}/probe.json", "w"), indent=1)
for t in targets:
    print(f"{t['name']:60s} {t['measured']:7.3f} {t['comparison']} {t['limit']}  {'holds' if t['holds'] else 'MISSES'}")
