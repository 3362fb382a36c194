"""Small tuning sweep of the cuTile MLA versions on the GPU, in one call (< 5 minutes).

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/tools/cutile_sweep.py [--only v6] [--budget 240]

The issue's tuning policy: a few manual variants first (v3 and v11's combine geometries lead, so
they are timed before the budget runs out), then a small sweep of the most sensitive knob (the
decode split count ``NUM_SPLITS``, a runtime argument, so no recompiles; on v8 and v6), no autotune.
Phase 1 checks every variant in its own process, all in parallel (tileiras compiles overlap and
fill cuTile's disk cache): 2 small fuzz shapes + both trials against ``SPEC.reference``, outputs
NaN-poisoned first.  Phase 2 times the trials of the correct variants one at a time with the
harness's clock (``pytest_kforge.timing.median_device_us``: 3 warm-ups, 30 rounds, each with an
L2 flush and a spin kernel before the start event, median).  No new variant is timed once ``--budget`` seconds have passed; the
skipped ones are reported.  Writes ``$OUT/cutile_sweep.json`` and a log of tracebacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
# (version, config overrides, why) -- manual variants first, then the NUM_SPLITS sweep
# v3 and v11 first: they are timed first, so a tight --budget still compares them.
MANUAL: list[tuple[str, dict[str, Any], str]] = [
    ("v3", {}, "baseline (2 launches: main + combine)"),
    ("v11", {}, "v3 main + TMA combine 64x256 at occupancy 1 (decode: 128 CTAs, 64 KB read each)"),
    ("v11", {"COMBINE_ROWS": 32, "COMBINE_COLS": 128}, "v11 combine 32x128 at occupancy 4 (512 CTAs, 16 KB read each)"),
    ("v11", {"COMBINE_ROWS": 32, "COMBINE_COLS": 256}, "v11 combine 32x256 at occupancy 2 (256 CTAs, 32 KB read each)"),
    ("v11", {"COMBINE_ROWS": 16, "COMBINE_COLS": 512}, "v11 combine in v3's 16x512 tiles: one-loop/TMA change alone"),
    ("v8", {}, "128-row tiles on 2-CTA clusters, TMA multicast of KV"),
    ("v8", {"COMBINE_COLS": 64}, "v8, fused combine in 64-column steps"),
    ("v8", {"LAZY": "never"}, "v8 without the lazy-rescale branch (its max is cluster-wide)"),
    ("v8", {"KV_LATENCY": 4}, "v8, KV load latency hint 4"),
    ("v8", {"BLOCK_H": 256, "NUM_CTAS": 4}, "4-CTA clusters, each page multicast to 256 rows (spec; decode stays 2)"),
    ("v5", {}, "fused combine, 1 launch"),
    ("v6", {}, "v5 + lazy rescale on 1-split launches (spec)"),
    ("v6", {"LAZY": "always"}, "lazy rescale on decode too (tileiras drops warp specialisation)"),
    ("v6", {"RESCALE_TH": 0.0}, "branch cost: rescale whenever the max grows"),
    ("v6", {"KV_LATENCY": 4}, "KV load latency hint 4"),
    ("v6", {"KV_LATENCY": 8}, "KV load latency hint 8"),
    ("v5", {"COMBINE_COLS": 128}, "fused combine in 128-column steps (24 B spill)"),
    ("v7", {}, "v6 + next page's QK^T before the softmax (no warp specialisation)"),
    ("v7", {"PIPE_QK": "late"}, "v6 + next page's QK^T after the P.V (no warp specialisation)"),
]
SWEEP: list[tuple[str, dict[str, Any], str]] = [
    ("v8", {"NUM_SPLITS": n}, f"decode split count {n} ({32 * n} clusters of 2 CTAs)") for n in (1, 4)
] + [("v6", {"NUM_SPLITS": n}, f"decode split count {n} ({2 * 32 * n} CTAs)") for n in (1, 4, 8)]
VARIANTS = MANUAL + SWEEP
FUZZ = [(3, 1, 128, [77, 4096, 515]), (2, 16, 64, [4033, 100])]  # split path with empty splits; s=16 causal
REPS = 30
CHILD_TIMEOUT_S = 200


def _out_dir() -> Path:
    """$OUT on the device machine; elsewhere the temp dir (never litter the checkout)."""
    return Path(os.environ.get("OUT") or tempfile.gettempdir())


def _log(text: str) -> None:
    with open(_out_dir() / "cutile_sweep.log", "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _label(version: str, over: dict[str, Any]) -> str:
    return version + ("" if not over else ":" + ",".join(f"{k}={v}" for k, v in sorted(over.items())))


def _mla():
    sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import Registry

    return Registry(ROOT / "kernels").kernel("mla")


def child(index: int) -> dict[str, Any]:
    """Correctness of variant ``index`` (run in its own process; compiles land in the disk cache)."""
    import torch

    from pytest_kforge.spec import poison_

    version, over, _ = VARIANTS[index]
    mla = _mla()
    v = mla.version(version)
    spec = mla.spec
    cfg = {**v.config, **over}
    todo = [(f"fuzz-b{b}-s{s}-h{h}-t{max(ls)}", {"b": b, "s": s, "h": h, "t": max(ls)}, ls) for b, s, h, ls in FUZZ]
    todo += [(n, dict(spec.trials[n]), None) for n in spec.default_trials]
    cases = []
    for i, (name, params, lens) in enumerate(todo):
        t0 = time.time()
        try:
            inputs = spec.make_inputs(params, seed=2000 + i, device="cuda", seqlens=lens)
            outputs = spec.alloc_outputs(params, device="cuda")
            poison_(outputs)
            v.fn(**inputs, **outputs, config=cfg)
            poison_(outputs)  # the second call is checked: the fused combine's counters must wrap
            v.fn(**inputs, **outputs, config=cfg)
            torch.cuda.synchronize()
            res = spec.compare(outputs, spec.reference(inputs))
            ok, msg = all(r.ok for r in res), "; ".join(r.message for r in res if not r.ok)
            errs = {r.name: [r.max_abs, r.rel_l2] for r in res}
        except Exception as exc:  # noqa: BLE001 - report and go on
            ok, errs, msg = False, {}, f"{type(exc).__name__}: {exc}"
            _log(f"=== {_label(version, over)} {name}\n{traceback.format_exc()}")
        cases.append({"case": name, "ok": ok, "errors": errs, "message": msg[:400], "secs": round(time.time() - t0, 1)})
    return {"index": index, "cases": cases}


def time_call(fn: Any, inputs: dict[str, Any], outputs: dict[str, Any], cfg: dict[str, Any]) -> float:
    """Median device time (us) with the harness's clock (``pytest_kforge.timing.median_device_us``).

    Before run 5 this recorded the start event right after an L2-flush write and then launched, so
    the host's launch time was inside every sample (the run-2 sweep's figures are inflated by it).
    """
    from pytest_kforge.timing import median_device_us

    return median_device_us(lambda: fn(**inputs, **outputs, config=cfg), rounds=REPS)


def _print_table(rows: list[dict[str, Any]], key: str) -> None:
    print(f"\n--- sorted by {key} us (floor decode 46.2, spec 739; v3 recorded 103.7 / 1220.0)")
    print(f"{'variant':<44}{'ok':<6}{'decode us':>10}{'spec us':>10}  note")
    done = [r for r in rows if r.get(key) is not None]
    for r in sorted(done, key=lambda r: r[key]) + [r for r in rows if r.get(key) is None]:
        print(f"{r['variant']:<44}{str(r['ok']):<6}{r.get('decode') or '-':>10}{r.get('spec') or '-':>10}  "
              f"{r['why']}{'  ERROR ' + r['error'] if r.get('error') else ''}")


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        print(json.dumps(child(int(argv[1]))))
        return 0
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("ERROR: no CUDA device here; run the sweep on the H200 (source /tmp/kforge-gpu/env.sh first)")
        return 2
    t_start = time.time()
    budget = float(argv[argv.index("--budget") + 1]) if "--budget" in argv else 240.0
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None
    _out_dir().mkdir(parents=True, exist_ok=True)
    (_out_dir() / "cutile_sweep.log").write_text("")
    todo = [i for i, (ver, _, _) in enumerate(VARIANTS) if only is None or ver in only]
    # ---- phase 1: correctness + compiles, one process per variant, in parallel; the manual
    # variants first, then the NUM_SPLITS sweep (it reuses their compiled kernels from the disk cache)
    checks: dict[int, dict[str, Any]] = {}
    skipped: list[str] = []
    for group in ([i for i in todo if i < len(MANUAL)], [i for i in todo if i >= len(MANUAL)]):
        if group and time.time() - t_start > budget:  # no new variants once the budget is spent
            for i in group:
                checks[i] = {"cases": [], "error": "skipped: time budget spent before its correctness check"}
                skipped.append(_label(*VARIANTS[i][:2]))
            continue
        procs = {i: subprocess.Popen([sys.executable, str(HERE), "--child", str(i)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=str(ROOT)) for i in group}
        for i, p in procs.items():
            try:
                out, err = p.communicate(timeout=max(5.0, CHILD_TIMEOUT_S - (time.time() - t_start)))
                if err.strip():
                    _log(f"=== child {_label(*VARIANTS[i][:2])} stderr\n{err}")
                checks[i] = json.loads(out.strip().splitlines()[-1]) if p.returncode == 0 and out.strip() else {
                    "cases": [], "error": f"child exited {p.returncode}: {err.strip()[-300:]}"}
            except subprocess.TimeoutExpired:
                p.kill()
                checks[i] = {"cases": [], "error": f"correctness child timed out after {CHILD_TIMEOUT_S}s"}
            except Exception as exc:  # noqa: BLE001
                checks[i] = {"cases": [], "error": f"{type(exc).__name__}: {exc}"}
    print(f"phase 1 (correctness + compiles) done at {time.time() - t_start:.0f} s")
    # ---- phase 2: timings, sequential, correct variants only
    mla = _mla()
    spec = mla.spec
    trial_inputs: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for i in todo:
        version, over, why = VARIANTS[i]
        c = checks[i]
        ok = bool(c["cases"]) and all(x["ok"] for x in c["cases"])
        row: dict[str, Any] = {"variant": _label(version, over), "version": version, "config": over, "why": why,
                               "ok": ok, "cases": c["cases"], "error": c.get("error"), "decode": None, "spec": None}
        if c.get("error") is None and not ok:
            row["error"] = "; ".join(f"{x['case']}: {x['message']}" for x in c["cases"] if not x["ok"])[:300]
        if not ok:
            rows.append(row)
            continue
        if time.time() - t_start > budget:
            row["error"] = "skipped: time budget spent"
            skipped.append(row["variant"])
            rows.append(row)
            continue
        try:
            v = mla.version(version)
            cfg = {**v.config, **over}
            for trial in spec.default_trials:
                params = dict(spec.trials[trial])
                if trial not in trial_inputs:
                    trial_inputs[trial] = spec.make_inputs(params, seed=7, device="cuda")
                outputs = spec.alloc_outputs(params, device="cuda")
                row[trial] = round(time_call(v.fn, trial_inputs[trial], outputs, cfg), 1)
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            _log(f"=== timing {row['variant']}\n{traceback.format_exc()}")
        rows.append(row)
        print(f"timed {row['variant']}: decode {row['decode']} us, spec {row['spec']} us ({time.time() - t_start:.0f} s)")
    for key in ("decode", "spec"):
        _print_table(rows, key)
    best = {}
    for key in ("decode", "spec"):
        timed = [r for r in rows if r["ok"] and r.get(key) is not None]
        if timed:
            b = min(timed, key=lambda r: r[key])
            best[key] = {"variant": b["variant"], "us": b[key]}
            print(f"BEST {key}: {b['variant']} {b[key]} us")
    if skipped:
        print(f"skipped (budget {budget:.0f} s spent): {', '.join(skipped)}")
    result = {"variants": rows, "best": best, "skipped": skipped, "wall_s": round(time.time() - t_start, 1)}
    (_out_dir() / "cutile_sweep.json").write_text(json.dumps(result, indent=1))
    print(f"sweep done in {result['wall_s']} s; json + log in {_out_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
