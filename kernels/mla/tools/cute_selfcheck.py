"""GPU self-check of the CuTe DSL MLA versions, in one device call (< 4 minutes with compiles).

Run from the repository root on the GPU machine:

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/tools/cute_selfcheck.py [--versions v1_cute,v2_cute]

A probe kind that no version names is checked and timed the same way as ``kind:<kind>[@<version>]`` (that
version's CONFIG and spec, default v35_cute), e.g. ``--versions v35_cute,kind:sm90_seesaw_pair_stale``: the same
cases and the same timer as the version beside it.

For every ``v*_cute.py`` version: the two trial configs and small fuzz shapes (ragged lengths,
shuffled pages, s 1..16, h 16..128, forced split counts with empty splits, a forced single
split) are checked against ``SPEC.reference`` with outputs NaN-poisoned first; trials are timed
with the harness's timer (pytest_kforge.timing: CUDA events, spin kernel, L2 flush, median of 30).

Compiling is the slow part (10-25 s of mostly single-threaded Python per kernel shape), so each
version runs in its own worker process: workers compile in parallel (``prepare``, no GPU) and
take a file lock around every GPU step, so checks and timings never overlap.  Prints a table
and writes ``$OUT/cute_selfcheck.json`` when ``OUT`` is set; a version that raises prints its
full traceback and the others go on.  Exit status 1 when anything failed.  With a ``ptxas`` on PATH each
kernel's PTX is also run through ``ptxas -v`` (``_cute_ptxas``): a kernel whose wgmma ptxas serialised gets
a WARNING line (correct, but every wgmma waits for the previous one).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUDGET_S = 215.0  # workers stop starting new cases after this (the whole run must stay < 4 min)
FUZZ = [  # (b, s, h, seqlens, config overrides); few distinct (s, h): each one is a compile
    (3, 1, 128, [1, 63, 5000], {}),  # decode's kernels, ragged lengths, many splits
    (2, 16, 128, [16, 700], {"num_splits": 1}),  # spec's kernels (v3: direct), ragged
    (4, 16, 64, [16, 65, 1000, 4097], {"num_splits": 5}),  # empty splits for the short ones
    (2, 1, 16, [777, 64], {}),
    (3, 5, 32, [5, 130, 2049], {"num_splits": 3}),  # 160 rows: a partial 64-row block
    (2, 5, 32, [50, 3000], {"num_splits": 1}),  # same shape, single split (v3: direct epilogue)
    (2, 1, 128, [40, 3000], {"num_splits": 2}),  # decode's split count, one split empty (v22: a pair merges it)
    # 288 tiles in one split: v54_cute runs 132 whole and cuts 156 into pieces, some empty (the short sequences)
    (9, 16, 128, [16, 700, 1000, 64, 130, 999, 500, 1000, 333], {"num_splits": 1}),
]
TRIALS = ("decode", "spec")


@contextlib.contextmanager
def _gpu_lock(path: str):
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _check(version, params, seqlens, cfg, seed):
    import torch

    from pytest_kforge.spec import compare_outputs, poison_

    spec = version.spec
    inputs = spec.make_inputs(params, seed=seed, device="cuda", seqlens=seqlens)
    outs = spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    version(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    ref = spec.reference(inputs)
    res = [compare_outputs(n, outs[n], ref[n], spec.tolerances[n]) for n in spec.output_names]
    del inputs, outs, ref
    torch.cuda.empty_cache()
    return all(r.ok for r in res), {r.name: {"max_abs": r.max_abs, "rel_l2": r.rel_l2, "msg": r.message} for r in res}


def _time(version, params, reps=30):
    """Median device time (us) with the harness's clock (see ``pytest_kforge.timing.median_device_us``)."""
    from pytest_kforge.timing import median_device_us

    spec = version.spec
    inputs = spec.make_inputs(params, seed=7, device="cuda")
    outs = spec.alloc_outputs(params, device="cuda")
    return median_device_us(lambda: version(**inputs, **outs), rounds=reps)


def _cases():
    yield from (("trial", t, None, {}) for t in TRIALS)
    yield from (("fuzz", (b, s, h, lens), lens, cfg) for b, s, h, lens, cfg in FUZZ)


