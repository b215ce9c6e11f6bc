#!/usr/bin/env python3
"""The links of README.md, RELIABILITY.md and the guide (docs/guide/src/*.md) to files of the
repository: each must name a file or folder that exists, so that a claim that cites its run
(results/...) keeps pointing at it when pages move. A link with an anchor into one of those
pages must name one of its headings (GitHub's and mdBook's ids agree for these: lower case,
punctuation dropped, spaces as hyphens).

Usage: python3 scripts/doc-links.py [--self-test] [--check]
  --check      (CI, cargo xtask ci) fail, naming each, on a link that does not resolve
  --self-test  first check the checker on a small tree in a temporary folder
Links to other sites (a scheme such as https:) are not followed. Code blocks are skipped."""
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def pages(root):
    guide = sorted((root / "docs" / "guide" / "src").glob("*.md"))
    return [p for p in [root / "README.md", root / "RELIABILITY.md"] if p.exists()] + guide


def prose(text):
    """The lines outside fenced code blocks, with their numbers."""
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield n, line


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower())
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else f"{s}-{k}")
    return out


CHECKED = [0]


def broken(root):
    """[(page, line, target, why)] for every link of `pages(root)` that does not resolve."""
    out = []
    for page in pages(root):
        for n, line in prose(page.read_text(encoding="utf-8")):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                where = page.relative_to(root)
                CHECKED[0] += 1
                if not dest.exists():
                    out.append((where, n, target, "no such file or folder"))
                elif anchor and dest.suffix == ".md" and dest.is_file() and anchor not in anchors(dest):
                    out.append((where, n, target, f"no heading #{anchor} in {dest.name}"))
    return out


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "results" / "run").mkdir(parents=True)
        (root / "results" / "run" / "a.json").write_text("{}")
        src = root / "docs" / "guide" / "src"
        src.mkdir(parents=True)
        (src / "perf.md").write_text("# Perf\n\n## The `x` table, again\n\n[run](../../../results/run/a.json)\n")
        good = ("[guide](docs/guide/src/perf.md#the-x-table-again) [dir](results/run/) [web](https://x.y/z)\n"
                "```text\n[not a link](nowhere)\n```\n")
        (root / "README.md").write_text(good)
        assert broken(root) == [], broken(root)
        (root / "README.md").write_text(good + "[gone](results/run/b.json) [bad](docs/guide/src/perf.md#nope)\n")
        got = [(str(p), n, t) for p, n, t, _ in broken(root)]
        assert got == [("README.md", 5, "results/run/b.json"), ("README.md", 5, "docs/guide/src/perf.md#nope")], got
    print("doc-links: self-test passed")


def main():
    args = sys.argv[1:]
    if any(a not in ("--check", "--self-test") for a in args):
        sys.exit("usage: python3 scripts/doc-links.py [--self-test] [--check]")
    if "--self-test" in args:
        self_test()
    CHECKED[0] = 0
    bad = broken(ROOT)
    for page, n, target, why in bad:
        print(f"doc-links: {page}:{n}: {target}: {why}", file=sys.stderr)
    if bad:
        sys.exit(f"doc-links: {len(bad)} links do not resolve")
    print(f"doc-links: all {CHECKED[0]} links to the repository of {len(pages(ROOT))} pages resolve")


main()
