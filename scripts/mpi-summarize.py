#!/usr/bin/env python3
"""Gathers the MPI mini-app's runs (scripts/mpi-runs.sh writes one JSON per run into DIR/mpi/)
into one committed record with its targets, and a Markdown table.

Usage: python3 scripts/mpi-summarize.py DIR --commit C --date D --machine M --out results/mpi/NAME
Writes NAME.json and NAME.md. Targets (issue: buckets and MPI particle exchange), per run:
exchange latency p50 (push kernel's launch to every send posted, slowest rank per step)
library / baseline <= 0.5, and steps per second library / baseline >= 1.15.
"""
import argparse
import glob
import json
import os
import re


def load(d):
    runs = []
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        m = re.match(r"(mps|nomps)(-64k)?-np(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            r = json.load(f)
        r["mps"] = m.group(1) == "mps"
        r["small"] = m.group(2) is not None
        r["label"] = os.path.basename(path)[:-5]
        runs.append(r)
    runs.sort(key=lambda r: (r["small"], not r["mps"], r["ranks"]))
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    runs = load(a.dir)
    if not runs:
        raise SystemExit(f"mpi-summarize: no run records in {a.dir}")
    targets, informational, rows = [], [], []
    for r in runs:
        lib, base = r["modes"]["library"], r["modes"]["baseline"]
        where = (f"{r['ranks']} rank(s) on one GPU, {'MPS' if r['mps'] else 'no MPS (time-sliced contexts)'}, "
                 f"{r['particles_per_rank']} particles/rank, {r['leave_fraction']:.2f} leaving")
        lat = lib["exchange_latency_us"]["p50"] / base["exchange_latency_us"]["p50"]
        sps = lib["steps_per_s"] / base["steps_per_s"]
        # The exchange beyond the push kernel (the same kernel work in both modes): what the
        # readback itself changes.
        beyond_lib = lib["exchange_latency_us"]["p50"] - lib["push_kernel_us"]["p50"]
        beyond_base = base["exchange_latency_us"]["p50"] - base["push_kernel_us"]["p50"]
        why_lat = (f"the latency counts the push kernel, {lib['push_kernel_us']['p50']:.0f} µs (library) and "
                   f"{base['push_kernel_us']['p50']:.0f} µs (baseline) p50 here; beyond it the library's exchange "
                   f"takes {beyond_lib:.0f} µs against the baseline's {beyond_base:.0f} µs")
        for name, measured, limit, cmp, why in (
            (f"exchange latency p50, library / baseline, {where}", lat, 0.5, "<=", why_lat),
            (f"steps per second, library / baseline, {where}", sps, 1.15, ">=",
             f"a step also holds the push kernel ({lib['push_kernel_us']['p50']:.0f} µs), the MPI exchange and the "
             f"upload of arrivals, the same in both modes; the library saves {beyond_base - beyond_lib:.0f} µs of "
             f"a {base['step_us']['p50']:.0f} µs baseline step"),
        ):
            holds = measured <= limit if cmp == "<=" else measured >= limit
            t = {"name": name, "measured": round(measured, 4), "limit": limit, "comparison": cmp,
                 "holds": holds, "why": None if holds else why}
            # The issue's targets are set for 1M particles per rank, 1% leaving, under MPS; the
            # other runs are reported beside them.
            issue_config = r["mps"] and not r["small"]
            (targets if issue_config else informational).append(t)
        verified = min(lib["verified_steps"], base["verified_steps"]) == lib["steps"] == base["steps"] \
            and r["failed_steps"] == 0
        rows.append((r, lib, base, lat, sps, verified, beyond_lib, beyond_base))
    record = {
        "date": a.date, "commit": a.commit, "machine": a.machine,
        "command": "bash scripts/mpi-runs.sh (mpirun --allow-run-as-root --oversubscribe -np N mpi_exchange "
                   "--particles P --leave F --steps S --json ...)",
        "runs": [r for r, *_ in rows], "targets": targets, "informational": informational,
    }
    with open(a.out + ".json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    r0 = runs[0]
    lines = [
        f"MPI particle exchange, {a.machine}, commit {a.commit}, {a.date}: {r0['particles_per_rank']} particles per rank, "
        f"{r0['leave_fraction']:.3f} leaving per step, {r0['steps']} timed steps per mode (after {r0['warmup']} warm-up), "
        "every step verified. Latency: push kernel's launch to every MPI_Isend posted, slowest rank, µs.",
        "",
        "| particles/rank | ranks | MPS | push kernel p50 lib / base | library exchange p50 / p99 | baseline exchange p50 / p99 | "
        "beyond the push lib / base | latency ratio | library steps/s | baseline steps/s | steps/s ratio | verified steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, lib, base, lat, sps, ok, bl, bb in rows:
        lines.append(
            f"| {r['particles_per_rank']} | {r['ranks']} ({r['decomposition']}) | {'yes' if r['mps'] else 'no'} | "
            f"{lib['push_kernel_us']['p50']:.1f} / {base['push_kernel_us']['p50']:.1f} | "
            f"{lib['exchange_latency_us']['p50']:.1f} / {lib['exchange_latency_us']['p99']:.1f} | "
            f"{base['exchange_latency_us']['p50']:.1f} / {base['exchange_latency_us']['p99']:.1f} | {bl:.1f} / {bb:.1f} | {lat:.2f} | "
            f"{lib['steps_per_s']:.0f} | {base['steps_per_s']:.0f} | {sps:.2f} | "
            f"{'all ' + str(lib['steps'] + base['steps']) if ok else 'NO'} |")
    fmt = lambda t: f"- {t['name']}: {t['measured']:.3f} {t['comparison']} {t['limit']}: {'holds' if t['holds'] else 'MISSES'}"
    lines += ["", "Targets (1M particles per rank, 1% leaving, MPS):"] + [fmt(t) for t in targets]
    lines += ["", "The same ratios for the other runs (informational):"] + [fmt(t) for t in informational]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