def _stem(name: str) -> str:
    """A file-name-safe form of a ``--versions`` entry (``kind:<kind>@<version>`` has ':' and '@')."""
    return name.replace(":", "_").replace("@", "_")


def load(name: str):
    """The version ``name``, or for ``kind:<kind>[@<version>]`` that version (default v35_cute) running ``kind``."""
    import dataclasses
    import importlib
    import types

    from pytest_kforge.registry import load_version

    if not name.startswith("kind:"):
        return load_version("mla", name, kernels_dir=ROOT / "kernels")
    kind, _, base = name.removeprefix("kind:").partition("@")
    v = load_version("mla", base or "v35_cute", kernels_dir=ROOT / "kernels")
    importlib.import_module("kforge_kernels.mla.cute.kinds").check_kind(kind)  # one sentence when unknown
    host = importlib.import_module("kforge_kernels.mla.cute.host")
    supports, prepare, run = host.version_functions(name, kind, v.config)
    return dataclasses.replace(v, name=name, description=f"{v.name}'s CONFIG running kind {kind}",
                               module=types.SimpleNamespace(run=run, prepare=prepare, supports=supports))


def worker(name: str, lock: str, t0: float, result: str) -> dict:
    """Check (and time the trials of) one version; its JSON record is rewritten after every case
    so a worker killed at the deadline still reports what it finished."""
    sys.path.insert(0, str(ROOT))
    from pytest_kforge.spec import Roofline

    rec: dict = {"version": name, "cases": [], "error": None, "ptxas": []}
    # keep each kernel's PTX for ptxas's notes (read before the host module loads; cute.compile also writes
    # the PTX as *.sm_90a.ptx into the cwd, which .gitignore covers)
    if shutil.which("ptxas"):
        os.environ["KFORGE_CUTE_OPTIONS"] = (os.environ.get("KFORGE_CUTE_OPTIONS", "") + " --keep-ptx").strip()
    try:
        v = load(name)
    except Exception:  # noqa: BLE001
        rec["error"] = traceback.format_exc()
        return rec
    roof = Roofline()
    Path(result).write_text(json.dumps(rec, default=str))
    for kind, what, lens, cfg in _cases():
        if kind == "trial":
            params = dict(v.spec.trials[what])
        else:
            b, s, h, lens = what
            params = {"b": b, "s": s, "t": max(lens), "h": h}
        case = {"kind": kind, "trial": what if kind == "trial" else None, "params": params,
                "seqlens": lens, "config": cfg}
        rec["cases"].append(case)
        if time.time() - t0 > BUDGET_S:
            case["skipped"] = "time budget"
            continue
        why = v.supports(params)
        if why:
            case["unsupported"] = why
            continue
        tc = time.time()
        try:
            prep = getattr(v.module, "prepare", None)
            if prep is not None:
                prep(params, cfg)  # compile outside the GPU lock
            case["compile_s"] = round(time.time() - tc, 1)
            with _gpu_lock(lock):
                ok, errs = _check(v, params, lens, cfg, seed=1 if kind == "trial" else 100 + len(rec["cases"]))
                case.update(ok=ok, errors=errs)
                if kind == "trial" and ok:
                    us = _time(v, params)
                    flops, nbytes = v.spec.flops(params), v.spec.min_bytes(params)
                    floor_us = roof.floor_s(flops, nbytes) * 1e6
                    case.update(median_us=us, tflops=flops / us / 1e6, floor_us=floor_us, pct_floor=100 * floor_us / us)
        except Exception:  # noqa: BLE001 - one failing case must not hide the others
            case["ok"] = False
            case["error"] = traceback.format_exc()
        case["wall_s"] = round(time.time() - tc, 1)
        Path(result).write_text(json.dumps(rec, default=str))
    rec["ptxas"] = _ptxas_notes()
    return rec


def _ptxas_notes() -> list[dict]:
    """ptxas's notes on every kernel this worker compiled (``_cute_ptxas``); never fails the check."""
    try:
        from kforge_kernels.mla.cute import host as host
        from kforge_kernels.mla.tools.cute_ptxas import cache_notes

        return cache_notes(host._CACHE)
    except Exception as exc:  # noqa: BLE001 - a note, not a verdict
        return [{"kernel": "?", "ptxas": f"not checked: {type(exc).__name__}: {exc}", "serialized": []}]


