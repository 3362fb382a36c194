"""ptxas's report on a compiled CuTe DSL kernel: registers, spills and wgmma serialisation (no GPU needed).

cute.compile keeps a kernel's PTX (``__ptx__``) when ``KFORGE_CUTE_OPTIONS`` has ``--keep-ptx``; feeding it
to ``ptxas -v`` prints the resource line and ptxas's "Potential Performance Loss" notes.  The one that
matters most on Hopper: "wgmma.mma_async instructions are serialized due to ..." (C7510-C7520), after
which every wgmma waits for the previous one.  A serialised kernel is correct and compiles cleanly, so
only its timing shows it (run 13: v36_cute's spec took 1260 us instead of 877; knowledge entry
wgmma-serialized-by-divergent-branch).  Used by ``_cute_compilecheck`` (CPU) and ``_cute_selfcheck`` (GPU).

The DSL's NVVM emits PTX ISA 9.4; an older ptxas (CUDA 13.0 accepts 9.0) is fed the same text with the
version line lowered: fine for these notes, not the binary the GPU runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def serialized_wgmma(ptxas_stderr: str) -> list[str]:
    """The reasons ptxas gives for serialising a kernel's wgmma instructions, one per distinct reason."""
    out: list[str] = []
    for ln in ptxas_stderr.splitlines():
        if "serialized due to" not in ln:
            continue
        at = ln.find("(C")
        code = ln[at:ln.find(")", at) + 1] if at >= 0 and ln.find(")", at) > at else ""
        why = re.split(r"\s+in (?:the )?function\b", ln.split("serialized due to", 1)[1])[0].strip()
        item = f"{code} {why}".strip()
        if item not in out:
            out.append(item)
    return out


def ptxas_report(ptx: str, arch: str = "sm_90a") -> tuple[str, list[str]] | None:
    """``(resource summary, serialisation reasons)`` of ``ptxas -v`` on ``ptx``; None without a ptxas on PATH."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kforge_ptxas_") as tmp:
        path = Path(tmp, "k.ptx")
        path.write_text(ptx.replace(".version 9.4", ".version 9.0"))
        res = subprocess.run([exe, "-v", f"-arch={arch}", str(path), "-o", os.devnull], capture_output=True,
                             text=True, timeout=120)
    info = [ln.split("info    :")[-1].strip() for ln in res.stderr.splitlines() if "Used" in ln or "spill" in ln]
    return "; ".join(info) or res.stderr.strip()[-200:], serialized_wgmma(res.stderr)


def cache_notes(cache: Mapping[tuple, Any]) -> list[dict[str, Any]]:
    """One ``{kernel, ptxas, serialized}`` per compiled function with kept PTX in ``_cute_host``'s cache
    (keys ``(kind, s, h, stages, direct, arch[, "paired"])``, values ``(split fn, combine fn, ...)``)."""
    notes = []
    for key, fns in cache.items():
        kind, s, h, _stages, direct, *rest = key
        label = f"{kind} s={s} h={h}" + (" direct" if direct else "") + (" paired" if "paired" in rest else "")
        for tag, fn in zip(("split", "combine"), fns[:2]):
            ptx = getattr(fn, "__ptx__", None) if fn is not None else None
            if not ptx:
                continue
            rep = ptxas_report(ptx)
            if rep is not None:
                notes.append({"kernel": f"{label} {tag}", "ptxas": rep[0], "serialized": rep[1]})
    return notes
