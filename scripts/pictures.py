#!/usr/bin/env python3
"""The pictures of committed runs (issue 35, item 3), drawn as SVG from their JSON records.

`python3 scripts/pictures.py` writes every picture under docs/pictures/; `--check` (CI, cargo
xtask ci) draws them in memory and fails when a committed SVG differs, so a picture cannot go
stale against its record or this script. Standard library only, and deterministic: fixed number
formatting, elements in a fixed order, no timestamps.

- docs/pictures/latency.svg: p50 latency against n at capacity 1M, every approach of the
  comparison harness, median of the three runs of the newest committed harness run.
- docs/pictures/comd.svg: CoMD-CUDA's time per step, baseline against the sized_readback port,
  split into the halo exchange (atomHalo + eamHalo) and the rest, per configuration.

- docs/pictures/timeline.svg: the seed's loop in three strategies (naive, sync, the library), one
  row per stream and one for the host thread, from the harness's traced cycles (`seed_trace` of
  compare.json: events on the device, the host's clock on the host). Drawn once a committed
  harness record holds a trace (TIMELINE below); until then --check draws a synthetic trace in
  memory so that the drawing code is exercised."""
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "pictures"
HARNESS = "results/2026-12-04/harness-00112cc"
HARNESS_RUNS = [f"{HARNESS}/run-{i}/compare.json" for i in (1, 2, 3)]
COMD = "results/2026-12-02/comd-8154bc5/comd.json"
# The harness record whose seed_trace the timeline shows (None: no committed run has one yet).
TIMELINE = "results/2026-12-04/harness-82173de/run-1/compare.json"
M = 1 << 20
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


