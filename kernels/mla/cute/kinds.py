"""The CuTe DSL MLA kernel kinds: the names a version can give ``version_functions``, the class
behind each, the combine kernel that merges its partials, and the predicates ``_cute_host``'s
compile and launch code asks about a kind.

Classes are imported on first use and only from the modules they live in (the DSL is needed only
to compile; the profiler detects a version's features in the kernel modules its run loaded), with
plain imports: the trust checker rejects dynamic ones.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["KINDS", "RING_PROBES", "TRACEABLE", "check_kind", "kernel_class", "combine_class", "computes_output",
           "takes_finals", "fused", "tail_balanced", "pair_exchange_global", "bf16_partials"]


#: the probe kinds of ``_cute_ringprobe.PROBES`` (v28_cute's ring with the math cut down, and the solo-softmax
#: schedule): no version names them; ``computes_output`` tells which still compute the right answer
RING_PROBES = tuple(f"sm90_seesaw_pair_ring_{k}" for k in (
    "stream", "streampf", "streammc", "serial", "stream3", "serial3", "stream1", "sonly", "nosoftmax", "finite", "scaled",
    "constp", "solo"))
#: the B-first pair kinds (``_cute_seesaw_bfirst``) and the persistent-loop kinds (``_cute_persistent``)
BFIRST_KINDS = ("sm90_seesaw_pair_bfirst", "sm90_seesaw_pair_bfirstfree", "sm90_seesaw_pair_bfirstm1",
                "sm90_seesaw_pair_bfirstpb", "sm90_seesaw_pair_bfirstpb9")
PERSISTENT_KINDS = ("sm90_seesaw_pair_persist", "sm90_seesaw_pair_persistql", "sm90_seesaw_pair_persistqe")
#: the kinds whose consumers reload the KV blocks they read last (``_cute_seesaw_rr``)
READER_RELOAD_KINDS = ("sm90_seesaw_pair_rr", "sm90_seesaw_pair_rrlate", "sm90_seesaw_pair_rrvr")
#: the kinds whose one-split shapes run the full waves whole and the last wave in balanced pieces
#: (``_cute_seesaw_tail``, planned by ``_cute_tail_plan``)
TAIL_KINDS = ("sm90_seesaw_pair_tail", "sm90_seesaw_pair_tail_lean", "sm90_seesaw_pair_tail_tmaout")
#: probe-only tail kinds (``_cute_tail_probe``): the tail grid with its merge, or its merge and partial O store,
#: or (v55_cute's merge) its bf16 O stores cut out (``computes_output`` False); no version names them
TAIL_PROBES = ("sm90_seesaw_pair_tail_nomerge", "sm90_seesaw_pair_tail_nostore", "sm90_seesaw_pair_tail_noout")
#: probe kinds that compute the right answer on ordinary inputs but lack a version's guarantees
#: (``_cute_seesaw_stale``: no fallback yet for a max rising by >~120 inside a pair); no version names them
PAIR_PROBES = ("sm90_seesaw_pair_stale", "sm90_seesaw_pair_stale_vr")
#: kinds whose launch is followed by a redo launch of an exact kind over the tiles it poisoned (v57_cute), and
#: that redo kind (``redo_kind``; its kernel runs only the flagged tiles): a guarded full grid that reads each
#: tile's lse, and for one-split (direct, unpaired) shapes a persistent loop over a per-tile flag list
REDO_KINDS = {"sm90_seesaw_pair_stale_redo": "sm90_seesaw_pair_c3early_redo",
              "sm90_seesaw_pair_stale_inline": "sm90_seesaw_pair_c3early_redo",
              "sm90_seesaw_pair_stale_tileredo": "sm90_seesaw_pair_c3early_redo"}
REDO_LIST_KINDS = {"sm90_seesaw_pair_stale_redo": "sm90_seesaw_pair_persist_redo"}
#: stale-max kinds whose one-split (direct, unpaired) kernel redoes its flagged tiles itself, in a second loop of
#: the persistent CTA (v58_cute): no redo launch there; their other shapes keep ``REDO_KINDS``' guarded launch
INLINE_REDO_KINDS = ("sm90_seesaw_pair_stale_inline", "sm90_seesaw_pair_stale_tileredo")
#: per-shape kinds (v59_cute): one kind for one-split (direct, unpaired) shapes, another for the rest -- resolved
#: by ``shape_kind`` once the split plan is known; ``kernel_class`` never sees them
SHAPE_KINDS = {"sm90_seesaw_pair_stale_onesplit": ("sm90_seesaw_pair_stale_redo", "sm90_seesaw_pair_c3early"),
               "sm90_seesaw_pair_stale_tileredo_onesplit": ("sm90_seesaw_pair_stale_tileredo",
                                                            "sm90_seesaw_pair_c3early"),
               # v61_cute: v59_cute's one-split kernel, v41_cute's (chunk 0 freed at S0, m0 before P_A) elsewhere
               "sm90_seesaw_pair_stale_onesplit_c3freem0": ("sm90_seesaw_pair_stale_redo",
                                                            "sm90_seesaw_pair_c3freem0"),
               # v62_cute: v58_cute's inline-redo one-split kernel (no redo launch), v35_cute's kernel elsewhere
               "sm90_seesaw_pair_stale_inline_onesplit": ("sm90_seesaw_pair_stale_inline", "sm90_seesaw_pair_c3early"),
               # v67_cute: v59_cute's one-split kernel, the row-block multicast pair elsewhere
               "sm90_seesaw_pair_stale_onesplit_mcast": ("sm90_seesaw_pair_stale_redo", "sm90_seesaw_pair_c3mcast")}
#: kinds with a timeline-probe twin ``<kind>_trace``: the same kernel with ``trace = True`` (``_cute_trace``)
TRACEABLE = ("sm90_seesaw_ownp_evict", "sm90_seesaw_pair_bf16", "sm90_seesaw_pair_soft1", "sm90_seesaw_pair_early",
             "sm90_seesaw_pair_vrfirst", "sm90_seesaw_pair_tmao", "sm90_seesaw_pair_ilp", "sm90_seesaw_pair_prov",
             "sm90_seesaw_pair_provfirst", "sm90_seesaw_pair_pinter", "sm90_seesaw_pair_c3", "sm90_seesaw_pair_c1",
             "sm90_seesaw_pair_c3early", "sm90_seesaw_pair_c3own", "sm90_seesaw_pair_c3split", "sm90_seesaw_pair_c3freea",
             "sm90_seesaw_pair_c3m0", "sm90_seesaw_pair_c3freem0", "sm90_seesaw_pair_c3pv", "sm90_seesaw_pair_c3m0pv",
             "sm90_seesaw_pair_c3mcast", *READER_RELOAD_KINDS, *BFIRST_KINDS, *PERSISTENT_KINDS, *PAIR_PROBES) + RING_PROBES
#: the kernel kinds ``check_kind`` accepts: the ones a version names, and the probe kinds (ring, tail and ``_trace``)
#: that only the probes run (``computes_output`` says which compute nothing right)
KINDS = ("sm80", "sm80_dedup", "sm90", "sm90_pvfirst", "sm90_lazy", "sm90_bf16p", "sm90_seesaw",
         "sm90_seesaw_chunked", "sm90_seesaw_fused", "sm90_seesaw_early", "sm90_seesaw_wcomb", "sm90_seesaw_pf",
         "sm90_seesaw_pf_pdl", "sm90_stagger", "sm90_stagger_evict", "sm90_stagger_ordered", "sm90_seesaw_ownp",
         "sm90_seesaw_ownp_evict", "sm90_seesaw_qregs", "sm90_seesaw_mcast", "sm90_seesaw_pair",
         "sm90_seesaw_pair_bf16", "sm90_seesaw_pair_l2", "sm90_seesaw_pair_soft1", "sm90_seesaw_pair_early",
         "sm90_seesaw_pair_vrfirst", "sm90_seesaw_pair_tmao", "sm90_seesaw_pair_ilp", "sm90_seesaw_pair_prov",
         "sm90_seesaw_pair_provfirst", "sm90_seesaw_pair_pinter", "sm90_seesaw_pair_c3", "sm90_seesaw_pair_c1",
         "sm90_seesaw_pair_c3early", "sm90_seesaw_pair_c3own",
         "sm90_seesaw_pair_c3split", "sm90_seesaw_pair_c3freea", "sm90_seesaw_pair_c3m0",
         "sm90_seesaw_pair_c3freem0", "sm90_seesaw_pair_c3pv", "sm90_seesaw_pair_c3m0pv", "sm90_seesaw_pair_c3mcast",
         *READER_RELOAD_KINDS, *BFIRST_KINDS, *PERSISTENT_KINDS, *TAIL_KINDS, *TAIL_PROBES,
         *PAIR_PROBES, *REDO_KINDS, *REDO_KINDS.values(), *REDO_LIST_KINDS.values(),
         *SHAPE_KINDS) + RING_PROBES + tuple(
             f"{k}_trace" for k in TRACEABLE)


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown CuTe MLA kernel kind {kind!r}; use one of {', '.join(repr(k) for k in KINDS)}.")


@functools.lru_cache(maxsize=None)
def _traced(cls: type) -> type:
    """``cls`` with the timeline probe switched on (one class per kind, so compiles are cached as usual)."""
    return type(f"{cls.__name__}Trace", (cls,), {
        "trace": True, "__module__": cls.__module__,
        "__doc__": f"{cls.__name__}'s kernel with the timeline probe (``_cute_trace``; not a version)."})


def computes_output(kind: str) -> bool:
    """False for a probe kind whose output means nothing (a ring probe with the math cut down)."""
    return getattr(kernel_class(kind), "computes_output", True)


def shape_kind(kind: str, *, one_split: bool) -> str:
    """The kind that runs a shape: a per-shape kind's (``SHAPE_KINDS``) one-split or other kind, else ``kind``."""
    pick = SHAPE_KINDS.get(kind)
    return kind if pick is None else pick[0 if one_split else 1]


