"""The end of a run: a table of every version (DSL, each trial's time and % of floor, kept or discarded,
why) and a PNG of the trajectory.  matplotlib is optional: without it the plot is skipped with a
note (``pip install matplotlib``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from .state import RunState

__all__ = ["summary_rows", "default_trials", "render_table", "render_walls", "plot_trajectory", "write_summary"]

#: the columns of a table with no measured row when the run's kernel spec cannot be read (MLA's default trials)
_FALLBACK_TRIALS = ("decode", "spec")


def summary_rows(state: RunState) -> list[dict[str, Any]]:
    """The start version, then every evaluated version in order (from the EVALUATE steps' outputs)."""
    rows: list[dict[str, Any]] = []
    start = state.steps.get("1:ANALYZE")
    if start is not None and start.outputs.get("start"):
        s = start.outputs["start"]
        r0: dict[str, Any] = {"version": s["version"], "dsl": start.outputs.get("current_language", ""),
                              "kept": None, "why": "starting point"}
        for t, r in s.get("rows", {}).items():
            r0[f"{t}_us"], r0[f"{t}_pct_floor"] = r.get("median_us"), r.get("pct_floor")
        rows.append(r0)
    evals = sorted((k for k, r in state.steps.items() if k.endswith(":EVALUATE") and r.status == "done"
                    and "history" in r.outputs), key=lambda k: int(k.split(":")[0]))  # skipped ones have none
    if evals:
        rows += state.steps[evals[-1]].outputs.get("history", [])
        # a run that began without saved results: take the start version's figures from the
        # first VERIFY, which measured it beside its child in the same session
        if rows and rows[0].get("kept") is None:
            first = state.steps[evals[0]].outputs.get("decision", {}).get("per_trial", {})
            for t, r in first.items():
                if rows[0].get(f"{t}_us") is None and r.get("parent_us") is not None:
                    rows[0][f"{t}_us"] = r["parent_us"]
    return rows


def _f(x: Any, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(float(x))


def trials_of(rows: list[dict[str, Any]], fallback: Sequence[str] = _FALLBACK_TRIALS) -> list[str]:
    """The trials the rows carry (``<trial>_us`` keys), in order of first appearance: the kernel's own (MLA's
    decode and spec, rmsnorm_fp8's prefill and decode...); ``fallback`` (the kernel's default trials, see
    :func:`default_trials`) when no row has any."""
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k.endswith("_us") and not k.endswith("_pct_floor"):
                seen.setdefault(k[: -len("_us")], None)
    return list(seen) or list(fallback)


def default_trials(state: RunState) -> tuple[str, ...]:
    """The run's kernel's default trials (its spec's ``default_trials``): the columns of a table with no measured
    row.  MLA's decode and spec when the spec cannot be read (the summary must still be written)."""
    try:
        from ..registry import load_kernel

        root = Path(state.options.get("root") or ".")
        return tuple(load_kernel(state.kernel, root / str(state.options.get("kernels_dir") or "kernels"))
                     .spec.default_trials)
    except Exception:  # noqa: BLE001 - a summary of a crashed run must not crash too
        return _FALLBACK_TRIALS


def render_table(rows: list[dict[str, Any]], fallback: Sequence[str] = _FALLBACK_TRIALS) -> str:
    trials = trials_of(rows, fallback)
    head = ("| Version | DSL | " + " | ".join(f"{t} us" for t in trials) + " | "
            + " | ".join(f"{t} % floor" for t in trials) + " | Kept | Why |")
    out = [head, "|" + "---|" * (4 + 2 * len(trials))]
    for r in rows:
        kept = "start" if r.get("kept") is None else ("kept" if r["kept"] else "discarded")
        cells = [_f(r.get(f"{t}_us")) for t in trials] + [_f(r.get(f"{t}_pct_floor")) for t in trials]
        out.append(f"| {r['version']} | {r.get('dsl', '')} | " + " | ".join(cells) +
                   f" | {kept} | {str(r.get('why', '')).replace('|', '/')} |")
    return "\n".join(out) + "\n"


def plot_trajectory(rows: list[dict[str, Any]], path: Path, fallback: Sequence[str] = _FALLBACK_TRIALS) -> str:
    """Write the PNG; returns a one-line note (written, or why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    trials = trials_of(rows, fallback)
    fig, axes = plt.subplots(1, len(trials), figsize=(5 * len(trials), 4), squeeze=False)
    for ax, trial in zip(axes[0], trials):
        xs = [r["version"] for r in rows]
        ys = [r.get(f"{trial}_us") for r in rows]
        colors = ["tab:blue" if r.get("kept") is None else ("tab:green" if r["kept"] else "tab:red") for r in rows]
        ax.scatter(range(len(xs)), [y if y is not None else float("nan") for y in ys], c=colors)
        best, line = None, []
        for r, y in zip(rows, ys):
            if y is not None and (r.get("kept") in (None, True)):
                best = y if best is None else min(best, y)
            line.append(best if best is not None else float("nan"))
        ax.step(range(len(xs)), line, where="post", color="tab:gray")
        ax.set_xticks(range(len(xs)), xs, rotation=45)
        ax.set_title(f"{trial} median (us); green kept, red discarded")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    shrink_png(path)
    return f"plot written to {path}"


def shrink_png(path: Path, colors: int = 32) -> None:
    """Re-save a plot with a ``colors``-entry palette: a committed run's PNG drops from ~30 KB to ~8 KB (the
    checkout travels to the GPU machine, under a size budget) and a 4-colour line plot looks the same."""
    try:
        from PIL import Image
    except ImportError:  # matplotlib brings Pillow; without it the full-colour file stays
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=colors)
    small.save(path, optimize=True)


def render_walls(state: RunState) -> str:
    """Wall time (s) of each step per iteration, as the run state recorded them (a handed-off DESIGN counts from
    the hand-off to the accepted reply: the designer's time)."""
    from .state import STEPS

    iters = sorted({int(k.split(":")[0]) for k in state.steps})
    out = ["| Iteration | " + " | ".join(STEPS) + " |", "|" + "---|" * (len(STEPS) + 1)]
    for i in iters:
        cells = []
        for step in STEPS:
            r = state.steps.get(f"{i}:{step}")
            cells.append("-" if r is None else f"{r.wall_s:.1f}" + ("" if r.status == "done" else f" ({r.status})"))
        out.append(f"| {i} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def write_summary(state: RunState) -> tuple[str, str]:
    """(table, plot note); the table is also saved as ``summary.md`` in the run folder."""
    rows = summary_rows(state)
    fallback = default_trials(state)
    table = render_table(rows, fallback)
    totals = state.totals()
    extra = f"\nTokens: {totals['tokens'] or 'none'}; cost ${totals['cost_usd']:.4f}\n"
    walls = "\nStep wall times (s):\n\n" + render_walls(state)
    atomic_write_text(state.dir / "summary.md",
                      table + extra + walls + "".join(f"\nNote: {n}" for n in state.notes))
    note = plot_trajectory(rows, state.dir / "trajectory.png", fallback) if rows else "plot skipped: no versions"
    return table + extra, note
