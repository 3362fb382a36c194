"""Where v54_cute's spec time goes: its two grids timed alone and together, against v35_cute (GPU only).

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/tools/cute_tail_probe.py [--trial spec] [--rounds 30]

Times (the harness's clock, ``pytest_kforge.timing.median_device_us``, same inputs): v35_cute; v54_cute as it
runs (direct grid + tail grid); its direct grid over all tiles (the tail plan switched off: v35_cute's kernel with
the linear tile map); the direct grid's full waves alone; the tail grid alone; the tail's tiles whole through the
partial store and merge, and as many tiles whole through the direct grid (the difference is the merge path's cost
per tile); the tail grid alone and the tail tiles whole for the probe-only kinds of ``_cute_seesaw_tail`` (no
merge, no partial store, no bf16 O stores) and for v55_cute's and v56_cute's merges (run 20 in the devlog); and the
tail planned with other edge costs (``--edges``), alone and with the full waves.  If the two
grids overlapped perfectly, "both" would be about "full waves alone" + "tail alone" minus the time the tail's
first pieces run beside the last wave.  Prints one line per measurement and the plan's shape.  Outputs are not
checked here (the self-check and the suite do that).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: v54_cute's kind; the probe also runs its lean (v55_cute) and probe-only twins, ``<TAIL>_<variant>``
TAIL = "sm90_seesaw_pair_tail"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trial", default="spec")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--edges", type=float, nargs="*", default=[6.0, 10.0],
                    help="other edge costs (pages per piece) to plan and time the tail with")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import load_version
    from pytest_kforge.timing import median_device_us

    v35 = load_version("mla", "v35_cute", kernels_dir=ROOT / "kernels")
    v54 = load_version("mla", "v54_cute", kernels_dir=ROOT / "kernels")
    v55 = load_version("mla", "v55_cute", kernels_dir=ROOT / "kernels")
    v56 = load_version("mla", "v56_cute", kernels_dir=ROOT / "kernels")
    host = importlib.import_module("kforge_kernels.mla.cute.host")
    tp = importlib.import_module("kforge_kernels.mla.cute.tail_plan")
    params = dict(v54.spec.trials[args.trial])
    inputs = v54.spec.make_inputs(params, seed=7, device="cuda")
    outs = v54.spec.alloc_outputs(params, device="cuda")

    def t(version) -> float:
        return median_device_us(lambda: version(**inputs, **outs), rounds=args.rounds)

    def run_kind(kind: str):
        """A call of the tail kind ``kind`` with v54_cute's CONFIG (the probe kinds are no version)."""
        return lambda: host.run_split_combine(**inputs, **outs, config=v54.config, kind=kind, allow_direct=True)

    print(f"v35_cute            {t(v35):8.1f} us")
    print(f"v54_cute (both)     {t(v54):8.1f} us")
    print(f"v55_cute (both)     {t(v55):8.1f} us")
    print(f"v56_cute (both)     {t(v56):8.1f} us")
    def state_key(kind: str):
        """The key of ``kind``'s tail state (its plan and buffers; made by the kind's first call)."""
        return next(k for k in host._TAIL if k[0] == kind)

    plan = host._TAIL[state_key(TAIL)][0]
    lens = [p.p_end - p.p_begin for p in plan.pieces]
    print(f"plan: {plan.full} whole tiles, {len(plan.pieces)} pieces ({min(lens, default=0)}-{max(lens, default=0)} "
          f"pages), at most {plan.max_parts} per tile")
    n_tiles = plan.full + len({p.tile for p in plan.pieces})
    pages = max(p.p_end for p in plan.pieces)
    whole = tuple(tp.Piece(k, 0, pages, 0, 1) for k in range(plan.full, n_tiles))
    variants = [("all tiles direct", tp.TailPlan(n_tiles, ())), ("full waves alone", tp.TailPlan(plan.full, ())),
                ("tail grid alone", tp.TailPlan(0, plan.pieces)),
                # the tail's tiles whole, one CTA each, through the partial store and merge: that path's cost
                # against the plain grid's last wave (all tiles direct - full waves alone)
                ("tail whole, merged", tp.TailPlan(0, whole)),
                # the control for the line above: as many tiles, whole, through the direct grid's TMA-store
                # epilogue (every tile costs the same, so the first ones stand in for the tail's)
                ("same tiles direct", tp.TailPlan(n_tiles - plan.full, ()))]
    for edge in args.edges:
        try:
            alt = tp.plan_tail(n_tiles, pages, host.H200_SMS, edge)
        except ValueError as exc:
            print(f"edge {edge:g}: {exc}")
            continue
        variants += [(f"tail alone, edge {edge:g}", tp.TailPlan(0, alt.pieces)), (f"both, edge {edge:g}", alt)]
    b, m_blocks = params["b"], n_tiles // params["b"]

    def timed(kind: str, label: str, alt) -> None:
        # each variant gets its own counters and work table (the kernel reads the table, not the plan)
        fn = run_kind(kind)
        fn()  # compiles, and makes the kind's state
        k = state_key(kind)
        saved = host._TAIL[k]
        host._TAIL[k] = host.tail_buffers(alt, b, m_blocks, m_blocks * host.BLOCK_M, inputs["q"].device)
        try:
            print(f"{label:19s} {median_device_us(fn, rounds=args.rounds):8.1f} us  ({len(alt.pieces)} pieces)")
        finally:
            host._TAIL[k] = saved

    for label, alt in variants:
        timed(TAIL, label, alt)
    # the tail grid with its merge (nomerge), then also its partial O store (nostore), cut out; v55_cute's lean
    # merge, that merge without its bf16 O stores (noout) and with them through a TMA store (tmaout, v56_cute):
    # where a piece's ~14 us beyond a whole tile's go
    for kind in (f"{TAIL}_nomerge", f"{TAIL}_nostore", f"{TAIL}_lean", f"{TAIL}_noout", f"{TAIL}_tmaout"):
        short = kind.removeprefix(f"{TAIL}_")
        timed(kind, f"{short}: tail alone", tp.TailPlan(0, plan.pieces))
        timed(kind, f"{short}: whole", tp.TailPlan(0, whole))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
