"""sha256 of the PTX every CuTe DSL version compiles, keyed by version id, without a GPU.

    CUTE_DSL_ARCH=sm_90a python kernels/mla/tools/ptx_hashes.py [--versions all|v1_cute,v59_cute] \\
        [--out hashes.json] [--check hashes.json]

For each version it runs the version's own ``prepare`` on the spec's trial shapes and the self-check's fuzz
shapes (the compile paths a run takes: one-split, split, merged pair, tail), records every kernel that
``prepare`` asked the host to compile, and hashes that kernel's PTX.  Each version compiles in a process of its own
(``--jobs`` at a time): a kernel's PTX can depend on what the same process compiled before it (v23_cute's and
v33_cute's decode combine did, issue 33), and a fresh process makes the hashes a function of the version alone.

The PTX's entry names embed the Python module that defines the kernel class (``kforge_kernels.mla.<module>``,
dots dropped, the whole name cut at a fixed length), so moving a kernel module renames the symbols and nothing
else.  ``sha256`` is taken after replacing each symbol by its ordinal (:func:`normalise`): it is the same before
and after a move, and differs when any instruction, constant, parameter or layout differs.  ``raw_sha256`` is
the PTX's own hash (it changes with a module's name).

``--check FILE`` compares the ``sha256`` of each version with FILE's (written by ``--out``, or the small
``{version: sha256}`` record ``--summary`` writes, as committed in ``ptx-sha256.json``) and exits 1 on any
difference: the before/after proof of a layout move, and a PTX-hash check for CI.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
HOST = "kforge_kernels.mla.cute.host"
SELFCHECK = "kforge_kernels.mla.tools.cute_selfcheck"


def _package() -> None:
    """Install ``kforge_kernels.mla`` as the registry does (its versions resolve from ``versions/``)."""
    if str(ROOT) not in sys.path:  # pytest_kforge, when the project is not installed
        sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import load_kernel

    load_kernel("mla", ROOT / "kernels")


def shapes() -> list[tuple[dict[str, int], dict[str, Any]]]:
    """(params, config overrides): the trial shapes, then the self-check's fuzz shapes."""
    from kforge_kernels.mla.spec import SPEC

    fuzz = importlib.import_module(SELFCHECK).FUZZ
    out: list[tuple[dict[str, int], dict[str, Any]]] = [(dict(SPEC.trials[t]), {}) for t in SPEC.default_trials]
    return out + [({"b": b, "s": s, "t": max(lens), "h": h}, dict(cfg)) for b, s, h, lens, cfg in fuzz]


