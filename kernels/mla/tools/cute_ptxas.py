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


def _for_local_ptxas(ptx: str) -> str:
    """The DSL's PTX with its ISA version lowered to what CUDA 13.0's ptxas accepts (see the module note)."""
    return ptx.replace(".version 9.4", ".version 9.0")


def ptxas_report(ptx: str, arch: str = "sm_90a") -> tuple[str, list[str]] | None:
    """``(resource summary, serialisation reasons)`` of ``ptxas -v`` on ``ptx``; None without a ptxas on PATH."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kforge_ptxas_") as tmp:
        path = Path(tmp, "k.ptx")
        path.write_text(_for_local_ptxas(ptx))
        res = subprocess.run([exe, "-v", f"-arch={arch}", str(path), "-o", os.devnull], capture_output=True,
                             text=True, timeout=120)
    info = [ln.split("info    :")[-1].strip() for ln in res.stderr.splitlines() if "Used" in ln or "spill" in ln]
    return "; ".join(info) or res.stderr.strip()[-200:], serialized_wgmma(res.stderr)


def _nvdisasm() -> str | None:
    """nvdisasm from $NVDISASM, PATH, or beside ptxas (CUDA's bin directory)."""
    exe = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if exe:
        return exe
    ptxas = shutil.which("ptxas")
    near = Path(ptxas).resolve().parent / "nvdisasm" if ptxas else None
    return str(near) if near is not None and near.exists() else None


def wgmma_loops(sass: str) -> list[dict[str, int]]:
    """The innermost loops of ``nvdisasm`` output that issue wgmma (HGMMA): per loop its instruction count and
    its HGMMA, R2UR and SYNCS (mbarrier) instructions.

    A loop is a backward branch before the kernel's last EXIT (the try-wait retry stubs after it jump back
    too, and are not loops).  R2UR inside such a loop means ptxas holds an address the wgmma descriptors or
    barrier waits need in a vector register and moves it to a uniform one on every trip (v36_cute: 10 and 16
    per pair, with Q's TMA load inside the producer's loop; see ``q_after_kv`` in ``_cute_sm90``).
    """
    ins: list[str] = []
    labels: dict[str, int] = {}
    for ln in sass.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", ln)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?);", ln)
        if m:
            ins.append(m.group(1))
    last_exit = max((i for i, t in enumerate(ins) if re.search(r"\bEXIT\b", t)), default=len(ins))
    loops = []
    for i, t in enumerate(ins[:last_exit]):
        m = re.search(r"\bBRA\s+`\((\.L_x_\d+)\)", t)
        if m and labels.get(m.group(1), i) < i and any("HGMMA" in x for x in ins[labels[m.group(1)]:i + 1]):
            loops.append((labels[m.group(1)], i))
    inner = [(a, b) for a, b in loops if not any((a2, b2) != (a, b) and a <= a2 and b2 <= b for a2, b2 in loops)]
    return [{"instructions": b - a + 1, "hgmma": sum("HGMMA" in x for x in ins[a:b + 1]),
             "r2ur": sum(x.split()[0] == "R2UR" or " R2UR " in f" {x} " for x in ins[a:b + 1]),
             "syncs": sum("SYNCS" in x for x in ins[a:b + 1])} for a, b in sorted(set(inner))]


def sass_loop_report(ptx: str, arch: str = "sm_90a") -> list[dict[str, int]] | str | None:
    """:func:`wgmma_loops` of ``ptx`` compiled by ptxas and disassembled by nvdisasm; None without either tool,
    and one sentence instead of the loops when either fails (the report is informational: it never raises)."""
    exe, dis = shutil.which("ptxas"), _nvdisasm()
    if exe is None or dis is None:
        return None
    try:
        with tempfile.TemporaryDirectory(prefix="kforge_sass_") as tmp:
            path, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
            path.write_text(_for_local_ptxas(ptx))
            subprocess.run([exe, f"-arch={arch}", str(path), "-o", str(cubin)], capture_output=True, timeout=180,
                           check=True)
            sass = subprocess.run([dis, str(cubin)], capture_output=True, text=True, timeout=120, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return f"not checked: {type(exc).__name__} running ptxas/nvdisasm ({dis}): {str(exc)[:160]}"
    return wgmma_loops(sass)


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
