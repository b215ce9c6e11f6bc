"""The run as a Markdown table."""

from .summary import size_name


def render(out, order):
    m = out["machine"]
    lines = [
        f"# sized_readback in PyTorch: {out['date']}, {m['gpu']} (sm_{m['compute_capability'].replace('.', '')}), driver {m['cuda_driver_api']}, torch {m['torch']}, commit {out['commit']}",
        "",
        f"p50 µs (p99) from the producer's launch to the host holding count and data, f64, capacity {size_name(out['settings']['capacity'])}; every cycle checked.",
        "",
        "| n | " + " | ".join(order) + " |",
        "|---:|" + "---:|" * len(order),
    ]
    for p in out["sweep"]:
        cells = []
        for a in order:
            r = p["approaches"][a]
            if r["error"] or not r["latency_us"]["samples"]:
                cells.append("n/a" if r["error"] else "")
                continue
            s = r["latency_us"]
            bad = "" if r["correct"] == r["checked"] else f" ({r['checked'] - r['correct']} wrong)"
            cell = f"{s['p50']:.1f} ({s['p99']:.1f}){bad}"
            cells.append(f"**{cell}**" if a == "sized_readback" else cell)
        lines.append(f"| {size_name(p['n'])} | " + " | ".join(cells) + " |")
    if out.get("binding"):
        b = out["binding"]["p50_us"]
        lines += ["", "Binding, host µs p50 on an idle stream: " + ", ".join(f"{k} {v:.2f}" for k, v in b.items())]
    lines += ["", "Seed loop (cycles per second):", "", "| approach | kernel µs | CPU µs | cycles/s | correct |", "|---|---:|---:|---:|---:|"]
    for r in out["seed_loop"]:
        lines.append(f"| {r['approach']} | {r['kernel_us']:g} | {r['cpu_us']:g} | {r['cycles_per_s']:.0f} | {r['correct']}/{r['cycles']} |")
    if out.get("torch_compile"):
        for mode, r in out["torch_compile"].items():
            lines.append(f"\ntorch.compile {mode}: " + ", ".join(f"{k}={v}" for k, v in r.items()))
    lines += ["", "| target | measured | limit | holds |", "|---|---:|---:|---|"]
    for t in out["targets"]:
        lines.append(f"| {t['name']} | {t['measured']:.3f} | {t['comparison']} {t['limit']} | {'yes' if t['holds'] else 'NO'} |")
    for t in out["targets"]:
        if not t["holds"]:
            lines.append(f"\n- missed by {t['miss_by'] * 100:.1f}%: {t['name']}: {t['why']}")
    return "\n".join(lines) + "\n"
