#!/usr/bin/env python3
"""Turns a committed gpu-verify run (its summary files, sanitize-summary.txt and soak.log, as
scripts/gpu-verify.sh writes them) into one JSON record with its targets, beside them.

Usage: python3 scripts/verify-summarize.py DIR --commit C --date D --machine M [--note TEXT]
Reads DIR/summary*.txt (one line per step: NAME rc=N Ss DETAIL), DIR/sanitize-summary.txt and
DIR/soak.log where present; writes DIR/verify.json. Targets: no step exits non-zero, no test
fails (libtest's and pytest's closing lines), the soak has no mismatch, every sanitizer run is
clean (or reports its planted fault). A step missing from the run is not a target.
"""
import argparse
import glob
import json
import os
import re

STEP = re.compile(r"^(\S+)\s+rc=(\d+)\s+(\d+)s\s*(.*)$")
LIBTEST = re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
PYTEST = re.compile(r"(?:(\d+) failed, )?(\d+) passed(?:, (\d+) skipped)?")


def steps_of(d):
    steps = []
    for path in sorted(glob.glob(os.path.join(d, "summary*.txt"))):
        with open(path) as f:
            for line in f:
                m = STEP.match(line.rstrip("\n"))
                if m:
                    steps.append(
                        dict(
                            file=os.path.basename(path),
                            name=m.group(1),
                            rc=int(m.group(2)),
                            seconds=int(m.group(3)),
                            detail=m.group(4).strip(),
                        )
                    )
    return steps


def tests_of(steps):
    passed = failed = ignored = 0
    for s in steps:
        for p, f, i in LIBTEST.findall(s["detail"]):
            passed, failed, ignored = passed + int(p), failed + int(f), ignored + int(i)
        if s["name"].startswith("py-tests"):
            m = PYTEST.search(s["detail"])
            if m:
                failed += int(m.group(1) or 0)
                passed += int(m.group(2))
                ignored += int(m.group(3) or 0)
    return passed, failed, ignored


def sanitizer_runs(d):
    path = os.path.join(d, "sanitize-summary.txt")
    if not os.path.exists(path):
        return None
    runs = []
    with open(path) as f:
        for line in f:
            m = re.match(r"^(memcheck|racecheck|synccheck|initcheck) (\S+): ([^,]+),", line)
            if m:
                runs.append(dict(tool=m.group(1), target=m.group(2), verdict=m.group(3)))
    return runs


def soak_mismatches(d):
    path = os.path.join(d, "soak.log")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        m = re.search(r"^mismatches: (\d+)", f.read(), re.M)
    return int(m.group(1)) if m else None


def target(name, measured, limit, why):
    return dict(
        name=name, measured=measured, limit=limit, comparison="<=", holds=measured <= limit,
        why=None if measured <= limit else why,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--note", default=None, help="what became of the misses, in words")
    a = ap.parse_args()
    steps = steps_of(a.dir)
    bad = [s for s in steps if s["rc"] != 0]
    passed, failed, ignored = tests_of(steps)
    targets = [
        target("steps that exited non-zero", len(bad), 0,
               "; ".join(f"{s['name']} rc={s['rc']}" for s in bad)),
        target("tests failed (libtest and pytest closing lines)", failed, 0,
               "see the steps' logs"),
    ]
    san = sanitizer_runs(a.dir)
    if san is not None:
        unclean = [r for r in san if not r["verdict"].startswith("ok")]
        targets.append(target("sanitizer runs not clean", len(unclean), 0,
                              "; ".join(f"{r['tool']} {r['target']}: {r['verdict']}" for r in unclean)))
    soak = soak_mismatches(a.dir)
    if soak is not None:
        targets.append(target("soak mismatches", soak, 0, "see soak.log"))
    record = dict(
        date=a.date, commit=a.commit, machine=a.machine,
        command="scripts/gpu-verify.sh (phases: the steps below)",
        note=a.note,
        tests=dict(passed=passed, failed=failed, ignored_or_skipped=ignored),
        sanitizer_runs=san, steps=steps, targets=targets,
    )
    out = os.path.join(a.dir, "verify.json")
    with open(out, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    for t in targets:
        print(f"{t['name']}: {t['measured']} <= {t['limit']}: {'holds' if t['holds'] else 'MISSES'}")


if __name__ == "__main__":
    main()
