#!/usr/bin/env python3
"""The tables of README.md and of the guide (docs/guide/src/*.md) that repeat committed
results, made from their JSON records.

Each such table sits between `<!-- table:KIND PATH -->` and `<!-- /table -->` in one of those
pages, PATH (from the repository's root) being the JSON record it comes from.
`python3 scripts/readme-tables.py` rewrites every block from its record; `--check` (CI, cargo
xtask ci) fails when a block differs from what its record gives, so a table cannot drift from
its source. README.md must hold at least one (its headline table).

Kinds: `harness-latency` (the comparison harness's p50 latencies, compare.json), `first-load`
(examples/first_load.rs through scripts/first-load.py, load.json), `mpi-exchange` (the MPI
mini-app's runs, scripts/mpi-summarize.py's JSON), `comd` (CoMD-CUDA's baseline against its port,
scripts/comd-summarize.py's JSON)."""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- table:(\S+) (\S+) -->\n)(.*?)(<!-- /table -->)", re.S)
M = 1 << 20


def fmt(v):
    return f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def harness_latency(rec):
    cols = [("sync", "sync (copy count, synchronize, copy n)"), ("callback_worker", "callback + worker"),
            ("over_copy", "over-copy"), ("oracle", "oracle (n known)"),
            ("oracle_criterion_way", "oracle, criterion's way"), ("crate_mapped_trailer", "**sized-readback**")]
    rows = [(M, 1), (M, 4096), (16 * M, 4096), (M, 65536), (16 * M, 16 * M)]
    points = {(p["capacity"], p["n"]): p["approaches"] for p in rec["sweep"]}
    out = ["| n | " + " | ".join(c[1] for c in cols) + " |", "|---:|" + "---:|" * len(cols)]
    for cap, n in rows:
        a = points[(cap, n)]
        label = {1: "1", 4096: "4096", 65536: "64K", 16 * M: "16M"}[n] + (", capacity 16M" if cap == 16 * M else "")
        cells = [fmt(a[k]["latency_us"]["p50"]) for k, _ in cols]
        cells[-1] = f"**{cells[-1]}**"
        if n == 16 * M:
            bw = rec["bandwidth_at_16m_gbps"]
            cells[-1] += f" ({bw['crate_mapped_trailer'] / bw['oracle']:.2f}x the oracle's bandwidth)"
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def first_load(rec):
    n = rec["runs"]
    out = [f"| image | creating the first readback of a fresh process (image load + slots), p50 (p99 of {n}) "
           "| creating a second one (slots alone), p50 |", "|---|---:|---:|"]
    for mode in ("machine_code", "forced_ptx_jit"):
        m = rec["modes"][mode]
        out.append(f"| {m['image']} | {m['first_readback_us']['p50'] / 1000:.2f} ms ({m['first_readback_us']['p99'] / 1000:.2f}) "
                   f"| {m['second_readback_us']['p50']:.0f} µs |")
    return "\n".join(out) + "\n"


def mpi_exchange(rec):
    """The MPI mini-app's runs (scripts/mpi-summarize.py's record): a ratio is bold where it
    meets the issue's limit (exchange latency <= 0.5x, steps per second >= 1.15x)."""
    out = ["| particles/rank | ranks | MPS | push kernel lib / base | exchange latency lib / base "
           "| beyond the push lib / base | latency ratio | steps/s lib / base | steps/s ratio |",
           "|---:|---|---|---|---|---|---:|---|---:|"]
    for r in rec["runs"]:
        lib, base = r["modes"]["library"], r["modes"]["baseline"]
        p50 = lambda m, k: m[k]["p50"]
        beyond = [p50(m, "exchange_latency_us") - p50(m, "push_kernel_us") for m in (lib, base)]
        lat = p50(lib, "exchange_latency_us") / p50(base, "exchange_latency_us")
        steps = lib["steps_per_s"] / base["steps_per_s"]
        bold = lambda text, ok: f"**{text}**" if ok else text
        n = r["particles_per_rank"]
        out.append(
            f"| {'1M' if n == M else '64K' if n == 65536 else n} | {r['ranks']} | {'yes' if r['mps'] else 'no'} "
            f"| {p50(lib, 'push_kernel_us'):.1f} / {p50(base, 'push_kernel_us'):.1f} "
            f"| {p50(lib, 'exchange_latency_us'):.1f} / {p50(base, 'exchange_latency_us'):.1f} "
            f"| {beyond[0]:.1f} / {beyond[1]:.1f} | {bold(f'{lat:.2f}', lat <= 0.5)} "
            f"| {lib['steps_per_s']:.0f} / {base['steps_per_s']:.0f} | {bold(f'{steps:.2f}', steps >= 1.15)} |")
    return "\n".join(out) + "\n"


def comd(rec):
    """CoMD-CUDA, baseline against the port (scripts/comd-summarize.py's record)."""
    yn = lambda v: "–" if v is None else ("yes" if v else "**no**")
    same = lambda r: "–" if r["energies_equal"] is None else (
        "yes" if r["energies_equal"] else "**no**" if r["baseline_correct"] else "no (the baseline's vary run to run)")
    out = ["| atoms per rank (unit cells) | ranks | MPS | baseline correct (step-0 energy = CPU method's) "
           "| steps/s baseline | steps/s port | step rate port / baseline | halo exchange time port / baseline "
           "| energies port = baseline, every printed step |", "|---:|---:|---|---|---:|---:|---:|---:|---|"]
    for r in rec["rows"]:
        runs = lambda v: f"{r['runs'][v][0]}/{r['runs'][v][1]} runs"
        sps = lambda k, v: f"{r[k]:.0f} ({runs(v)})" if r[k] is not None else f"failed ({runs(v)})"
        ratio = lambda k: f"{r[k]:.3f}" if r[k] is not None else "–"
        out.append(f"| {4 * r['size'] ** 3:,} ({r['size']}^3) | {r['ranks']} | {'yes' if r['mps'] else 'no'} | {yn(r['baseline_correct'])} "
                   f"| {sps('base_steps_per_s', 'base')} | {sps('srb_steps_per_s', 'srb')} "
                   f"| {ratio('step_rate_ratio')} | {ratio('halo_ratio')} | {same(r)} |")
    return "\n".join(out) + "\n"


KINDS = {"harness-latency": harness_latency, "first-load": first_load, "mpi-exchange": mpi_exchange, "comd": comd}


def pages():
    """README.md, then the guide's chapters in name order."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs" / "guide" / "src").glob("*.md"))


def main():
    check = "--check" in sys.argv[1:]
    bad, total = [], 0
    for path in pages():
        name = path.relative_to(ROOT)
        text = path.read_text()
        n = 0

        def render(m):
            nonlocal n
            n += 1
            kind, src = m.group(2), m.group(3)
            want = KINDS[kind](json.loads((ROOT / src).read_text()))
            if m.group(4) != want:
                bad.append(f"{name}: {kind} from {src}")
            return m.group(1) + want + m.group(5)

        new = BLOCK.sub(render, text)
        if n == 0 and name == Path("README.md"):
            sys.exit("readme-tables: README.md has no <!-- table:... --> block")
        if not check and new != text:
            path.write_text(new)
        total += n
    if check:
        if bad:
            sys.exit("readme-tables: tables differ from their records (run python3 scripts/readme-tables.py): " + "; ".join(bad))
        print(f"readme-tables: {total} tables of README.md and the guide match their JSON records")
    else:
        print(f"readme-tables: wrote {total} tables ({len(bad)} changed)")


main()