def kernel_class(kind: str) -> Any:
    check_kind(kind)
    if kind in SHAPE_KINDS:
        raise ValueError(f"kernel kind {kind!r} picks a kernel per shape; resolve it with shape_kind(kind, "
                         "one_split=...) first.")
    if kind.endswith("_trace"):
        return _traced(kernel_class(kind.removesuffix("_trace")))
    if kind == "sm80":
        from kforge_kernels.mla.cute.sm80 import MlaSplitSm80

        return MlaSplitSm80
    if kind == "sm80_dedup":
        from kforge_kernels.mla.cute.sm80_dedup import MlaSplitSm80Dedup

        return MlaSplitSm80Dedup
    if kind.startswith("sm90_stagger"):
        from kforge_kernels.mla.cute import stagger as sg

        return {"sm90_stagger": sg.MlaSplitSm90Stagger, "sm90_stagger_evict": sg.MlaSplitSm90StaggerEvict,
                "sm90_stagger_ordered": sg.MlaSplitSm90StaggerOrdered}[kind]
    if kind.startswith("sm90_seesaw"):
        from kforge_kernels.mla.cute import seesaw as ss

        if kind == "sm90_seesaw_fused":
            from kforge_kernels.mla.cute.seesaw_fused import MlaSplitSm90SeesawFused

            return MlaSplitSm90SeesawFused
        if kind.startswith("sm90_seesaw_pair"):
            from kforge_kernels.mla.cute import seesaw_pair as sp
            from kforge_kernels.mla.cute import seesaw_soft1 as s1

            if kind in PERSISTENT_KINDS or kind in REDO_LIST_KINDS.values() or kind in INLINE_REDO_KINDS:
                from kforge_kernels.mla.cute import persistent as ps

                return {"sm90_seesaw_pair_persist": ps.MlaSplitSm90SeesawPersistent,
                        "sm90_seesaw_pair_persistql": ps.MlaSplitSm90SeesawPersistentQLast,
                        "sm90_seesaw_pair_persistqe": ps.MlaSplitSm90SeesawPersistentQEarly,
                        "sm90_seesaw_pair_persist_redo": ps.MlaSplitSm90SeesawPersistentRedo,
                        "sm90_seesaw_pair_stale_inline": ps.MlaSplitSm90SeesawPersistentStale,
                        "sm90_seesaw_pair_stale_tileredo": ps.MlaSplitSm90SeesawOneTileStale}[kind]
            if kind in BFIRST_KINDS:
                from kforge_kernels.mla.cute import seesaw_bfirst as bf

                return {"sm90_seesaw_pair_bfirst": bf.MlaSplitSm90SeesawPairBFirst,
                        "sm90_seesaw_pair_bfirstfree": bf.MlaSplitSm90SeesawPairBFirstFreeA,
                        "sm90_seesaw_pair_bfirstm1": bf.MlaSplitSm90SeesawPairBFirstM1,
                        "sm90_seesaw_pair_bfirstpb": bf.MlaSplitSm90SeesawPairBFirstPb,
                        "sm90_seesaw_pair_bfirstpb9": bf.MlaSplitSm90SeesawPairBFirstPb9}[kind]
            if kind in TAIL_KINDS + TAIL_PROBES:
                from kforge_kernels.mla.cute import seesaw_tail as tl

                return {"sm90_seesaw_pair_tail": tl.MlaSplitSm90SeesawPairTail,
                        "sm90_seesaw_pair_tail_lean": tl.MlaSplitSm90SeesawPairTailLean,
                        "sm90_seesaw_pair_tail_tmaout": tl.MlaSplitSm90SeesawPairTailTmaOut,
                        "sm90_seesaw_pair_tail_nomerge": tl.MlaSplitSm90SeesawPairTailNoMerge,
                        "sm90_seesaw_pair_tail_nostore": tl.MlaSplitSm90SeesawPairTailNoStore,
                        "sm90_seesaw_pair_tail_noout": tl.MlaSplitSm90SeesawPairTailNoOut}[kind]
            if kind in PAIR_PROBES or kind in REDO_KINDS or kind in REDO_KINDS.values():
                from kforge_kernels.mla.cute import seesaw_stale as st

                return {"sm90_seesaw_pair_stale": st.MlaSplitSm90SeesawPairStale,
                        "sm90_seesaw_pair_stale_vr": st.MlaSplitSm90SeesawPairStaleVr,
                        "sm90_seesaw_pair_stale_redo": st.MlaSplitSm90SeesawPairStaleRedo,
                        "sm90_seesaw_pair_c3early_redo": st.MlaSplitSm90SeesawPairC3EarlyRedo}[kind]
            if kind in READER_RELOAD_KINDS:
                from kforge_kernels.mla.cute import seesaw_rr as rr

                return {"sm90_seesaw_pair_rr": rr.MlaSplitSm90SeesawPairReaderReloads,
                        "sm90_seesaw_pair_rrlate": rr.MlaSplitSm90SeesawPairReaderReloadsLate,
                        "sm90_seesaw_pair_rrvr": rr.MlaSplitSm90SeesawPairReaderReloadsVrFirst}[kind]
            if kind.startswith("sm90_seesaw_pair_ring"):
                from kforge_kernels.mla.cute import ringprobe as rp

                return rp.PROBES[kind.removeprefix("sm90_seesaw_pair_ring_")]

            return {"sm90_seesaw_pair": sp.MlaSplitSm90SeesawPair,
                    "sm90_seesaw_pair_bf16": sp.MlaSplitSm90SeesawPairBf16,
                    "sm90_seesaw_pair_l2": sp.MlaSplitSm90SeesawPairL2,
                    "sm90_seesaw_pair_soft1": s1.MlaSplitSm90SeesawSoftFirst,
                    "sm90_seesaw_pair_early": sp.MlaSplitSm90SeesawPairEarlyRelease,
                    "sm90_seesaw_pair_vrfirst": sp.MlaSplitSm90SeesawPairVrFirst,
                    "sm90_seesaw_pair_tmao": sp.MlaSplitSm90SeesawPairTmaO,
                    "sm90_seesaw_pair_ilp": sp.MlaSplitSm90SeesawPairIlp,
                    "sm90_seesaw_pair_prov": sp.MlaSplitSm90SeesawPairProv,
                    "sm90_seesaw_pair_provfirst": sp.MlaSplitSm90SeesawPairProvFirst,
                    "sm90_seesaw_pair_pinter": sp.MlaSplitSm90SeesawPairPInter,
                    "sm90_seesaw_pair_c3": sp.MlaSplitSm90SeesawPairC3,
                    "sm90_seesaw_pair_c1": sp.MlaSplitSm90SeesawPairC1,
                    "sm90_seesaw_pair_c3early": sp.MlaSplitSm90SeesawPairC3Early,
                    "sm90_seesaw_pair_c3own": sp.MlaSplitSm90SeesawPairOwnChunks,
                    "sm90_seesaw_pair_c3split": sp.MlaSplitSm90SeesawPairOwnChunksSplit,
                    "sm90_seesaw_pair_c3freea": sp.MlaSplitSm90SeesawPairFreeA,
                    "sm90_seesaw_pair_c3m0": sp.MlaSplitSm90SeesawPairM0First,
                    "sm90_seesaw_pair_c3freem0": sp.MlaSplitSm90SeesawPairFreeAM0,
                    "sm90_seesaw_pair_c3pv": sp.MlaSplitSm90SeesawPairPvFirst,
                    "sm90_seesaw_pair_c3m0pv": sp.MlaSplitSm90SeesawPairM0PvFirst,
                    "sm90_seesaw_pair_c3mcast": sp.MlaSplitSm90SeesawPairMulticast}[kind]
        return {
            "sm90_seesaw": ss.MlaSplitSm90Seesaw, "sm90_seesaw_chunked": ss.MlaSplitSm90SeesawChunked,
            "sm90_seesaw_early": ss.MlaSplitSm90SeesawEarly,
            "sm90_seesaw_wcomb": ss.MlaSplitSm90SeesawChunked, "sm90_seesaw_pf": ss.MlaSplitSm90SeesawPrefetch,
            "sm90_seesaw_pf_pdl": ss.MlaSplitSm90SeesawPrefetchPdl, "sm90_seesaw_ownp": ss.MlaSplitSm90SeesawOwnP,
            "sm90_seesaw_ownp_evict": ss.MlaSplitSm90SeesawOwnPEvict, "sm90_seesaw_qregs": ss.MlaSplitSm90SeesawQRegs,
            "sm90_seesaw_mcast": ss.MlaSplitSm90SeesawMulticast,
        }[kind]
    from kforge_kernels.mla.cute import sm90 as sm

    return {"sm90": sm.MlaSplitSm90, "sm90_pvfirst": sm.MlaSplitSm90PvFirst, "sm90_lazy": sm.MlaSplitSm90Lazy,
            "sm90_bf16p": sm.MlaSplitSm90Bf16Partials}[kind]


