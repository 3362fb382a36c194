"""Check that a devlog rewrite lost no measured figure: every number-with-a-unit of OLD is in one of NEW.

    python scripts/devlog_figures.py OLD.md NEW.md [NEW.md ...]    # e.g. git show main:docs/kernels/mla.md > old.md

A figure is a number followed by a unit (``73.1 us``, ``846.4 us``, ``1,778 MHz``, ``-2.8%``, ``687 TFLOP/s``,
``216 KB``), or a table cell that is a bare number; it counts as kept when the same text appears in any NEW file.
Prints the missing ones with their OLD line numbers; exit status 1 when any is missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

UNITS = r"(?:us|ms|s|%|MHz|GHz|TFLOP/s|GFLOP/s|GFLOP|TB/s|GB/s|KB|MB|GB|KiB|MiB|x|regs|B)"
FIGURE = re.compile(rf"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?\s?{UNITS}(?![\w/])")
CELL = re.compile(r"(?<=\|)\s*([-+]?\d[\d,]*(?:\.\d+)?)\s*(?=\|)")


def figures(text: str) -> dict[str, int]:
    """{figure text (whitespace collapsed): first line number}."""
    out: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        for f in FIGURE.findall(line) + CELL.findall(line):
            out.setdefault(" ".join(f.split()), no)
    return out


def missing(old: str, new: list[str]) -> dict[str, int]:
    """The figures of ``old`` that none of ``new`` contains (``new`` compared with whitespace collapsed)."""
    have = set()
    for t in new:
        have |= set(figures(t))
    return {f: no for f, no in figures(old).items() if f not in have}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit("usage: python scripts/devlog_figures.py OLD.md NEW.md [NEW.md ...]")
    old = Path(argv[0]).read_text(encoding="utf-8")
    gone = missing(old, [Path(p).read_text(encoding="utf-8") for p in argv[1:]])
    for f, no in sorted(gone.items(), key=lambda t: t[1]):
        print(f"{argv[0]}:{no}: {f} is in no new file")
    print(f"{len(figures(old))} figures in {argv[0]}, {len(gone)} missing from the {len(argv) - 1} new files")
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
