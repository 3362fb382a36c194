"""Reading ncu results into :class:`KernelRecord` rows (one per profiled kernel launch).

Two readers with one output:

* :func:`parse_raw_csv`: the text of ``ncu --import X.ncu-rep --csv --page raw --print-units base``:
  a header row, a units row (empty identity columns), then one row per launch.  Lines ncu adds
  around the table (``==PROF==``, ``==WARNING==``) and ``#`` comments are skipped.
* :func:`read_ncu_report`: a ``.ncu-rep`` through the ``ncu_report`` module (PyPI ``ncu-report``
  or ``<ncu>/extras/python``), when importable.

:func:`load_records` picks the CSV when there is one and the report module otherwise.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import shutil
import sys
from pathlib import Path

from ..fsutil import atomic_write_gz_text, read_text_gz
from .metrics import METRICS, parse_number, resolve

__all__ = ["KernelRecord", "parse_raw_csv", "read_ncu_report", "load_records", "NcuParseError"]

_NAME_COLUMNS = ("Kernel Name", "Function Name", "Demangled Name", "Name")


class NcuParseError(ValueError):
    pass


@dataclasses.dataclass
class KernelRecord:
    """One profiled kernel launch: its name, its short-name metrics and where they came from."""

    index: int
    name: str
    metrics: dict[str, float]
    sources: dict[str, str]
    raw: dict[str, tuple[float | None, str]] = dataclasses.field(default_factory=dict, repr=False)
    grid: str = ""
    block: str = ""

    def to_dict(self) -> dict:
        return {"index": self.index, "name": self.name, "grid": self.grid, "block": self.block,
                "metrics": dict(self.metrics), "sources": dict(self.sources)}


def _rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("==", "#"))]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def display_name(text: str) -> str | None:
    """The GPU a raw ncu CSV was captured on (``device__attribute_display_name`` of its first kernel row), or None
    when the capture did not collect it.  The record parser keeps numbers only, so this reads the text."""
    rows = _rows(text)
    if not rows or "device__attribute_display_name" not in rows[0]:
        return None
    i = rows[0].index("device__attribute_display_name")
    return next((r[i].strip() for r in rows[1:] if len(r) > i and r[i].strip()), None)


def parse_raw_csv(text: str) -> list[KernelRecord]:
    """Records from ncu's raw-page CSV (see the module docstring for the layout)."""
    rows = _rows(text)
    if not rows:
        raise NcuParseError("the ncu CSV is empty; export it with `ncu --import X.ncu-rep --csv --page raw`")
    header = rows[0]
    name_col = next((header.index(c) for c in _NAME_COLUMNS if c in header), None)
    if name_col is None:
        raise NcuParseError(f"the ncu CSV has no kernel-name column (looked for {', '.join(_NAME_COLUMNS)}); "
                            f"its first columns are {header[:6]}; export it with `--page raw`")
    # a short row (a truncated export) reads as empty cells, here once for the units row and the kernel rows
    body = [row + [""] * (len(header) - len(row)) for row in rows[1:]]
    units = [""] * len(header)
    if body and not body[0][name_col].strip():
        units, body = body[0], body[1:]
    metric_cols = [i for i, h in enumerate(header) if "__" in h]
    col = {h: i for i, h in enumerate(header)}
    records = []
    for n, row in enumerate(body):
        raw = {header[i]: (parse_number(row[i]), units[i]) for i in metric_cols}
        values, sources = resolve(raw)
        idx = parse_number(row[col["ID"]]) if "ID" in col else None
        records.append(KernelRecord(int(idx) if idx is not None else n, row[name_col].strip(), values, sources, raw,
                                    row[col["Grid Size"]] if "Grid Size" in col else "",
                                    row[col["Block Size"]] if "Block Size" in col else ""))
    return records


def _import_ncu_report():
    try:
        import ncu_report

        return ncu_report
    except ImportError:
        pass
    ncu = shutil.which(os.environ.get("KFORGE_NCU", "ncu"))
    if ncu:
        extras = Path(ncu).resolve().parent / "extras" / "python"
        if extras.is_dir():
            sys.path.append(str(extras))
            try:
                import ncu_report

                return ncu_report
            except ImportError:
                return None
    return None


def read_ncu_report(path: str | Path) -> list[KernelRecord] | None:
    """Records from a ``.ncu-rep`` via ``ncu_report``; None when the module is not importable."""
    mod = _import_ncu_report()
    if mod is None:
        return None
    wanted = {n for d in METRICS.values() for n in d.names()}
    ctx = mod.load_report(str(path))
    records = []
    n = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            raw: dict[str, tuple[float | None, str]] = {}
            for name in wanted:
                m = action.metric_by_name(name)
                if m is None:
                    continue
                try:
                    value = float(m.as_double())
                except Exception:  # noqa: BLE001 - n/a or string metric
                    value = None
                raw[name] = (value, m.unit() or "")
            values, sources = resolve(raw)
            grid = action.metric_by_name("launch__grid_size")
            block = action.metric_by_name("launch__block_size")
            records.append(KernelRecord(n, action.name(), values, sources, raw,
                                        str(grid.value()) if grid is not None else "",
                                        str(block.value()) if block is not None else ""))
            n += 1
    return records


def read_csv_text(path: str | Path) -> str:
    """A raw ncu CSV's text, from ``<name>.csv`` or gzipped ``<name>.csv.gz`` (how reports keep them)."""
    return read_text_gz(path)


def write_csv_gz(path: str | Path, text: str) -> Path:
    """Write a raw ncu CSV gzipped (no timestamp in the header, so the same text gives the same bytes)."""
    return atomic_write_gz_text(path, text)


def load_records(*, csv_path: str | Path | None = None, rep_path: str | Path | None = None) -> list[KernelRecord]:
    """Records from the raw CSV (plain or ``.csv.gz``) when given, else from the ``.ncu-rep`` through ``ncu_report``."""
    if csv_path is not None and Path(csv_path).exists():
        return parse_raw_csv(read_csv_text(csv_path))
    if rep_path is not None:
        got = read_ncu_report(rep_path)
        if got is not None:
            return got
        raise NcuParseError(f"cannot read {rep_path}: no raw CSV beside it and `import ncu_report` failed; "
                            f"pip install ncu-report (the [profile] extra) or export the CSV with ncu")
    raise NcuParseError("load_records needs csv_path or rep_path")