def f(v):
    """A coordinate: one decimal, no negative zero."""
    s = f"{v:.1f}"
    return "0.0" if s == "-0.0" else s


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class Svg:
    """A minimal SVG writer: elements appended in call order, attributes in a fixed order."""

    def __init__(self, width, height):
        self.width, self.height, self.items = width, height, []

    def text(self, x, y, s, size=12, anchor="start", weight="normal", fill="#222", rotate=None,
             style=None):
        extra = f' transform="rotate({rotate} {f(x)} {f(y)})"' if rotate is not None else ""
        extra += f' font-style="{style}"' if style else ""
        self.items.append(f'<text x="{f(x)}" y="{f(y)}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}"{extra}>{esc(s)}</text>')

    def line(self, x1, y1, x2, y2, stroke="#222", width=1.0, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<line x1="{f(x1)}" y1="{f(y1)}" x2="{f(x2)}" y2="{f(y2)}" '
                          f'stroke="{stroke}" stroke-width="{width}"{d}/>')

    def polyline(self, points, stroke, width=1.5, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        pts = " ".join(f"{f(x)},{f(y)}" for x, y in points)
        self.items.append(f'<polyline points="{pts}" fill="none" stroke="{stroke}" '
                          f'stroke-width="{width}" stroke-linejoin="round"{d}/>')

    def rect(self, x, y, w, h, fill, stroke="none", width=1.0):
        self.items.append(f'<rect x="{f(x)}" y="{f(y)}" width="{f(w)}" height="{f(h)}" '
                          f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>')

    def marker(self, kind, x, y, color, r=3.5):
        """A data point: circle, square, triangle, diamond, or none."""
        if kind == "circle":
            self.items.append(f'<circle cx="{f(x)}" cy="{f(y)}" r="{f(r)}" fill="{color}"/>')
        elif kind == "square":
            self.rect(x - r, y - r, 2 * r, 2 * r, color)
        elif kind in ("triangle", "diamond"):
            if kind == "triangle":
                pts = [(x, y - 1.2 * r), (x + 1.1 * r, y + 0.8 * r), (x - 1.1 * r, y + 0.8 * r)]
            else:
                pts = [(x, y - 1.3 * r), (x + 1.1 * r, y), (x, y + 1.3 * r), (x - 1.1 * r, y)]
            pts = " ".join(f"{f(px)},{f(py)}" for px, py in pts)
            self.items.append(f'<polygon points="{pts}" fill="{color}"/>')

    def render(self):
        w, h = self.width, self.height
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
                f'viewBox="0 0 {w} {h}" font-family="{FONT}">')
        back = f'<rect width="{w}" height="{h}" fill="#ffffff"/>'
        return "\n".join([head, back] + self.items + ["</svg>", ""])


class Scale:
    """Data to pixels on one axis, linear or log10."""

    def __init__(self, lo, hi, p0, p1, log=False):
        self.lo, self.hi, self.p0, self.p1, self.log = lo, hi, p0, p1, log

    def __call__(self, v):
        t = (lambda x: math.log10(x)) if self.log else (lambda x: x)
        return self.p0 + (t(v) - t(self.lo)) / (t(self.hi) - t(self.lo)) * (self.p1 - self.p0)


def log_ticks(lo, hi, steps=(1, 2, 5)):
    """Major ticks at steps x 10^k within [lo, hi], minor ticks at every integer x 10^k."""
    major, minor = [], []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in range(1, 10):
            v = m * 10 ** k
            if lo <= v <= hi:
                (major if m in steps else minor).append(v)
    return major, minor


def count_label(n):
    for unit, size in (("M", M), ("K", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def plain(v):
    return f"{v:g}"


def load(path):
    return json.loads((ROOT / path).read_text())


# ---- latency against n -------------------------------------------------------------------

# name, legend text, colour, dash, width, marker; legend order, in three groups.
APPROACHES = [
    ("references", [
        ("oracle", "oracle: n known on the host, one copy of n", "#000000", "7 4", 2.5, "circle"),
        ("bare_sized_graph", "floor: the sized copy's graph alone (bare_sized_graph)", "#444444",
         "12 3 2 3", 2.5, "square"),
        ("oracle_criterion_way", "oracle_criterion_way: the criterion bench's oracle", "#8c564b",
         "7 4", 1.2, "none"),
        ("oracle_after_host_read", "oracle_after_host_read: its destination just read", "#bcbd22",
         "7 4", 1.2, "none"),
        ("producer_only", "producer_only: the producer kernel, no readback", "#9a9a9a", "1 3", 1.5,
         "none"),
    ]),
    ("sized-readback", [
        ("crate_mapped_trailer", "crate_mapped_trailer: mapped, trailer spin (default)",
         "#1f5fbf", None, 2.5, "circle"),
        ("crate_trailer_no_pdl", "crate_trailer_no_pdl: the same, launched without PDL",
         "#17becf", None, 1.3, "triangle"),
        ("crate_trailer_no_trigger", "crate_trailer_no_trigger: producer without PDL trigger",
         "#7fa8e8", None, 1.3, "diamond"),
        ("crate_mapped_event", "crate_mapped_event: mapped slot, event", "#2ca02c", None, 1.5,
         "square"),
        ("crate_staged_sized", "crate_staged_sized: device slot, copy sized on device",
         "#9467bd", None, 1.5, "triangle"),
        ("crate_staged", "crate_staged: device slot, copy of the whole slot", "#c5a3e6", None, 1.5,
         "diamond"),
    ]),
    ("other approaches", [
        ("sync", "sync: copy count, synchronize, copy n", "#ff7f0e", None, 1.8, "square"),
        ("naive", "naive: 2nd copy sized by a stale count (the bug)", "#e377c2", None, 1.3,
         "circle"),
        ("callback_worker", "callback_worker: host function wakes a copying worker", "#d62728",
         None, 1.8, "triangle"),
        ("over_copy", "over_copy: always copy the whole capacity", "#8b4513", None, 1.8, "diamond"),
    ]),
]


def latency_svg():
    runs = [load(p) for p in HARNESS_RUNS]
    for key in ("commit",):
        if len({r[key] for r in runs}) != 1:
            raise SystemExit(f"pictures: the harness runs differ in {key}")
    if len({r["machine"]["gpu"] for r in runs}) != 1:
        raise SystemExit("pictures: the harness runs differ in their GPU")
    rec = runs[0]
    dates = sorted({r["date_utc"][:10] for r in runs})
    ns = sorted(p["n"] for p in rec["sweep"] if p["capacity"] == M)
    names = sorted(rec["sweep"][0]["approaches"])
    listed = sorted(a[0] for _, group in APPROACHES for a in group)
    if listed != names:
        raise SystemExit(f"pictures: approaches in {HARNESS_RUNS[0]} are {names}, the script "
                         f"draws {listed}: give every approach a style in APPROACHES")
    med = {}
    for name in names:
        for n in ns:
            vals = []
            for r in runs:
                (point,) = [p for p in r["sweep"] if p["capacity"] == M and p["n"] == n]
                vals.append(point["approaches"][name]["latency_us"]["p50"])
            med[(name, n)] = statistics.median(vals)

    W, H = 1100, 640
    L, T, PW, PH = 78, 92, 560, 480
    s = Svg(W, H)
    lo = min(med.values()) * 0.85
    hi = max(med.values()) * 1.2
    x = Scale(ns[0], ns[-1], L + 14, L + PW - 14, log=True)
    y = Scale(lo, hi, T + PH, T, log=True)

    s.text(W / 2, 28, f"Readback latency against n at capacity 1M: harness at {rec['commit']}, "
           f"{', '.join(dates)}, {rec['machine']['gpu']}", 17, "middle", "bold")
    s.text(W / 2, 50, f"p50 from the producer's launch to the host holding count and data, f64; "
           f"median of the p50s of 3 runs ({HARNESS}/run-{{1,2,3}}/compare.json)", 12, "middle",
           fill="#444")
    s.text(W / 2, 68, "generated by scripts/pictures.py; log-log", 11, "middle", fill="#777")

    major, minor = log_ticks(lo, hi)
    for v in minor:
        s.line(L, y(v), L + PW, y(v), "#efefef")
    for v in major:
        s.line(L, y(v), L + PW, y(v), "#d4d4d4")
        s.line(L - 5, y(v), L, y(v), "#222")
        s.text(L - 8, y(v) + 4, plain(v), 12, "end")
    for n in ns:
        s.line(x(n), T, x(n), T + PH, "#e4e4e4")
        s.line(x(n), T + PH, x(n), T + PH + 5, "#222")
        s.text(x(n), T + PH + 20, count_label(n), 12, "middle")
    s.line(L, T, L, T + PH, "#222")
    s.line(L, T + PH, L + PW, T + PH, "#222")
    s.text(L + PW / 2, T + PH + 44, "n, rows read back (f64; capacity 1M rows, log scale)", 13,
           "middle")
    s.text(22, T + PH / 2, "p50 latency, µs (log scale)", 13, "middle", rotate=-90)

    # Draw the references last, so the oracle and the floor stay on top.
    order = [a for g in APPROACHES[::-1] for a in g[1][::-1]]
    for name, _, color, dash, width, mk in order:
        pts = [(x(n), y(med[(name, n)])) for n in ns]
        s.polyline(pts, color, width, dash)
        for px, py in pts:
            s.marker(mk, px, py, color)

    lx, ly = L + PW + 30, T + 2
    for group, items in APPROACHES:
        s.text(lx, ly, group, 13, weight="bold")
        ly += 20
        for name, label, color, dash, width, mk in items:
            s.line(lx, ly - 4, lx + 34, ly - 4, color, width, dash)
            s.marker(mk, lx + 17, ly - 4, color)
            s.text(lx + 42, ly, label, 12)
            ly += 19
        ly += 10
    # The lines that overlap: say by how much, so a hidden line is not read as missing.
    close = ["crate_mapped_trailer", "crate_trailer_no_pdl", "crate_trailer_no_trigger", "naive"]
    def spread(points):
        return max(max(med[(a, n)] for a in close) - min(med[(a, n)] for a in close)
                   for n in points)

    s.text(lx, ly, f"{', '.join(close[:2])},", 11, fill="#555")
    s.text(lx, ly + 15, f"{', '.join(close[2:])}: within", 11, fill="#555")
    s.text(lx, ly + 30, f"{spread(ns[:-1]):.1f} µs of each other up to {count_label(ns[-2])}, "
           f"{spread(ns[-1:]):.1f} µs at {count_label(ns[-1])}", 11, fill="#555")
    s.text(lx, ly + 45, "(their lines overlap)", 11, fill="#555")
    return s.render()


# ---- CoMD-CUDA: baseline against the port ------------------------------------------------

COLORS = {"base": ("#5b7fa6", "#b9cde3"), "srb": ("#d9751c", "#f6c89c")}
LABELS = {"base": "baseline", "srb": "sized_readback port"}


def comd_svg():
    rec = load(COMD)
    configs = {(c["variant"], c["size"], c["ranks"], c["mps"]): c for c in rec["configs"]}
    rows = rec["rows"]

    def per_step_ms(c):
        """Median time per step and median halo time per step, ms (None if no run completed)."""
        if not c["completed"]:
            return None
        steps = {round(r * t) for r, t in zip(c["step_rate_per_s"], c["loop_s"])}
        if len(steps) != 1:
            raise SystemExit(f"pictures: {COMD}: runs of one configuration differ in steps")
        (steps,) = steps
        return (1000 / statistics.median(c["step_rate_per_s"]),
                1000 * statistics.median(c["halo_s"]) / steps, steps)

    sizes = sorted({r["size"] for r in rows})
    W, H = 1060, 580
    T, PH = 124, 300
    s = Svg(W, H)
    s.text(W / 2, 28, "CoMD-CUDA's halo exchange, baseline against the sized_readback port: "
           "time per step", 17, "middle", "bold")
    s.text(W / 2, 50, f"{COMD}: library at {rec['commit']}, {rec['date']}, "
           f"{rec['machine'].split(',')[0]}; medians of 3 runs, CoMD's own timers", 12,
           "middle", fill="#444")
    s.text(W / 2, 68, "generated by scripts/pictures.py; dark: the exchange (atomHalo + "
           "eamHalo), light: the rest of the step (loop timer)", 11, "middle", fill="#777")

    left, gap, right = 70, 58, 24
    total_slots = len(rows)
    slot = (W - left - right - gap * (len(sizes) - 1)) / total_slots
    px = left
    dagger = False
    for size in sizes:
        srows = [r for r in rows if r["size"] == size]
        vals = [per_step_ms(configs[(v, r["size"], r["ranks"], r["mps"])]) for r in srows
                for v in ("base", "srb")]
        top = max(v[0] for v in vals if v) * 1.18
        step = [t for t in (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0) if top / t <= 6][0]
        ys = Scale(0, top, T + PH, T)
        pw = slot * len(srows)
        k = 0
        while k * step <= top:
            v = k * step
            s.line(px, ys(v), px + pw, ys(v), "#e2e2e2" if k else "#222")
            s.text(px - 6, ys(v) + 4, f"{v:.2f}" if step < 0.1 else f"{v:.1f}", 11, "end")
            k += 1
        s.line(px, T, px, T + PH, "#222")
        steps = sorted({v[2] for v in vals if v})
        s.text(px + pw / 2, T - 30, f"{size}³ unit cells per rank", 13, "middle", "bold")
        s.text(px + pw / 2, T - 14, f"{4 * size ** 3:,} atoms per rank, "
               f"{', '.join(map(str, steps))} steps", 11, "middle", fill="#555")
        for i, r in enumerate(srows):
            cx = px + slot * (i + 0.5)
            bw = slot * 0.3
            for j, v in enumerate(("base", "srb")):
                got = per_step_ms(configs[(v, r["size"], r["ranks"], r["mps"])])
                bx = cx - bw - 2 + j * (bw + 4)
                if got is None:
                    continue
                step_ms, halo_ms, _ = got
                dark, light = COLORS[v]
                s.rect(bx, ys(step_ms), bw, ys(0) - ys(step_ms), light)
                s.rect(bx, ys(halo_ms), bw, ys(0) - ys(halo_ms), dark)
                s.text(bx + bw / 2, ys(step_ms) - 5, f"{step_ms:.2f}", 10, "middle")
            if r["step_rate_ratio"] is None:
                s.text(cx, T + PH - 60, "did not", 11, "middle", fill="#a00", style="italic")
                s.text(cx, T + PH - 46, "complete", 11, "middle", fill="#a00", style="italic")
                runs = configs[("base", r["size"], r["ranks"], r["mps"])]["runs"]
                s.text(cx, T + PH - 32, f"(0/{runs} runs)", 11, "middle", fill="#a00",
                       style="italic")
            else:
                s.text(cx, T + PH + 48, f"{1 / r['step_rate_ratio']:.2f}x step", 11, "middle",
                       fill="#333")
                s.text(cx, T + PH + 62, f"{r['halo_ratio']:.2f}x halo", 11, "middle", fill="#333")
            mark = "" if r["baseline_correct"] else "†"
            dagger = dagger or bool(mark)
            s.text(cx, T + PH + 16, f"{r['ranks']} rank{'s' if r['ranks'] > 1 else ''}{mark}", 12,
                   "middle")
            s.text(cx, T + PH + 30, "MPS" if r["mps"] else "no MPS", 11, "middle", fill="#555")
        px += pw + gap
    s.text(18, T + PH / 2, "time per step, ms", 13, "middle", rotate=-90)
    s.text(left, T + PH + 84, "Under each pair: port / baseline, time per step and exchange "
           "time (atomHalo + eamHalo).", 11, fill="#333")
    if dagger:
        s.text(left, T + PH + 100, "† the baseline's step-0 potential energy is not the CPU "
               "method's at this size and rank count: timing only.", 11, fill="#333")
    lx, ly = left, H - 22
    for v in ("base", "srb"):
        dark, light = COLORS[v]
        s.rect(lx, ly - 11, 14, 14, dark)
        s.text(lx + 20, ly, f"{LABELS[v]}: exchange", 12)
        s.rect(lx + 230, ly - 11, 14, 14, light)
        s.text(lx + 250, ly, f"{LABELS[v]}: rest of the step", 12)
        lx += 480
    return s.render()


# ---- the seed loop's timeline ------------------------------------------------------------

LANES = ["host", "compute stream 0", "compute stream 1", "copy stream"]
# Span label prefix -> colour, legend text; the host's waits stand out.
KINDS = [
    ("kernel", "#1f5fbf", "kernel (200 µs)"),
    ("readback", "#2ca02c", "readback's device work"),
    ("wait", "#d62728", "host waits"),
    ("copy count, synchronize", "#ff7f0e", "host: copy count, synchronize, copy n"),
    ("copy count, copy n", "#e377c2", "host: two copies (stale count)"),
    ("enqueue", "#17becf", "host: enqueue"),
    ("launch", "#9a9a9a", "host: launch"),
    ("CPU work", "#9467bd", "host: CPU work"),
]
NAMES = {"naive": "naive (the seed's bug)", "sync": "sync (copy count, synchronize, copy n)",
         "crate_mapped_trailer": "sized-readback (mapped slot, trailer)"}


def kind_of(label):
    for prefix, colour, _ in KINDS:
        if label.startswith(prefix):
            return colour
    return "#bbbbbb"


def timeline_svg(record=None):
    rec = record if record is not None else load(TIMELINE)
    traces = rec["seed_trace"]
    end = max(sp["end_us"] for t in traces for sp in t["spans"])
    w, left, right, lane_h, gap = 1000, 150, 20, 16, 46
    h = 60 + len(traces) * (len(LANES) * lane_h + gap) + 60
    s = Svg(w, h)
    s.text(w / 2, 22, f"The seed's loop, traced: 200 µs kernels on two streams, 5 µs of host work "
           f"(commit {rec['commit']})", size=14, anchor="middle", weight="bold")
    x = Scale(0.0, end, left, w - right)
    y = 50
    for t in traces:
        s.text(left, y, f"{NAMES.get(t['approach'], t['approach'])}: {t['correct']} of "
               f"{t['cycles']} readbacks correct", size=12, weight="bold")
        y += 8
        for i, lane in enumerate(LANES):
            ly = y + i * lane_h
            s.text(left - 6, ly + lane_h - 4, lane, size=10, anchor="end")
            s.line(left, ly + lane_h, w - right, ly + lane_h, stroke="#e0e0e0")
            for sp in t["spans"]:
                if sp["lane"] == lane and sp["end_us"] > sp["start_us"]:
                    s.rect(x(sp["start_us"]), ly + 2, max(0.6, x(sp["end_us"]) - x(sp["start_us"])),
                           lane_h - 4, kind_of(sp["label"]))
        y += len(LANES) * lane_h + gap - 8
    for v in range(0, int(end) + 1, 200):
        s.line(x(v), y - gap + 12, x(v), y - gap + 16)
        s.text(x(v), y - gap + 28, f"{v} µs", size=10, anchor="middle")
    lx, ly = left, h - 24
    for _, colour, text in KINDS:
        s.rect(lx, ly - 9, 10, 10, colour)
        s.text(lx + 14, ly, text, size=10)
        lx += 14 + 6.2 * len(text) + 14
        if lx > w - 200:
            lx, ly = left, ly + 14
    return s.render()


def synthetic_trace():
    """A small trace of the harness's shape, to exercise timeline_svg before a record has one."""
    traces = []
    for name, step in (("naive", 205.0), ("sync", 230.0), ("crate_mapped_trailer", 205.0)):
        spans = []
        for k in range(3):
            t = k * step
            spans += [dict(lane=f"compute stream {k % 2}", label=f"kernel {k}", start_us=t, end_us=t + 200),
                      dict(lane="copy stream", label=f"readback {k}", start_us=t + 200, end_us=t + 212),
                      dict(lane="host", label=f"wait {k}", start_us=t + 5, end_us=t + 214)]
        traces.append(dict(approach=name, correct=3, cycles=3, spans=spans))
    return {"commit": "0000000", "seed_trace": traces}


PICTURES = {"latency.svg": latency_svg, "comd.svg": comd_svg}
if TIMELINE is not None:
    PICTURES["timeline.svg"] = timeline_svg


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        raise SystemExit("usage: python3 scripts/pictures.py [--check]")
    stale = []
    for name, draw in PICTURES.items():
        path = OUT / name
        svg = draw()
        if check:
            if not path.exists() or path.read_text() != svg:
                stale.append(str(path.relative_to(ROOT)))
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(svg)
            print(f"wrote {path.relative_to(ROOT)}")
    if check and TIMELINE is None:
        assert "<rect" in timeline_svg(synthetic_trace())
    if stale:
        print("pictures: stale against their records (run python3 scripts/pictures.py): "
              + ", ".join(stale), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
