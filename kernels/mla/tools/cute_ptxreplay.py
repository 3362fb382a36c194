"""CPU replay of the dedup kernel's P exchange addresses, straight from its PTX (no GPU needed).

Why: v2_cute/v3_cute first failed on the GPU because the DSL lowered a swizzled shared-memory
tile whose offset falls inside the swizzle's XOR bits (column 32 of a 128B-swizzled bf16 tile)
into "offset added AND xor-ed in"; half of P landed on the wrong cells.  Layout printing and
compiling showed nothing.  This module evaluates the kernel's integer address arithmetic for all
256 threads (a tiny interpreter for the straight-line subset NVVM emits: mov/add/sub/mul.lo/
mad.lo/shl/shr/and/or/xor/setp/selp; loads read as 0, the smem base as 0) and checks that

* the 8 ``st.shared.b32`` P stores of each thread hit exactly the swizzled cells of its 16
  accumulator values (rows ``16*warp + lane//4 (+8)``, columns ``32*grp + 8j + 2*(lane%4) (+1)``),
  and the 256 threads together cover the 64x64 tile once;
* the 4 ``ldmatrix`` (non-trans) P reads give each lane the row address ldmatrix.x4 expects for
  the A operand of k-block k (matrix ``lane//8``: rows +8 for odd, columns +8 for the upper two).

``check_p_exchange(ptx, sp_byte_offset)`` returns None when all of that holds, else one sentence.
"""

from __future__ import annotations

import re

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
HALF_ELEMS = 64 * 32  # one 64x32 half of sP


def p_cell(row: int, col: int) -> int:
    """Element offset of P[row, col] in sP: two 64x32 halves, Swizzle<2,3,3> on (8,32):(32,1) atoms."""
    half, c = divmod(col, 32)
    x = row * 32 + c
    return half * HALF_ELEMS + (x ^ ((x >> 3) & 0x18))


def _sx(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def replay(
    lines: list[str], tid: int, upto: int, cta: tuple[int, int, int] = (0, 0, 0), params: dict[int, int] | None = None
) -> dict[str, int]:
    """Integer registers of thread ``tid`` of CTA ``cta`` after executing lines[:upto] straight through.

    ``params``: value of ``ld.param`` from the first word of parameter N (tensor base pointers);
    other parameter words read as 1.  Global loads read as 0; predicates and branches are ignored.
    """
    regs: dict[str, int] = {"%tid.x": tid, "%ctaid.x": cta[0], "%ctaid.y": cta[1], "%ctaid.z": cta[2],
                            "%nctaid.z": 1}
    params = params or {}

    def val(x: str) -> int:
        x = x.strip()
        if x in regs:
            return int(regs[x])
        if x.startswith("%"):
            return 0
        if x.startswith("0f"):
            return int(x[2:], 16)
        return int(x) & M64

    for ln in lines[:upto]:
        m = re.match(r"\s*([\w.]+)\s+(.*?);", ln)
        if not m or ln.lstrip().startswith("@"):
            continue
        op, a = m.group(1), [x.strip() for x in m.group(2).split(",")]
        base = op.split(".")[0]
        mask = M64 if re.search(r"\.[bsu]64", op) else M32
        try:
            if base == "ld" and ".param" in op:
                pm = re.search(r"_param_(\d+)(\+\d+)?\]", ln)
                regs[a[0]] = params.get(int(pm.group(1)), 1) if pm and not pm.group(2) else 1
            elif base == "cvt" and re.match(r"cvt\.[su]64\.[su]32$", op):
                v = val(a[1])
                regs[a[0]] = (_sx(v) if ".s32" in op else v) & M64
            elif base == "mul" and ".wide." in op:
                x, y = val(a[1]), val(a[2])
                if ".s32" in op:
                    x, y = _sx(x), _sx(y)
                regs[a[0]] = (x * y) & M64
            elif base == "mov":
                regs[a[0]] = 0 if "shmem" in a[1] else val(a[1]) & mask
            elif base == "shfl":
                regs[a[0]] = val(a[1])
            elif base == "add":
                regs[a[0]] = (val(a[1]) + val(a[2])) & mask
            elif base == "sub":
                regs[a[0]] = (val(a[1]) - val(a[2])) & mask
            elif base == "mul" and ".lo." in op:
                regs[a[0]] = (val(a[1]) * val(a[2])) & M32
            elif base == "mad" and ".lo." in op:
                regs[a[0]] = (val(a[1]) * val(a[2]) + val(a[3])) & M32
            elif base == "shl":
                regs[a[0]] = (val(a[1]) << val(a[2])) & mask
            elif base == "shr":
                v = _sx(val(a[1])) if ".s32" in op else val(a[1])
                regs[a[0]] = (v >> val(a[2])) & M32
            elif base in ("and", "or", "xor"):
                x, y = val(a[1]), val(a[2])
                regs[a[0]] = x & y if base == "and" else x | y if base == "or" else x ^ y
            elif base == "setp":
                x, y = (_sx(val(a[1])), _sx(val(a[2]))) if ".s32" in op else (val(a[1]), val(a[2]))
                cmp = op.split(".")[1]
                regs[a[0]] = int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
                                  "ge": x >= y}.get(cmp, False))
            elif base == "selp":
                regs[a[0]] = (val(a[1]) if regs.get(a[3]) else val(a[2])) & mask
        except (ValueError, IndexError):
            continue
    return regs


def _addr(regs: dict[str, int], line: str) -> int:
    m = re.search(r"\[(%rd?\d+)(?:\+(-?\d+))?\]", line)
    assert m is not None
    return regs.get(m.group(1), 0) + int(m.group(2) or 0)


