"""``python -m pytest_kforge.orchestrate``: run the optimisation loop on one kernel.

Examples::

    python -m pytest_kforge.orchestrate --kernel mla --dry-run            # plan only, works on CPU
    python -m pytest_kforge.orchestrate --kernel mla --iterations 2 --goal "decode<=55us"
    python -m pytest_kforge.orchestrate --kernel mla --agents handoff      # stops at DESIGN, waiting
    python -m pytest_kforge.orchestrate --resume 20261202-161500-mla-ab12  # after a crash, a kill or a handoff
    python -m pytest_kforge.orchestrate --agents replay --replay-from docs/kernels/runs/<id>   # on CPU

Exit codes: 0 done (or a step newly waiting for its handoff), 1 a step failed, 2 bad input or no
GPU, 3 another run holds the kernel's lock, 4 ``--resume`` found the handed-off step still waiting
(the line says what is missing), 5 a replay did not reproduce its recording.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ..errors import KforgeError
from ..fsutil import LockTimeout

__all__ = ["main", "build_parser", "make_agents", "EXIT_STILL_WAITING", "EXIT_REPLAY_DIFFERS"]

EXIT_STILL_WAITING = 4
EXIT_REPLAY_DIFFERS = 5
BACKENDS = ("offline", "anthropic", "command", "handoff", "replay")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.orchestrate",
                                 description="Turn 'make this kernel faster' into verified, explained versions.")
    ap.add_argument("--kernel", help="kernel folder under kernels/ (e.g. mla)")
    ap.add_argument("--from", dest="from_version", help="start version (default: the best in "
                                                        "docs/kernels/<kernel>/best.json, else the latest)")
    ap.add_argument("--iterations", type=int, default=2, help="loop iterations (default 2)")
    ap.add_argument("--agents", choices=BACKENDS,
                    help="agent backend (default: anthropic if ANTHROPIC_API_KEY is set, else offline)")
    ap.add_argument("--agent-cmd", help="--agents command: the coding-agent command line (run with bash -c) for "
                                        "both designer and profiler")
    ap.add_argument("--designer-cmd", help="the designer's command line (overrides --agent-cmd and the backend)")
    ap.add_argument("--profiler-cmd", help="the profiler's command line (overrides --agent-cmd and the backend)")
    ap.add_argument("--agent-timeout", type=float, default=3600.0, help="time limit (s) of one agent command")
    ap.add_argument("--replay-from", help="--agents replay: a run id or a recorded run folder")
    ap.add_argument("--replay-root", help="--agents replay: scratch project to replay in (default: a temporary folder)")
    ap.add_argument("--model", help="model id or alias (sonnet, opus, haiku) for --agents anthropic")
    ap.add_argument("--max-retries", type=int, default=4, help="SDK retries on 429/5xx/529 (default 4)")
    ap.add_argument("--goal", action="append", default=[], help="e.g. 'decode<=55us', 'spec_pct_floor>=80' (repeat)")
    ap.add_argument("--dry-run", action="store_true", help="ANALYZE and STRATEGIZE only; print the plan")
    ap.add_argument("--resume", metavar="RUN_ID", help="continue a run after a crash, a kill or a handoff")
    ap.add_argument("--runs-dir", default=None, help="where runs/<run-id>/ go (default ./runs)")
    ap.add_argument("--results", help="suite results JSON to start from (default: the newest one found)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="time limit (s) of one suite/profile run")
    ap.add_argument("--suite-args", default="", help="extra harness arguments of VERIFY's suite, one shell-quoted "
                                                     "string (e.g. '-n 4 -x')")
    ap.add_argument("--autotune-budget", type=float, default=3600.0,
                    help="tuning time box per parent version in seconds (default 3600, i.e. < 1 h)")
    ap.add_argument("--pack", metavar="RUN_ID", help="pack a run folder for committing (gzipped JSON, no tasks/ or "
                                                    "outside/) into --pack-to, then exit")
    ap.add_argument("--pack-to", help="--pack: destination folder (e.g. docs/kernels/runs/<run-id>)")
    ap.add_argument("--root", default=".", help="project root (default: current directory)")
    return ap


def make_agents(kind: str, *, root: Path, model: str | None, max_retries: int, replay_from: str | None,
                runs_dir: Path, agent_cmd: str | None = None, designer_cmd: str | None = None,
                profiler_cmd: str | None = None, agent_timeout_s: float = 3600.0) -> tuple[Any, Any]:
    """(profiler, designer) of a backend; a role's command line, when given, replaces that role's agent."""
    if kind == "command" and not (agent_cmd or designer_cmd or profiler_cmd):
        raise KforgeError("--agents command needs --agent-cmd '<command line>' (or --designer-cmd / "
                          "--profiler-cmd); see the orchestrator README for Claude Code, Codex and aider")
    profiler: Any
    designer: Any
    if kind == "anthropic":
        from .agents.anthropic_backend import AnthropicDesigner, AnthropicProfiler, make_client

        client = make_client(max_retries=max_retries)
        profiler, designer = AnthropicProfiler(client, model=model), AnthropicDesigner(client, model=model)
    elif kind == "replay":
        from .agents.replay import ReplayDesigner, ReplayProfiler

        if not replay_from:
            raise KforgeError("--agents replay needs --replay-from <run-id or folder of exchanges>; pass a run id "
                              "from runs/ or a transcript folder")
        src = Path(replay_from)
        src = src / "exchanges" if (src / "exchanges").is_dir() else src
        if not src.is_dir():
            src = runs_dir / replay_from / "exchanges"
        if not src.is_dir():
            raise KforgeError(f"no recorded exchanges at {replay_from} or {src}; pass a run id from {runs_dir}")
        profiler, designer = ReplayProfiler(src), ReplayDesigner(src)
    else:
        from .agents.offline import OfflineDesigner, OfflineProfiler

        profiler, designer = OfflineProfiler(), OfflineDesigner()
        if kind == "handoff":
            from .agents.handoff import HandoffDesigner

            designer = HandoffDesigner()
    from .agents.command import CommandDesigner, CommandProfiler

    dcmd = designer_cmd or (agent_cmd if kind == "command" else None)
    pcmd = profiler_cmd or (agent_cmd if kind == "command" else None)
    if dcmd:
        designer = CommandDesigner(dcmd, timeout_s=agent_timeout_s)
    if pcmd:
        profiler = CommandProfiler(pcmd, timeout_s=agent_timeout_s)
    return profiler, designer


def _options(args: argparse.Namespace, root: Path, runs_dir: Path) -> Any:
    from .loop import Options

    if args.resume:
        from .state import RunState

        stored = dict(RunState.load(runs_dir, args.resume).options)  # raises the one-line "no run" error
        stored.pop("root", None)
        stored.pop("runs_dir", None)  # a copied run folder resumes under this --root and --runs-dir
        known = set(Options.__dataclass_fields__)
        return Options(**{k: v for k, v in stored.items() if k in known}, root=root, runs_dir=runs_dir)
    if not args.kernel:
        raise KforgeError("--kernel is required (e.g. --kernel mla) unless you --resume a run")
    agents = args.agents or ("anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "offline")
    return Options(kernel=args.kernel, root=root, runs_dir=runs_dir, from_version=args.from_version,
                   iterations=args.iterations, agents=agents, goals=list(args.goal), dry_run=args.dry_run,
                   timeout_s=args.timeout, autotune_budget_s=args.autotune_budget, model=args.model,
                   results=args.results, agent_cmd=args.agent_cmd, designer_cmd=args.designer_cmd,
                   profiler_cmd=args.profiler_cmd, agent_timeout_s=args.agent_timeout,
                   suite_args=shlex.split(args.suite_args))


def _replay(args: argparse.Namespace, root: Path, runs_dir: Path) -> int:
    from .loop import Options, Orchestrator
    from ..registry import version_path
    from .replayrun import RecordedSuiteRunner, compare_runs, load_source, make_scratch, replay_options

    if not args.replay_from:
        raise KforgeError("--agents replay needs --replay-from <run id or run folder>")
    source = load_source(args.replay_from, runs_dir)
    scratch = make_scratch(source, root, Path(args.replay_root) if args.replay_root else None)
    ropts = replay_options(source)
    start = ropts.get("from_version")
    if start and not version_path(scratch / "kernels" / source.kernel, start).exists():
        raise KforgeError(f"the recorded run starts from {source.kernel} {start}, which {root / 'kernels' / source.kernel} "
                          f"lacks; replay from a checkout that has it (--root)")
    opts = Options(**ropts, root=scratch, agents=str(source.options.get("agents", "replay")))
    profiler, designer = make_agents("replay", root=scratch, model=None, max_retries=0,
                                     replay_from=str(source.dir), runs_dir=runs_dir)
    print(f"replaying run {source.run_id} ({opts.iterations} iteration(s), recorded agents "
          f"{opts.agents}) in {scratch}")
    state = Orchestrator(opts, profiler=profiler, designer=designer, runner=RecordedSuiteRunner(source),
                         has_gpu=False).run()
    diffs = compare_runs(source, state)
    for d in diffs:
        print(f"replay differs: {d}")
    if diffs:
        return EXIT_REPLAY_DIFFERS
    print(f"replay of {source.run_id} matches the recording: " + ", ".join(
        f"{r['version']} {'kept' if r['kept'] else 'discarded'}" for r in state.steps[
            f"{opts.iterations}:EVALUATE"].outputs.get("history", [])) if opts.iterations else "nothing to replay")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .loop import Orchestrator, StepFailed, gpu_available
    from .outside import OutsideWrites
    from .suite import PytestSuiteRunner
    from .summary import write_summary

    root = Path(args.root).resolve()
    runs_dir = Path(args.runs_dir).resolve() if args.runs_dir else root / "runs"
    orch = None
    try:
        if args.pack:
            from .pack import pack_run

            if not args.pack_to:
                raise KforgeError("--pack needs --pack-to <folder> (e.g. docs/kernels/runs/<run-id>)")
            src = Path(args.pack) if (Path(args.pack) / "state.json").exists() else runs_dir / args.pack
            files = pack_run(src, Path(args.pack_to))
            print(f"packed {len(files)} file(s) of {src} into {args.pack_to} "
                  f"({sum(f.stat().st_size for f in files) / 1024:.0f} KB)")
            return 0
        if args.agents == "replay" and not args.resume:
            return _replay(args, root, runs_dir)
        opts = _options(args, root, runs_dir)
        orch_gpu = None
        if not opts.dry_run:
            orch_gpu = gpu_available()
            if not orch_gpu and not (opts.agents == "handoff" and not args.resume):
                print("kforge orchestrate: no CUDA GPU here (torch.cuda.is_available() is False); run it on a GPU "
                      "machine, add --dry-run to see the plan, or start it with --agents handoff to design here and "
                      "--resume it on a GPU", file=sys.stderr)
                return 2
            if not orch_gpu:  # a handed-off DESIGN stops the run before VERIFY, the first step that needs a GPU
                print("kforge orchestrate: no CUDA GPU here: PROFILE reads the reports already written, the run "
                      "stops at the handed-off DESIGN, and its --resume (VERIFY on) must run on a GPU machine")
        profiler, designer = make_agents(opts.agents, root=opts.root, model=opts.model, max_retries=args.max_retries,
                                         replay_from=args.replay_from, runs_dir=runs_dir, agent_cmd=opts.agent_cmd,
                                         designer_cmd=opts.designer_cmd, profiler_cmd=opts.profiler_cmd,
                                         agent_timeout_s=opts.agent_timeout_s)
        outside = OutsideWrites(opts.root, opts.kernel, opts.kernels_dir)
        orch = Orchestrator(opts, profiler=profiler, designer=designer,
                            runner=PytestSuiteRunner(opts.root, extra_args=tuple(opts.suite_args)), has_gpu=orch_gpu)
        was_waiting = None
        if args.resume:
            from .state import RunState

            w = RunState.load(runs_dir, args.resume).waiting()
            was_waiting = w.key if w is not None else None
        try:
            state = orch.run(resume=args.resume)
        finally:
            if orch.state is not None and not opts.dry_run:
                moved = outside.mirror(orch.state.dir)
                if moved:
                    print(f"copied {len(moved)} file(s) the run wrote outside its folder into "
                          f"{orch.state.dir / 'outside'} (bring them home: cp -r <run>/outside/. .)")
    except LockTimeout as exc:
        print(f"kforge orchestrate: {exc}", file=sys.stderr)
        return 3
    except StepFailed as exc:
        print(f"kforge orchestrate: {exc}", file=sys.stderr)
        return 1
    except KforgeError as exc:
        print(f"kforge orchestrate: error: {exc}", file=sys.stderr)
        return 2
    waiting = state.waiting()
    if waiting is not None:
        print(f"run {state.run_id} is waiting at {waiting.key}: {waiting.error}")
        return EXIT_STILL_WAITING if waiting.key == was_waiting else 0
    if not opts.dry_run:
        table, note = write_summary(state)
        print(table)
        print(note)
    for n in state.notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