def normalise(ptx: str) -> str:
    """``ptx`` with every kernel and function symbol replaced by ``@sym<i>`` (in order of first definition).

    The DSL names a kernel after the Python module and class that define it and cuts the name at a fixed
    length, so a moved module changes the symbols (and how much of the argument signature they show) and nothing
    else; the instructions, parameters, constants and shared-memory layout are compared as they are.
    """
    names = list(dict.fromkeys(re.findall(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", ptx)))
    for i, name in sorted(enumerate(names), key=lambda t: -len(t[1])):
        ptx = re.sub(rf"(?<![\w$]){re.escape(name)}(?=_param_\d|[^\w$]|$)", f"@sym{i}", ptx)
    return ptx


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def version_hashes(names: list[str]) -> dict[str, dict[str, Any]]:
    """{version: {"sha256": digest of its kernels, "kernels": {key: {"sha256", "raw_sha256"}}}}."""
    host = importlib.import_module(HOST)
    compiled = host.compiled
    asked: list[tuple[Any, ...]] = []

    def recording(kind: str, s: int, h: int, stages: int, direct: bool = False, paired: bool = False) -> Any:
        asked.append((kind, s, h, stages, direct, paired))
        return compiled(kind, s, h, stages, direct=direct, paired=paired)

    host.compiled = recording  # prepare() looks the name up in its module on every call
    result: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            mod = importlib.import_module(f"kforge_kernels.mla.{name}")
            asked.clear()
            for params, cfg in shapes():
                mod.prepare(params, cfg)
            kernels: dict[str, dict[str, str]] = {}
            for key in sorted(set(asked)):
                kind, s, h, stages, direct, paired = key
                fns = compiled(kind, s, h, stages, direct=direct, paired=paired)[:2]
                tag = f"{kind}:s{s}:h{h}:stages{stages}" + (":direct" if direct else "") + (":paired" if paired else "")
                for part, fn in zip(("main", "combine"), fns):
                    ptx = getattr(fn, "__ptx__", None) if fn is not None else None
                    if fn is not None and not ptx:
                        raise SystemExit("no PTX kept: run with KFORGE_CUTE_OPTIONS containing --keep-ptx "
                                         "(this script sets it when it is unset).")
                    if ptx:
                        kernels[f"{tag}:{part}"] = {"sha256": _sha(normalise(ptx)), "raw_sha256": _sha(ptx)}
            digest = _sha("".join(f"{k}={v['sha256']}\n" for k, v in sorted(kernels.items())))
            result[name] = {"sha256": digest, "kernels": kernels}
            print(f"{name}: {digest[:16]} ({len(kernels)} kernels)", flush=True)
    finally:
        host.compiled = compiled
    return result


def cute_versions(arg: str) -> list[str]:
    from pytest_kforge.registry import load_kernel, version_sort_key

    every = [n for n in load_kernel("mla", ROOT / "kernels").version_names() if n.endswith("_cute")]
    if arg == "all":
        return sorted(every, key=version_sort_key)
    names = [n for n in arg.split(",") if n]
    unknown = [n for n in names if n not in every]
    if unknown or not names:
        raise SystemExit(f"--versions {arg}: not CuTe versions of mla: {', '.join(unknown) or 'empty list'}; "
                         "give 'all' or a comma list such as v1_cute,v59_cute.")
    return names


def compare(now: dict[str, dict[str, Any]], recorded: dict[str, Any]) -> list[str]:
    """One line per version whose kernels differ from ``recorded`` (versions missing there are reported too).

    ``recorded`` is what ``--out`` wrote, or the ``{version: sha256}`` digest file ``--summary`` wrote (then a
    difference names the version only)."""
    bad = []
    for name, got in now.items():
        want = recorded.get(name)
        digest = want if isinstance(want, str) else (want or {}).get("sha256")
        if want is None:
            bad.append(f"{name}: not in the recorded hashes")
        elif digest != got["sha256"]:
            kernels = want.get("kernels", {}) if isinstance(want, dict) else None
            diff = sorted(k for k in set(kernels) | set(got["kernels"])
                          if kernels.get(k, {}).get("sha256") != got["kernels"].get(k, {}).get("sha256")) \
                if kernels is not None else []
            bad.append(f"{name}: PTX differs" + (f" in {', '.join(diff)}" if diff else
                                                 " (rerun both sides with --out for the kernels)"))
    return bad


def isolated(names: list[str], jobs: int) -> dict[str, dict[str, Any]]:
    """:func:`version_hashes` of each version in a fresh process of its own, ``jobs`` at a time."""
    result: dict[str, dict[str, Any]] = {}
    todo, running = list(names), []
    with tempfile.TemporaryDirectory(prefix="ptx_hashes_") as tmp:
        while todo or running:
            while todo and len(running) < jobs:
                name = todo.pop(0)
                dest = Path(tmp) / f"{name}.json"
                cmd = [sys.executable, str(Path(__file__).resolve()), "--in-process", "--versions", name, "--out", str(dest)]
                running.append((name, dest, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)))
            name, dest, proc = running.pop(0)
            output, _ = proc.communicate()
            print(output.strip(), flush=True)
            if proc.returncode or not dest.exists():
                raise SystemExit(f"{name}: its compile process exited {proc.returncode}; run it alone with "
                                 f"--in-process --versions {name} to see why.")
            result.update(json.loads(dest.read_text()))
    return {n: result[n] for n in names}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default="all", help="'all' (default) or a comma list of CuTe version ids")
    ap.add_argument("--out", type=Path, help="write the hashes here (JSON)")
    ap.add_argument("--summary", type=Path, help="write {version: sha256} here (the small committed record)")
    ap.add_argument("--check", type=Path, help="compare with hashes written earlier by --out; exit 1 on a difference")
    ap.add_argument("--jobs", type=int, default=2, help="versions compiled at once, one process each (default 2)")
    ap.add_argument("--in-process", action="store_true", help="compile every version in this process (one worker)")
    args = ap.parse_args(argv)
    out, summary, check = (p.resolve() if p else None for p in (args.out, args.summary, args.check))  # before chdir
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    opts = os.environ.get("KFORGE_CUTE_OPTIONS", "")
    if "--keep-ptx" not in opts:
        os.environ["KFORGE_CUTE_OPTIONS"] = (opts + " --keep-ptx").strip()
    _package()
    names = cute_versions(args.versions)
    os.chdir(Path(os.environ.get("TMPDIR", "/tmp")))  # --keep-ptx drops .ptx files into the cwd
    now = version_hashes(names) if args.in_process else isolated(names, max(1, args.jobs))
    if out:
        out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    if summary:
        summary.write_text(json.dumps({n: v["sha256"] for n, v in now.items()}, indent=1) + "\n")
    if check:
        bad = compare(now, json.loads(check.read_text()))
        print("\n".join(bad) if bad else f"PTX identical to {check} for {len(now)} versions")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
