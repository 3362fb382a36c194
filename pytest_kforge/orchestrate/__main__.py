"""``python -m pytest_kforge.orchestrate``: run the optimisation loop on one kernel.

Examples::

    python -m pytest_kforge.orchestrate --kernel mla --dry-run            # plan only, works on CPU
    python -m pytest_kforge.orchestrate --kernel mla --iterations 2 --goal "decode<=55us"
    python -m pytest_kforge.orchestrate --resume 20261202-161500-mla-ab12  # after a crash or kill
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import KforgeError
from ..fsutil import LockTimeout

__all__ = ["main", "build_parser", "make_agents"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.orchestrate",
                                 description="Turn 'make this kernel faster' into verified, explained versions.")
    ap.add_argument("--kernel", help="kernel folder under kernels/ (e.g. mla)")
    ap.add_argument("--from", dest="from_version", help="start version (default: the best in "
                                                        "docs/kernels/<kernel>/best.json, else the latest)")
    ap.add_argument("--iterations", type=int, default=2, help="loop iterations (default 2)")
    ap.add_argument("--agents", choices=("offline", "anthropic", "replay"),
                    help="agent backend (default: anthropic if ANTHROPIC_API_KEY is set, else offline)")
    ap.add_argument("--replay-from", help="run id or folder of recorded exchanges for --agents replay")
    ap.add_argument("--model", help="model id or alias (sonnet, opus, haiku) for --agents anthropic")
    ap.add_argument("--max-retries", type=int, default=4, help="SDK retries on 429/5xx/529 (default 4)")
    ap.add_argument("--goal", action="append", default=[], help="e.g. 'decode<=55us', 'spec_pct_floor>=80' (repeat)")
    ap.add_argument("--dry-run", action="store_true", help="ANALYZE and STRATEGIZE only; print the plan")
    ap.add_argument("--resume", metavar="RUN_ID", help="continue a run after a crash or kill")
    ap.add_argument("--runs-dir", default=None, help="where runs/<run-id>/ go (default ./runs)")
    ap.add_argument("--results", help="suite results JSON to start from (default: the newest one found)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="time limit (s) of one suite/profile run")
    ap.add_argument("--autotune-budget", type=float, default=3600.0,
                    help="tuning time box per parent version in seconds (default 3600, i.e. < 1 h)")
    ap.add_argument("--root", default=".", help="project root (default: current directory)")
    return ap


def make_agents(kind: str, *, root: Path, model: str | None, max_retries: int, replay_from: str | None,
                runs_dir: Path) -> tuple[Any, Any]:
    if kind == "offline":
        from .agents.offline import OfflineDesigner, OfflineProfiler

        return OfflineProfiler(), OfflineDesigner()
    if kind == "anthropic":
        from .agents.anthropic_backend import AnthropicDesigner, AnthropicProfiler, make_client

        client = make_client(max_retries=max_retries)
        return AnthropicProfiler(client, model=model), AnthropicDesigner(client, model=model)
    from .agents.replay import ReplayDesigner, ReplayProfiler

    if not replay_from:
        raise KforgeError("--agents replay needs --replay-from <run-id or folder of exchanges>; pass a run id "
                          "from runs/ or a transcript folder")
    src = Path(replay_from)
    if not src.is_dir():
        src = runs_dir / replay_from / "exchanges"
    if not src.is_dir():
        raise KforgeError(f"no recorded exchanges at {replay_from} or {src}; pass a run id from {runs_dir}")
    return ReplayProfiler(src), ReplayDesigner(src)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .loop import Options, Orchestrator, StepFailed, gpu_available
    from .suite import PytestSuiteRunner
    from .summary import write_summary

    root = Path(args.root).resolve()
    runs_dir = Path(args.runs_dir).resolve() if args.runs_dir else root / "runs"
    try:
        if args.resume:
            stored = json.loads((runs_dir / args.resume / "state.json").read_text(encoding="utf-8"))["options"] \
                if (runs_dir / args.resume / "state.json").exists() else None
            if stored is None:
                from .state import RunState

                RunState.load(runs_dir, args.resume)  # raises the one-line "no run" error
            opts = Options(**{**(stored or {}), "runs_dir": runs_dir})
        else:
            if not args.kernel:
                raise KforgeError("--kernel is required (e.g. --kernel mla) unless you --resume a run")
            agents = args.agents or ("anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "offline")
            opts = Options(kernel=args.kernel, root=root, runs_dir=runs_dir, from_version=args.from_version,
                           iterations=args.iterations, agents=agents, goals=list(args.goal), dry_run=args.dry_run,
                           timeout_s=args.timeout, autotune_budget_s=args.autotune_budget, model=args.model,
                           results=args.results)
        orch_gpu = None
        if not opts.dry_run:
            orch_gpu = gpu_available()
            if not orch_gpu:
                print("kforge orchestrate: no CUDA GPU here (torch.cuda.is_available() is False); run it on a GPU "
                      "machine, or add --dry-run to see the plan", file=sys.stderr)
                return 2
        profiler, designer = make_agents(opts.agents, root=opts.root, model=opts.model, max_retries=args.max_retries,
                                         replay_from=args.replay_from, runs_dir=runs_dir)
        orch = Orchestrator(opts, profiler=profiler, designer=designer, runner=PytestSuiteRunner(opts.root),
                            has_gpu=orch_gpu)
        state = orch.run(resume=args.resume)
    except LockTimeout as exc:
        print(f"kforge orchestrate: {exc}", file=sys.stderr)
        return 3
    except StepFailed as exc:
        print(f"kforge orchestrate: {exc}", file=sys.stderr)
        return 1
    except KforgeError as exc:
        print(f"kforge orchestrate: error: {exc}", file=sys.stderr)
        return 2
    if not opts.dry_run:
        table, note = write_summary(state)
        print(table)
        print(note)
    for n in state.notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
