"""GPU self-check of the CuTe DSL MLA versions, in one device call (< 4 minutes with compiles).

Run from the repository root on the GPU machine:

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/_cute_selfcheck.py [--versions v1_cute,v2_cute]

For every ``v*_cute.py`` version: small fuzz shapes (ragged lengths, shuffled pages, s 1..16,
h 16..128, forced split counts with empty splits) and the two trial configs are checked against
``SPEC.reference`` with outputs NaN-poisoned first; then the trials are timed with CUDA events
(warm-up, L2 flushed by writing a 256 MB buffer before every rep, median of 30).  Prints a
compact table and writes ``$OUT/cute_selfcheck.json`` when ``OUT`` is set.  A failing version
prints its full traceback and the script goes on with the next one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BUDGET_S = 220.0  # stop starting new checks after this, to stay under 4 minutes
FUZZ = [  # (b, s, h, seqlens or None, config overrides)
    (3, 1, 128, [1, 63, 5000], {}),
    (4, 16, 128, [16, 65, 1000, 4097], {"num_splits": 5}),
    (2, 1, 16, [777, 64], {}),
    (3, 3, 32, [3, 130, 2049], {"num_splits": 3}),
    (2, 5, 64, [300, 5], {}),
]
TRIALS = ("decode", "spec")


def _check(version, spec, params, seqlens, cfg, seed):
    import torch

    from pytest_kforge.spec import compare_outputs, poison_

    inputs = spec.make_inputs(params, seed=seed, device="cuda", seqlens=seqlens)
    outs = spec.alloc_outputs(params, device="cuda")
    poison_(outs)
    version(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    ref = spec.reference(inputs)
    res = [compare_outputs(n, outs[n], ref[n], spec.tolerances[n]) for n in spec.output_names]
    return all(r.ok for r in res), {r.name: {"max_abs": r.max_abs, "rel_l2": r.rel_l2, "msg": r.message} for r in res}


def _time(version, spec, params, cfg, reps=30):
    import torch

    inputs = spec.make_inputs(params, seed=7, device="cuda")
    outs = spec.alloc_outputs(params, device="cuda")
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    for _ in range(3):
        version(config=cfg, **inputs, **outs)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.fill_(1.0)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        version(config=cfg, **inputs, **outs)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main() -> int:
    import torch

    from pytest_kforge.registry import load_version
    from pytest_kforge.spec import Roofline

    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", default="", help="comma list; default: every v*_cute.py")
    ap.add_argument("--no-fuzz", action="store_true")
    args = ap.parse_args()
    kdir = ROOT / "kernels"
    names = args.versions.split(",") if args.versions else sorted(p.stem for p in (kdir / "mla").glob("v*_cute.py"))
    t0 = time.time()
    roof = Roofline()
    rows, report = [], {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "versions": {}}
    for name in names:
        entry = report["versions"].setdefault(name, {"fuzz": [], "trials": [], "error": None})
        try:
            v = load_version("mla", name, kernels_dir=kdir)
            spec = v.spec
            cases = [] if args.no_fuzz else list(FUZZ)
            for i, (b, s, h, lens, cfg) in enumerate(cases):
                if time.time() - t0 > BUDGET_S:
                    entry["fuzz"].append({"case": i, "skipped": "time budget"})
                    continue
                params = {"b": b, "s": s, "t": max(lens), "h": h}
                why = v.supports(params)
                if why:
                    entry["fuzz"].append({"case": i, "params": params, "unsupported": why})
                    continue
                tc = time.time()
                ok, errs = _check(v, spec, params, lens, cfg, seed=100 + i)
                entry["fuzz"].append({"case": i, "params": params, "seqlens": lens, "config": cfg, "ok": ok,
                                      "errors": errs, "wall_s": round(time.time() - tc, 1)})
                print(f"{name} fuzz {params} lens={lens} cfg={cfg}: {'ok' if ok else 'FAIL'} "
                      f"{ {k: (round(e['max_abs'], 4), round(e['rel_l2'], 5)) for k, e in errs.items()} }"
                      f" ({time.time() - tc:.1f}s)", flush=True)
                if not ok:
                    print("   ", "; ".join(e["msg"] for e in errs.values()), flush=True)
            for trial in TRIALS:
                params = dict(spec.trials[trial])
                if time.time() - t0 > BUDGET_S:
                    entry["trials"].append({"trial": trial, "skipped": "time budget"})
                    continue
                ok, errs = _check(v, spec, params, None, {}, seed=1)
                us = _time(v, spec, params, {}) if ok else float("nan")
                flops, nbytes = spec.flops(params), spec.min_bytes(params)
                floor_us = roof.floor_s(flops, nbytes) * 1e6
                rec = {"trial": trial, "params": params, "ok": ok, "errors": errs, "median_us": us,
                       "tflops": flops / us / 1e6 if ok else None, "floor_us": floor_us,
                       "pct_floor": 100 * floor_us / us if ok else None}
                entry["trials"].append(rec)
                rows.append((name, trial, ok, errs, us, rec["tflops"], rec["pct_floor"]))
                print(f"{name} {trial}: {'ok' if ok else 'FAIL'} median {us:.1f} us", flush=True)
        except Exception:  # noqa: BLE001 - report and continue with the next version
            tb = traceback.format_exc()
            entry["error"] = tb
            print(f"===== {name} raised =====\n{tb}", flush=True)
    print(f"\n{'version':10} {'trial':7} {'ok':5} {'out max/rel':>18} {'lse max/rel':>18} {'us':>9} {'TFLOP/s':>8} {'%floor':>7}")
    for name, trial, ok, errs, us, tf, pct in rows:
        o, l_ = errs["out"], errs["lse"]
        print(f"{name:10} {trial:7} {str(ok):5} {o['max_abs']:8.3g}/{o['rel_l2']:<9.2g} {l_['max_abs']:8.3g}/{l_['rel_l2']:<9.2g}"
              f" {us:9.1f} {tf or float('nan'):8.1f} {pct or float('nan'):7.1f}")
    print(f"total wall {time.time() - t0:.0f} s")
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "cute_selfcheck.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