def combine_class(kind: str) -> Any:
    """The combine kernel merging ``kind``'s split partials (not used when fused or direct)."""
    check_kind(kind)
    if bf16_partials(kind):
        from kforge_kernels.mla.cute.combine2 import MlaCombineOnePass

        return MlaCombineOnePass
    base = kind.removesuffix("_trace")  # a probe twin merges like its kind
    if base.startswith("sm90_seesaw_pair") or base in (
            "sm90_seesaw_wcomb", "sm90_seesaw_pf", "sm90_seesaw_pf_pdl", "sm90_stagger", "sm90_stagger_evict",
            "sm90_stagger_ordered", "sm90_seesaw_ownp", "sm90_seesaw_ownp_evict", "sm90_seesaw_qregs",
            "sm90_seesaw_mcast"):
        from kforge_kernels.mla.cute import combine3 as c3

        return c3.MlaCombineWarpRowsPdl if kind == "sm90_seesaw_pf_pdl" else c3.MlaCombineWarpRows
    from kforge_kernels.mla.cute.combine import MlaCombine

    return MlaCombine


def takes_finals(kind: str) -> bool:
    """Whether ``kind``'s kernel takes the final outputs and a counter too (the sm90 signature)."""
    return kind.startswith("sm90")


def redo_kind(kind: str, *, one_split: bool = False) -> str | None:
    """The exact kind whose launch follows ``kind``'s and recomputes the tiles it poisoned, or None: for a
    one-split (direct, unpaired) shape the persistent list redo, else the guarded full grid."""
    if one_split and kind in INLINE_REDO_KINDS:
        return None  # the kernel's own second loop
    return (REDO_LIST_KINDS if one_split and kind in REDO_LIST_KINDS else REDO_KINDS).get(kind)