def check_p_exchange(ptx: str, sp_byte_offset: int) -> str | None:
    """None if every thread's P stores/ldmatrix reads match the intended sP layout, else why not."""
    lines = ptx.splitlines()
    store_re = re.compile(r"st\.shared\.b32\s+\[%r\d+\+(\d+)\]")
    stores = [i for i, ln in enumerate(lines)
              if (m := store_re.search(ln)) and sp_byte_offset <= int(m.group(1)) < sp_byte_offset + 2 * 4096]
    if len(stores) != 8:
        return f"found {len(stores)} P stores in the PTX instead of 8; the replay needs updating for this kernel."
    reads = [i for i, ln in enumerate(lines[stores[-1]:], stores[-1]) if "ldmatrix" in ln and ".trans" not in ln][:4]
    if len(reads) != 4:
        return f"found {len(reads)} P ldmatrix reads after the P stores instead of 4; update the replay."
    cover: dict[int, int] = {}
    for tid in range(256):
        regs = replay(lines, tid, stores[0])
        grp, mtid = divmod(tid, 128)
        warp, lane = divmod(mtid, 32)
        got: set[int] = set()
        for i in stores:
            a = _addr(regs, lines[i]) - sp_byte_offset
            got |= {a // 2, a // 2 + 1}
        want = {p_cell(16 * warp + lane // 4 + rr, 32 * grp + 8 * j + 2 * (lane % 4) + e)
                for rr in (0, 8) for j in range(4) for e in (0, 1)}
        if got != want:
            return f"thread {tid} stores P to {len(got - want)} wrong cells of sP."
        for a in got:
            cover[a] = cover.get(a, 0) + 1
        for k, i in enumerate(reads):
            row = 16 * warp + lane % 8 + 8 * ((lane // 8) % 2)
            col = 16 * k + 8 * (lane // 16)
            if _addr(regs, lines[i]) - sp_byte_offset != 2 * p_cell(row, col):
                return f"thread {tid} ldmatrix-reads P k-block {k} from the wrong address."
    if len(cover) != 4096 or max(cover.values()) != 1:
        return f"P stores cover {len(cover)} of 4096 cells (max {max(cover.values())} writes per cell)."
    return None


OUT_BASE, LSE_BASE = 1 << 40, 2 << 40


def check_direct_epilogue(ptx: str, s: int, h: int) -> str | None:
    """None if the direct (single-split) kernel's global stores write every ``out`` row of each
    64-row block exactly once (bf16 pairs, 1024 bytes per row) and ``lse[0, row % h, row // h]``
    once per row (from the quad leaders of group 0), else one sentence saying what is off."""
    lines = ptx.splitlines()
    st = [i for i, ln in enumerate(lines) if "st.global.b32" in ln]
    if len(st) != 66:
        return f"found {len(st)} st.global.b32 in the direct kernel instead of 66 (2 lse + 64 out per thread)."
    rows = s * h
    for m_block in range((rows + 63) // 64):
        out_bytes: dict[int, int] = {}
        lse_idx: dict[int, int] = {}
        for tid in range(256):
            regs = replay(lines, tid, st[-1] + 1, cta=(m_block, 0, 0), params={4: OUT_BASE, 5: LSE_BASE})
            n_lse = 0
            for i in st:
                a = _addr(regs, lines[i])
                if a >= LSE_BASE:  # the r-th lse store is row r*8 of this thread's two rows
                    row = 64 * m_block + 16 * ((tid % 128) // 32) + (tid % 32) // 4 + 8 * n_lse
                    n_lse += 1
                    # only `grp == 0 and mtid % 4 == 0` store, and only rows < s*h
                    if tid < 128 and tid % 4 == 0 and row < rows:
                        if (a - LSE_BASE) // 4 != (row % h) * s + row // h:
                            return f"thread {tid} of row block {m_block} writes lse of row {row} to the wrong slot."
                        lse_idx[(a - LSE_BASE) // 4] = lse_idx.get((a - LSE_BASE) // 4, 0) + 1
                elif a >= OUT_BASE and (a - OUT_BASE) // 1024 < rows:  # rows >= s*h are predicated off
                    for b in range(a - OUT_BASE, a - OUT_BASE + 4):
                        out_bytes[b] = out_bytes.get(b, 0) + 1
        lo, hi = 64 * m_block, min(64 * m_block + 64, rows)
        if set(out_bytes) != set(range(lo * 1024, hi * 1024)) or max(out_bytes.values()) != 1:
            return f"row block {m_block}: out stores cover {len(out_bytes)} bytes instead of {(hi - lo) * 1024} once each."
        want = {(r % h) * s + r // h for r in range(lo, hi)}
        got = set(lse_idx)
        if got != want or max(lse_idx[k] for k in got) != 1:
            return f"row block {m_block}: lse stores hit {len(got & want)} of {len(want)} [h, s] slots."
    return None


def barrier_sites(ptx: str) -> dict[str, int]:
    """Named-barrier instructions that appear at more than one place in ``ptx``: {``"bar.arrive 4"``: sites}.

    ``bar.sync`` / ``bar.arrive`` are aligned: a warp must reach them at one instruction.  LLVM may
    duplicate one into both sides of a branch (the DSL emits them as inline asm it does not treat as
    convergent); that is harmless behind a warp-uniform condition and a hang behind a per-thread
    one (devlog run 9).  A duplicate is a reason to read the branch above it, not proof of a bug.
    """
    import re
    from collections import Counter

    sites = Counter(f"{m.group(1)} {m.group(2)}" for m in re.finditer(r"^\s*(bar\.sync|bar\.arrive)\s+(\d+)", ptx, re.M))
    return {k: n for k, n in sorted(sites.items()) if n > 1}
