"""Timeline probe of the seesaw split kernel on the GPU: where a CTA's time goes, pair by pair.

Run from the repository root on the GPU machine (CuTe DSL staged, see ``_cute_selfcheck``):

    source /tmp/kforge-gpu/env.sh && python3 kernels/mla/tools/cute_trace.py --trial spec \\
        --kind sm90_seesaw_ownp_evict_trace [--json $OUT/trace-spec.json]

A ``*_trace`` kind is a version's kernel (v19_cute's, v23_cute's) whose warpgroup thread 0 writes
the SM clock (``%clock``) at ten points of every pair of pages and whose producer writes it when
a page's first and last slot came free (``_cute_seesaw._ev``, ``_cute_sm90._stamp``).  The probe
runs the trial's inputs after an L2 flush, checks the output against the float32 reference (a
probe that broke the kernel reports nothing), times the probed kernel against its parent, and
prints medians over CTAs and over pairs 1 .. n-2 (no pipeline fill or drain) of:

* per CTA: start -> Q landed, -> first pair, the page loop, the epilogue (and pair merge);
* the pair period and each event's offset from the pair's start (WG0 event 0), per warpgroup;
* when the producer got the slots of the pair's next pages, relative to the same start.

Cycles are SM clocks; microseconds use the clock the kernel counted (cycles over the global
timer), else NVML's reading.  A ring probe kind with the math taken out or cut down
(``_cute_ringprobe``, ``computes_output = False``) is not checked against the reference -- it
computes nothing right -- and also prints the KV bytes per cycle per SM its pairs moved; ``--b`` / ``--splits`` run it on
fewer SMs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EVENTS = {
    0: ("pair start", "pair start"),
    1: ("S_A issued (blocks landed)", "S_B issued (blocks landed)"),
    2: ("S_A done", "S_B done"),
    3: ("P_A published", "P_A arrived"),
    4: ("P_A V_AL issued", "P_A V_AR issued"),
    5: ("P_B arrived", "P_B published"),
    6: ("P_A V_AL done", "P_A V_AR done"),
    7: ("P_B V_BL done", "P_B V_BR done"),
    8: ("softmax A arithmetic done", "softmax B arithmetic done"),
    9: ("P_A stored + fenced", "P_B stored + fenced"),
}
#: tensor-pipe cycles of one pair at sm_90's dense bf16 rate (2048 FMA per clock per SM):
#: 2 x S (64 x 64 x 576) + 4 x P V (64 x 256 x 64) = 2 x 1152 + 4 x 512
IDEAL_PAIR_CYCLES = 4352


def _wrap(x):
    """Differences of 32-bit clock words as signed cycles (the counter wraps every ~2 s)."""
    import numpy as np

    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32) - 2**31


def _gaps(later, earlier):
    """``later - earlier`` in cycles, NaN where either word was never written (a CTA of a short
    split has fewer pairs; the buffer starts zeroed)."""
    import numpy as np

    d = _wrap(np.asarray(later) - np.asarray(earlier)).astype(float)
    d[(np.asarray(later) == 0) | (np.asarray(earlier) == 0)] = np.nan
    return d


def analyse(recs, n_pages: int, labels: dict[int, tuple[str, str]] | None = None) -> dict:
    """Medians of the probe's records (``[ctas, TRACE_PER_CTA]`` int32) for CTAs of ``n_pages`` pages.

    ``labels``: a kind's own names for events whose meaning its schedule changed (its class's ``trace_events``,
    e.g. event 5 is m1, not P_B, in the B-first pair with ``m1_first``), over ``EVENTS``.
    """
    import numpy as np

    from kforge_kernels.mla.cute.trace_layout import TRACE_EVENTS, TRACE_HDR, TRACE_PAGES, TRACE_PAIRS, TRACE_PROD

    recs = np.asarray(recs, dtype=np.int64)
    # a persistent grid writes only its CTAs' records (each CTA's last tile); the rest of the buffer,
    # sized for one CTA per tile, stays zero and would read as zero-length spans
    recs = recs[recs[:, 0] != 0] if (recs[:, 0] != 0).any() else recs
    n_pairs = min((n_pages + 1) // 2, TRACE_PAIRS)
    ev = recs[:, TRACE_HDR:TRACE_PROD].reshape(-1, 2, TRACE_PAIRS, TRACE_EVENTS)
    prod = recs[:, TRACE_PROD:].reshape(-1, TRACE_PAGES, 2)
    start = ev[:, 0, :, 0]  # [cta, pair]: WG0's pair start
    mid = list(range(1, n_pairs - 1))  # no pipeline fill (pair 0) or drain (the last)
    med = lambda a: float(np.nanmedian(a))  # noqa: E731
    out: dict = {"ctas": int(recs.shape[0]), "pairs": n_pairs}
    hdr = recs[:, :TRACE_HDR]
    out["cta"] = {
        "start_to_q_landed": med(_wrap(hdr[:, 2] - hdr[:, 0])),
        "q_landed_to_first_pair": med(_wrap(start[:, 0] - hdr[:, 2])),
        "page_loop": med(_wrap(hdr[:, 4] - start[:, 0])),
        "epilogue": med(_wrap(hdr[:, 6] - hdr[:, 4])),
        "total": med(_wrap(hdr[:, 6] - hdr[:, 0])),
    }
    # the SM clock inside the kernel: WG0's cycles over its global-timer nanoseconds, per CTA
    ns = _wrap(hdr[:, 9] - hdr[:, 8])
    ok = ns > 0
    out["sm_mhz_in_kernel"] = med(_wrap(hdr[ok, 6] - hdr[ok, 0]) * 1000.0 / ns[ok]) if ok.any() else None
    out["pair_period"] = med(_gaps(start[:, 2:n_pairs], start[:, 1:n_pairs - 1])) if n_pairs > 2 else None
    names = {**EVENTS, **(labels or {})}
    rows = []
    for wg in (0, 1):
        for e in range(TRACE_EVENTS if mid else 0):  # a split of 1-2 pairs has no middle pair
            d = _gaps(ev[:, wg, mid, e], start[:, mid])
            if np.isnan(d).all():
                continue  # an event this kind does not stamp (the ring probe's)
            rows.append({"wg": wg, "event": e, "name": names[e][wg], "median": med(d),
                         "p10": float(np.nanpercentile(d, 10)), "p90": float(np.nanpercentile(d, 90))})
    out["events"] = rows
    # the producer got page 2k+2 (next A) and 2k+3 (next B)'s slots: offsets from pair k's start
    got = {}
    for name, off, j in (("next A first slot", 2, 0), ("next A last slot", 2, 1),
                         ("next B first slot", 3, 0), ("next B last slot", 3, 1)):
        ks = [k for k in mid if 2 * k + off < min(n_pages, TRACE_PAGES)]
        d = _gaps(prod[:, [2 * k + off for k in ks], j], start[:, ks]) if ks else None
        if d is not None and not np.isnan(d).all():  # a kind whose consumers reload (v51_cute) has no producer words
            got[name] = med(d)
    out["producer"] = got
    return out


def _print(res: dict, mhz: float) -> None:
    inside = res.get("sm_mhz_in_kernel")
    # microseconds at the clock the SMs counted (NVML can read the boost clock meanwhile: run 10)
    at = inside or mhz
    us = lambda c: c / at  # noqa: E731 - cycles at `at` MHz -> microseconds
    print(f"{res['ctas']} CTAs, {res['pairs']} traced pairs each; SM clock {mhz:.0f} MHz (NVML)"
          + (f", {inside:.0f} MHz inside the kernel (cycles / global timer; microseconds below use it)"
             if inside else ""))
    for k, v in res["cta"].items():
        print(f"  {k:<24} {v:9.0f} cyc {us(v):7.2f} us")
    if res["pair_period"]:
        p = res["pair_period"]
        print(f"  pair period {p:.0f} cyc ({us(p):.2f} us); tensor work {IDEAL_PAIR_CYCLES} cyc "
              f"-> {100 * IDEAL_PAIR_CYCLES / p:.0f}% of the pair")
    print("  event offsets from the pair start (cycles, median [p10, p90]):")
    for r in res["events"]:
        print(f"    WG{r['wg']} e{r['event']} {r['name']:<28} {r['median']:7.0f} [{r['p10']:6.0f}, {r['p90']:6.0f}]")
    for k, v in res["producer"].items():
        print(f"  producer: {k:<20} {v:7.0f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", default="spec", choices=("decode", "spec"))
    ap.add_argument("--kind", default="sm90_seesaw_ownp_evict_trace")
    ap.add_argument("--parent", default="", help="version to time against (default: none)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--splits", type=int, default=0, help="KV splits instead of the planned count")
    ap.add_argument("--b", type=int, default=0, help="sequences instead of the trial's (fewer CTAs: SMs left idle)")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import math

    import numpy as np
    import torch

    from pytest_kforge.registry import load_version

    spec = load_version("mla", "v0", kernels_dir=ROOT / "kernels").spec  # makes kforge_kernels importable
    from kforge_kernels.mla.cute import host as host
    from kforge_kernels.mla.cute import kinds as kinds
    from kforge_kernels.mla.cute.trace_layout import TRACE_PER_CTA
    from pytest_kforge.gpuclock import reader_for
    from pytest_kforge.spec import compare_outputs, poison_
    from pytest_kforge.timing import CudaClock, median_device_us

    if not args.kind.endswith("_trace"):
        print(f"ERROR: {args.kind!r} is not a probe kind; use one of "
              f"{', '.join(k for k in kinds.KINDS if k.endswith('_trace'))}.")
        return 2
    params = dict(spec.trials[args.trial])
    if args.b:
        params["b"] = args.b
    # a ring probe with the math cut down computes nothing: its output is not checked, only its timeline read
    computes = kinds.computes_output(args.kind)
    config = dict(host.SEESAW_CONFIG, **({"num_splits": args.splits} if args.splits else {}))
    inputs = spec.make_inputs(params, seed=1, device="cuda")
    outs = spec.alloc_outputs(params, device="cuda")
    b, s, h = params["b"], params["s"], params["h"]
    m_blocks = math.ceil(s * h / host.BLOCK_M)
    n_pages_total = math.ceil(params["t"] / host.PAGE)
    splits, _, _ = host.split_plan(args.kind, host.choose_splits(b * m_blocks, n_pages_total, config))
    n_pages = math.ceil(n_pages_total / splits)
    buf = torch.zeros(b * m_blocks * splits * TRACE_PER_CTA, dtype=torch.int32, device="cuda")

    def launch():
        host.run_split_combine(inputs["q"], inputs["kv_cache"], inputs["block_table"], inputs["cache_seqlens"],
                               inputs["softmax_scale"], outs["out"], outs["lse"], config, args.kind,
                               allow_direct=True, trace_buf=buf)

    launch()  # compile + warm
    ref = spec.reference(inputs)
    clock = CudaClock()
    reader = reader_for("cuda")
    results, mhz = [], []
    for _ in range(args.rounds):
        poison_(outs)
        buf.zero_()
        torch.cuda.synchronize()
        clock.flush()
        launch()
        if reader is not None:  # while the kernel runs
            mhz.append(reader.sample()[0])
        torch.cuda.synchronize()
        bad = [r for r in (compare_outputs(n, outs[n], ref[n], spec.tolerances[n]) for n in spec.output_names)
               if not r.ok]
        if bad and computes:
            print(f"ERROR: the probed kernel is wrong ({bad[0].message}); its timeline would mean nothing.")
            return 1
        results.append(buf.view(-1, TRACE_PER_CTA).cpu().numpy().copy())
    recs = np.concatenate(results)
    res = analyse(recs, n_pages, getattr(kinds.kernel_class(args.kind), "trace_events", None))
    res.update(kind=args.kind, trial=args.trial, b=b, splits=splits, pages_per_cta=n_pages, rounds=args.rounds)
    if res["pair_period"] and not computes:
        # what the ring alone moved: two 64 x 576 bf16 pages per pair
        res["ring_bytes_per_cycle_per_sm"] = 2 * host.PAGE * host.D_QK * 2 / res["pair_period"]
    res["probe_us"] = median_device_us(launch, rounds=30)
    if args.parent:
        v = load_version("mla", args.parent, kernels_dir=ROOT / "kernels")
        res["parent"] = args.parent
        res["parent_us"] = median_device_us(lambda: v(**inputs, **outs), rounds=30)
    res["sm_mhz"] = float(np.median(mhz)) if mhz else 1980.0
    print(f"probe {args.kind} on {args.trial}: {res['probe_us']:.1f} us"
          + (f" ({args.parent} {res['parent_us']:.1f} us)" if args.parent else "")
          + f"; {splits} split(s), {n_pages} pages per CTA")
    _print(res, res["sm_mhz"])
    if "ring_bytes_per_cycle_per_sm" in res:
        print(f"  KV moved: {res['ring_bytes_per_cycle_per_sm']:.1f} B/cycle per SM ({b} sequences)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