def _line(name: str, c: dict) -> str:
    head = f"{name:8} {c['kind']:5} {c['trial'] or str(c['params']):40}"
    if "skipped" in c or "unsupported" in c:
        return f"{head} {c.get('skipped') or c.get('unsupported')}"
    if c.get("error"):
        return f"{head} ERROR\n{c['error']}"
    e = c["errors"]
    s = (f"{head} {'ok  ' if c['ok'] else 'FAIL'} out {e['out']['max_abs']:.3g}/{e['out']['rel_l2']:.2g} "
         f"lse {e['lse']['max_abs']:.3g}/{e['lse']['rel_l2']:.2g}")
    if "median_us" in c:
        s += f" | {c['median_us']:8.1f} us {c['tflops']:6.1f} TFLOP/s {c['pct_floor']:5.1f}% floor"
    s += f" (compile {c.get('compile_s', 0)}s, wall {c['wall_s']}s)"
    if not c["ok"]:
        s += "\n    " + "; ".join(x["msg"] for x in e.values())
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", default="", help="comma list; default: every v*_cute.py")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--lock", default="", help=argparse.SUPPRESS)
    ap.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        rec = worker(args.worker, args.lock, args.t0, args.result)
        Path(args.result).write_text(json.dumps(rec, default=str))
        return 0
    t0 = time.time()
    names = args.versions.split(",") if args.versions else sorted(
        p.stem for p in (ROOT / "kernels" / "mla" / "versions").glob("v*_cute.py"))
    missing = [n for n in names if not n.startswith("kind:") and not (ROOT / "kernels" / "mla" / "versions" / f"{n}.py").is_file()]
    for n in missing:  # e.g. a version not handed over yet: say so, check the rest
        print(f"{n}: no kernels/mla/{n}.py in this checkout; skipped.")
    names = [n for n in names if n not in missing]
    tmp = Path(tempfile.mkdtemp(prefix="cute_selfcheck_"))
    lock = str(tmp / "gpu.lock")
    procs = {}
    for n in names:
        log = open(tmp / f"{_stem(n)}.log", "w")
        procs[n] = (subprocess.Popen(
            [sys.executable, __file__, "--worker", n, "--lock", lock, "--t0", str(t0), "--result",
             str(tmp / f"{_stem(n)}.json")],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT), log)
    report = {"versions": {}, "budget_s": BUDGET_S}
    bad = False
    for n, (p, log) in procs.items():
        try:
            p.wait(timeout=max(1.0, 232 - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        res = tmp / f"{_stem(n)}.json"
        rec = json.loads(res.read_text()) if res.exists() else {"version": n, "cases": [], "error": None}
        if p.returncode != 0:
            rec["error"] = rec.get("error") or f"worker exit status {p.returncode} (killed at the 232 s deadline or crashed)"
        for c in rec["cases"]:
            if "ok" not in c and "skipped" not in c and "unsupported" not in c:
                c["skipped"] = "unfinished when the worker stopped"
        rec["log_tail"] = (tmp / f"{_stem(n)}.log").read_text()[-4000:]
        report["versions"][n] = rec
    print(f"{'version':8} {'kind':5} {'case':40} result")
    for n, rec in report["versions"].items():
        if rec["error"]:
            bad = True
            print(f"{n:8} ERROR\n{rec['error']}\n--- worker log tail ---\n{rec['log_tail']}")
        for c in rec["cases"]:
            bad |= c.get("ok") is False
            print(_line(n, c))
        for note in rec.get("ptxas", []):  # a warning: a serialised kernel is still correct
            for why in note["serialized"]:
                print(f"{n:8} WARNING ptxas serialised the wgmma of {note['kernel']}: {why} "
                      f"(knowledge: wgmma-serialized-by-divergent-branch)")
    print(f"total wall {time.time() - t0:.0f} s")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "cute_selfcheck.json").write_text(json.dumps(report, indent=1, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
