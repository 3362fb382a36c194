"""Compile the CuTe DSL MLA kernels for sm_90a WITHOUT a GPU and report registers / spills.

Needs Python 3.12 with the DSL importable (the wheels ship cp312 binaries) and, for the
register report, a ``ptxas`` on PATH.  Example (from the repository root):

    CUTE_DSL_ARCH=sm_90a /tmp/venv-cute/bin/python kernels/mla/_cute_compilecheck.py \\
        sm80:1:128 sm80_dedup:16:128:direct sm80_dedup:5:32

Each argument is ``kind:s:h[:direct][:paired]`` (decode runs the ``sm90_seesaw_pair*`` kinds as
``kind:1:128:direct:paired``, spec as ``kind:16:128:direct``).  Every line also lists a named barrier that sits at more
than one place in the PTX (``_cute_ptxreplay.barrier_sites``): legitimate for separate sync points
(v4_cute's ``bar.sync 1 x3``, v10_cute's ``bar.sync 6 x3``), a hang when a per-thread branch splits
a warp between two copies of one barrier (run 9's probe) -- read the branch above each site.  It fails
on wgmma instructions that ptxas serialises (``_cute_ptxas.serialized_wgmma``: the C75xx "Potential Performance
Loss" notes), and for ``sm80_dedup`` it also replays the P-exchange shared-memory addresses of all 256
threads from the PTX (``_cute_ptxreplay``) and fails if any is off.  The DSL's NVVM emits PTX ISA 9.4; an older local
ptxas (13.0 accepts 9.0) is fed the same text with the version line lowered, which is fine for a
resource estimate but is not the binary the GPU runs.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    os.environ["KFORGE_CUTE_OPTIONS"] = (os.environ.get("KFORGE_CUTE_OPTIONS", "") + " --keep-ptx").strip()
    pkg = types.ModuleType("kforge_kernels")
    pkg.__path__ = [str(ROOT / "kernels")]  # type: ignore[attr-defined]
    sys.modules.setdefault("kforge_kernels", pkg)
    from kforge_kernels.mla import _cute_host as host
    from kforge_kernels.mla._cute_ptxas import ptxas_report, sass_loop_report

    bad = 0
    tmp = Path(tempfile.mkdtemp(prefix="cute_ptx_"))
    os.chdir(tmp)  # --keep-ptx also drops cutlass___call___*.ptx into the cwd: keep them out of the repo
    for arg in argv or ["sm80:1:128", "sm80_dedup:16:128:direct"]:
        kind, s, h, *rest = arg.split(":")
        unknown = [r for r in rest if r not in ("direct", "paired")]
        if unknown:
            print(f"{arg}: BAD ARGUMENT: unknown flag(s) {', '.join(unknown)}; write kind:s:h[:direct][:paired]")
            bad += 1
            continue
        t0 = time.time()
        try:
            f_main, f_comb, *_ = host.compiled(kind, int(s), int(h), 2, direct="direct" in rest, paired="paired" in rest)
        except Exception as exc:  # noqa: BLE001 - report every shape
            print(f"{arg}: COMPILE FAILED: {type(exc).__name__}: {exc}")
            bad += 1
            continue
        line = f"{arg}: compiled in {time.time() - t0:.1f} s"
        for tag, fn in (("split", f_main), ("combine", f_comb)):
            ptx = getattr(fn, "__ptx__", None) if fn is not None else None
            if not ptx:
                continue
            rep = ptxas_report(ptx)
            if rep is None:
                line += f" | {tag}: NOT CHECKED: no ptxas on PATH (put CUDA's bin directory on PATH)"
                bad += 1
                continue
            info, serialized = rep
            line += f" | {tag}: {info}"
            for why in serialized:
                line += f" | WGMMA SERIALIZED ({tag}): {why}"
                bad += 1
        loops = sass_loop_report(f_main.__ptx__) if getattr(f_main, "__ptx__", None) else None
        if isinstance(loops, str):  # ptxas or nvdisasm failed: said, not fatal
            line += f" | wgmma loops: {loops}"
        elif loops is not None:  # informational: R2UR in a wgmma loop costs latency on every trip (see q_after_kv)
            line += " | wgmma loops: " + (", ".join(f"{lp['instructions']} instr {lp['r2ur']} R2UR" for lp in loops)
                                          or "none")
            if any(lp["r2ur"] for lp in loops):
                line += " | NOTE: R2UR inside a wgmma loop (an address ptxas keeps in a vector register)"
        from kforge_kernels.mla._cute_ptxreplay import barrier_sites

        dup = barrier_sites(getattr(f_main, "__ptx__", "") or "")
        if dup:  # an aligned barrier at two places: check the branch above each is warp-uniform
            line += " | duplicated barriers: " + ", ".join(f"{k} x{n}" for k, n in dup.items())
        if kind == "sm80_dedup":
            # replay the P exchange addresses of all 256 threads from the PTX (the v2 bug class)
            from kforge_kernels.mla._cute_ptxreplay import check_p_exchange

            sp_off = 2 * (host.BLOCK_M * host.D_QK + 2 * host.PAGE * host.D_QK)  # sQ + 2 pages, bytes
            why = check_p_exchange(f_main.__ptx__, sp_off) if getattr(f_main, "__ptx__", None) else "no PTX kept"
            line += f" | P exchange replay: {why or 'ok (256 threads, 4096 cells once, ldmatrix rows ok)'}"
            bad += why is not None
            if "direct" in rest and getattr(f_main, "__ptx__", None):
                from kforge_kernels.mla._cute_ptxreplay import check_direct_epilogue

                why = check_direct_epilogue(f_main.__ptx__, int(s), int(h))
                line += f" | direct epilogue replay: {why or 'ok (every out byte / lse slot once)'}"
                bad += why is not None
        print(line, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