def redo_only(kind: str) -> bool:
    """Whether ``kind`` is a redo kernel, launched only behind its stale-max kind (never as a call's kernel: its
    counter argument must be the redo flags, and a guarded grid reads outputs an earlier kernel wrote)."""
    return kind in REDO_KINDS.values() or kind in REDO_LIST_KINDS.values()


def writes_redo_flags(kind: str) -> bool:
    """Whether ``kind``'s one-split (direct, unpaired) kernel writes a per-tile redo flag through its counter
    argument, which must then be the zeroed flags (``_cute_host._redo_flags``), never a placeholder."""
    return kind in REDO_LIST_KINDS or kind in INLINE_REDO_KINDS


def fused(kind: str) -> bool:
    """Whether ``kind`` merges its splits in the kernel (no combine launch; needs zeroed counters)."""
    return kind == "sm90_seesaw_fused"


def tail_balanced(kind: str) -> bool:
    """Whether ``kind``'s one-split shapes run as a direct grid plus a balanced tail grid (``_cute_seesaw_tail``)."""
    return kind in TAIL_KINDS + TAIL_PROBES


def pair_exchange_global(kind: str) -> bool:
    """Whether ``kind``'s split pairs exchange O through global memory (a workspace in the counter argument)."""
    return kind == "sm90_seesaw_pair_l2"


def bf16_partials(kind: str) -> bool:
    """Whether ``kind`` writes bf16 split partials (merged by ``_cute_combine2``) instead of fp32."""
    return kind in ("sm90_lazy", "sm90_bf16p")
