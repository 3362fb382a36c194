"""GPU self-check of the cuTile versions in one call: correctness (fuzz + trials) and trial timings.

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/tools/cutile_selfcheck.py [v1 v2 ...]

Phase 1 checks every version in its own process, all in parallel (tileiras compiles take ~10 s
per kernel on the CPU, so the compiles overlap; cuTile's disk cache then serves phase 2).
Each child compares a few fuzz shapes and the two trial configs with ``SPEC.reference``
(outputs NaN-poisoned first) and, for softmax/v1, two small shapes.  Phase 2 times the trials
one version at a time with the harness's clock (``pytest_kforge.timing.median_device_us``: 3
warm-up calls, then 30 rounds, each with an L2 flush and a spin kernel before the start event).  A failing version never stops the others; full
tracebacks go to ``$OUT/cutile_selfcheck.log`` (or ./cutile_selfcheck.log), the table to stdout,
and the results to ``$OUT/cutile_selfcheck.json`` when OUT is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
# (b, s, h, lengths): lengths < 64, odd, spanning pages, every h, s in 1..16.  The longest length
# of most cases is 4033..4096 (64 pages, as in the trials) because cuTile specialises a kernel on
# the divisibility of its array strides and shapes, and every new class is a ~10 s tileiras compile.
FUZZ = [
    (3, 1, 16, [1, 63, 4090]),
    (2, 16, 32, [16, 4095]),
    (2, 16, 64, [4033, 100]),
    (3, 1, 128, [77, 4096, 515]),
    (2, 16, 128, [4064, 17]),
    (2, 3, 64, [3, 4999]),  # the odd one out: s=3 and 79 pages
]
REPS = 30
CHILD_TIMEOUT_S = 200


def _log_path() -> Path:
    return Path(os.environ.get("OUT") or ".") / "cutile_selfcheck.log"


def _log(text: str) -> None:
    with open(_log_path(), "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _registry():
    sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import Registry

    return Registry(ROOT / "kernels")


def _check_mla(version, spec, params, seqlens, seed):
    import torch

    from pytest_kforge.spec import poison_

    inputs = spec.make_inputs(params, seed=seed, device="cuda", seqlens=seqlens)
    outputs = spec.alloc_outputs(params, device="cuda")
    poison_(outputs)
    version.fn(**inputs, **outputs, config=dict(version.config))
    poison_(outputs)  # a second call must be right too (v5+: the fused combine's counters wrap)
    version.fn(**inputs, **outputs, config=dict(version.config))
    torch.cuda.synchronize()
    ref = spec.reference(inputs)
    res = spec.compare(outputs, ref)
    return all(r.ok for r in res), {r.name: [r.max_abs, r.rel_l2] for r in res}, "; ".join(r.message for r in res if not r.ok)


def child(vname: str) -> dict:
    """Correctness of one version; returns {version, cases: [...]} (run in its own process)."""
    import torch

    reg = _registry()
    kname = "softmax" if vname.startswith("softmax/") else "mla"
    v = reg.kernel(kname).version(vname.split("/")[-1])
    spec = v.spec
    cases = []
    if kname == "mla":
        todo = [(f"fuzz-b{b}-s{s}-h{h}-t{max(ls)}", {"b": b, "s": s, "h": h, "t": max(ls)}, ls)
                for b, s, h, ls in FUZZ]
        todo += [(n, dict(spec.trials[n]), None) for n in spec.default_trials]
    else:
        todo = [("r100-c1000", {"rows": 100, "cols": 1000}, None), ("r64-c8192", {"rows": 64, "cols": 8192}, None)]
    for i, (name, params, lens) in enumerate(todo):
        t0 = time.time()
        try:
            if kname == "mla":
                ok, errs, msg = _check_mla(v, spec, params, lens, seed=1000 + i)
            else:
                from pytest_kforge.spec import poison_

                ins = spec.make_inputs(params, seed=i, device="cuda")
                outs = spec.alloc_outputs(params, device="cuda")
                poison_(outs)
                v.fn(**ins, **outs, config=dict(v.config))
                torch.cuda.synchronize()
                res = spec.compare(outs, spec.reference(ins))
                ok, errs = all(r.ok for r in res), {r.name: [r.max_abs, r.rel_l2] for r in res}
                msg = "; ".join(r.message for r in res if not r.ok)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next case
            ok, errs, msg = False, {}, f"{type(exc).__name__}: {exc}"
            _log(f"=== {vname} {name}\n{traceback.format_exc()}")
        cases.append({"case": name, "ok": ok, "errors": errs, "message": msg[:500], "secs": round(time.time() - t0, 1)})
    return {"version": vname, "cases": cases}


def time_trial(v, spec, params, inputs) -> float:
    """Median device time (us) with the harness's clock (``pytest_kforge.timing.median_device_us``).

    Before run 5 this recorded the start event right after an L2-flush write and then launched, so
    the host's launch time was inside every sample.
    """
    from pytest_kforge.timing import median_device_us

    outputs = spec.alloc_outputs(params, device="cuda")
    cfg = dict(v.config)
    return median_device_us(lambda: v.fn(**inputs, **outputs, config=cfg), rounds=REPS)


def main(argv: list[str]) -> int:
    t_start = time.time()
    if argv and argv[0] == "--child":
        print(json.dumps(child(argv[1])))
        return 0
    _log_path().parent.mkdir(parents=True, exist_ok=True)
    _log_path().write_text("")
    reg = _registry()
    mla = reg.kernel("mla")
    names = []
    for n in mla.version_names():
        try:
            if mla.version(n).language == "cutile-dsl":
                names.append(n)
        except Exception as exc:  # noqa: BLE001 - another part's broken module must not stop this check
            _log(f"=== cannot load mla/{n}: {exc}")
    if argv:
        names = [n for n in names if n in argv]
    names_all = names + (["softmax/v1"] if "v1" in reg.kernel("softmax").version_names() and not argv else [])
    # ---- phase 1: correctness, one process per version, in parallel
    procs = {n: subprocess.Popen([sys.executable, str(HERE), "--child", n], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=str(ROOT)) for n in names_all}
    checks: dict[str, dict] = {}
    for n, p in procs.items():
        try:
            out, err = p.communicate(timeout=max(5, CHILD_TIMEOUT_S - (time.time() - t_start)))
            _log(f"=== child {n} stderr\n{err}")
            checks[n] = json.loads(out.strip().splitlines()[-1]) if p.returncode == 0 and out.strip() else {
                "version": n, "cases": [], "error": f"child exited {p.returncode}: {err.strip()[-400:]}"}
        except subprocess.TimeoutExpired:
            p.kill()
            checks[n] = {"version": n, "cases": [], "error": f"correctness child timed out after {CHILD_TIMEOUT_S}s"}
        except Exception as exc:  # noqa: BLE001
            checks[n] = {"version": n, "cases": [], "error": f"{type(exc).__name__}: {exc}"}
    # ---- phase 2: timings, sequential
    from pytest_kforge.spec import Roofline

    rows = []
    trial_inputs: dict[str, dict] = {}  # made once per trial, shared by every version
    for n in names:
        v = mla.version(n)
        ok_by_case = {c["case"]: c for c in checks[n]["cases"]}
        for trial in mla.spec.default_trials:
            params = dict(mla.spec.trials[trial])
            row = {"version": n, "trial": trial, "ok": bool(ok_by_case.get(trial, {}).get("ok")),
                   "errors": ok_by_case.get(trial, {}).get("errors"), "median_us": None, "tflops": None,
                   "pct_floor": None, "error": checks[n].get("error"), "config": dict(v.config)}
            if time.time() - t_start > 225:
                row["error"] = "skipped: selfcheck time budget spent"
            else:
                try:
                    if trial not in trial_inputs:
                        trial_inputs[trial] = mla.spec.make_inputs(params, seed=7, device="cuda")
                    us = time_trial(v, mla.spec, params, trial_inputs[trial])
                    floor_us = mla.spec.floor_s(params, Roofline()) * 1e6
                    row.update(median_us=round(us, 1), tflops=round(mla.spec.flops(params) / us / 1e6, 1),
                               pct_floor=round(100.0 * floor_us / us, 1))
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    _log(f"=== timing {n} {trial}\n{traceback.format_exc()}")
            rows.append(row)
    # ---- report
    print(f"{'version':<12}{'trial':<8}{'ok':<6}{'out err (abs/relL2)':<24}"
          f"{'median us':>10}{'TFLOP/s':>9}{'% floor':>9}")
    for r in rows:
        e = (r["errors"] or {}).get("out")
        err = f"{e[0]:.2g}/{e[1]:.2g}" if e else "-"
        print(f"{r['version']:<12}{r['trial']:<8}{str(r['ok']):<6}{err:<24}{r['median_us'] or '-':>10}"
              f"{r['tflops'] or '-':>9}{r['pct_floor'] or '-':>9}  {r['error'] or ''}")
    for n, c in checks.items():
        bad = [x for x in c["cases"] if not x["ok"]]
        print(f"{n}: {len(c['cases']) - len(bad)}/{len(c['cases'])} correctness cases pass"
              + (f"; {c['error']}" if c.get("error") else "")
              + "".join(f"\n    FAIL {x['case']}: {x['message']}" for x in bad))
    result = {"checks": checks, "timings": rows, "wall_s": round(time.time() - t_start, 1)}
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "cutile_selfcheck.json").write_text(json.dumps(result, indent=1))
    print(f"selfcheck done in {result['wall_s']} s; tracebacks in {_log_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
