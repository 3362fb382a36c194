"""Compile every cuTile MLA/softmax version for sm_90 on a CPU-only machine (no GPU, no torch needed).

How: the version's own ``run()`` is called with fake tensors (shape/dtype/stride only) under a fake
``torch`` module, and ``cuda.tile.launch`` is replaced by a function that turns the launch
arguments into a ``KernelSignature`` and runs cuTile's real compile pipeline (Python front end ->
Tile IR bytecode -> tileiras -> cubin) for sm_90.  Catches syntax, typing, shape and tileiras
errors before a GPU run; reports registers per thread from the cubin.

Run from the repository root (python 3.12, cuda.tile and tileiras 13.4 importable / on PATH,
CUDA_HOME unset -- e.g. `pip install "cuda-tile[tileiras]"` in a python 3.12 venv):
    env -u CUDA_HOME python3.12 kernels/mla/tools/cutile_compilecheck.py [v1 v2 ...]
"Threads" in the report tells whether tileiras kept warp specialisation (384) or not (256).
"""

from __future__ import annotations

import math
import struct
import sys
import time
import traceback
import types

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# ---------------------------------------------------------------- fake torch ------------------
class FDtype:
    def __init__(self, name: str, size: int, ct_name: str, fp: bool):
        self.name, self.itemsize, self.ct_name, self.is_floating_point = name, size, ct_name, fp

    def __repr__(self):
        return f"torch.{self.name}"


class FDevice:
    type = "cuda"
    index = 0


class FTensor:
    _next_ptr = 1 << 30

    def __init__(self, shape, dtype):
        self.shape = tuple(int(x) for x in shape)
        self.dtype = dtype
        self.device = FDevice()
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= d
        self._stride = tuple(reversed(st))
        FTensor._next_ptr += 1 << 28

    def stride(self, dim=None):
        return self._stride if dim is None else self._stride[dim]

    def is_contiguous(self):
        return True

    def numel(self):
        return math.prod(self.shape)

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(shape)
        if -1 in shape:
            i = shape.index(-1)
            rest = math.prod(x for x in shape if x != -1)
            shape[i] = self.numel() // rest
        assert math.prod(shape) == self.numel(), (shape, self.shape)
        return FTensor(shape, self.dtype)

    reshape = view

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]


def make_fake_torch():
    tm = types.ModuleType("torch")
    tm.bfloat16 = FDtype("bfloat16", 2, "bfloat16", True)
    tm.float32 = FDtype("float32", 4, "float32", True)
    tm.float16 = FDtype("float16", 2, "float16", True)
    tm.int32 = FDtype("int32", 4, "int32", False)
    tm.Tensor = FTensor

    def empty(*shape, dtype=None, device=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return FTensor(shape, dtype or tm.float32)

    tm.empty = empty
    tm.zeros = empty  # v5+: zeroed arrival counters
    cuda = types.ModuleType("torch.cuda")
    cuda.current_stream = lambda *a, **k: 0
    cuda.is_available = lambda: False
    cuda.get_device_properties = lambda i: types.SimpleNamespace(multi_processor_count=132, name="fake H200")
    tm.cuda = cuda
    return tm


# ---------------------------------------------------------------- fake launch -> compile -----
COMPILED: list[dict] = []


def cubin_summary(cubin: bytes) -> dict:
    """What the compiler made of a kernel, read from the cubin's sections and its embedded PTX:
    threads per CTA, static shared memory, wgmma shapes, TMA loads, local-memory traffic (spills)."""
    import re

    out: dict = {}
    if cubin[:4] != b"\x7fELF":
        return out
    e_shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    strtab = secs[e_shstrndx]
    ptx = ""
    for sec in secs:
        name_off = strtab[4] + sec[0]
        name = cubin[name_off: cubin.index(b"\0", name_off)].decode()
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            out["smem_kb"] = round(sec[5] / 1024, 1)
        if name == ".nv.info":  # EIATTR records: 0x2f REGCOUNT, 0x11 FRAME_SIZE (stack = spills)
            data, i = cubin[sec[4]: sec[4] + sec[5]], 0
            while i + 4 <= len(data):
                fmt, attr = data[i], data[i + 1]
                if fmt == 4:
                    size = struct.unpack_from("<H", data, i + 2)[0]
                    if attr in (0x2F, 0x11) and size == 8:
                        val = struct.unpack_from("<I", data, i + 8)[0]
                        key = "regs" if attr == 0x2F else "stack_bytes"
                        out[key] = max(out.get(key, 0), val)
                    i += 4 + size
                else:
                    i += 4
        if name == ".nv_debug_ptx_txt":
            ptx = cubin[sec[4]: sec[4] + sec[5]].decode("latin-1")
    if ptx:
        m = re.search(r"\.reqntid (\d+)", ptx)
        out["threads"] = int(m.group(1)) if m else None
        shapes = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)))
        out["wgmma"] = shapes
        out["mma_sync"] = len(re.findall(r"\bmma\.sync", ptx))
        out["tma_loads"] = len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cta\.global", ptx))
        out["ld_global"] = len(re.findall(r"ld\.global", ptx))
        out["local_ldst"] = len(re.findall(r"(?:ld|st)\.local", ptx))
        out["maxnreg"] = sorted(set(int(x) for x in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)))
    return out


def fake_launch(stream, grid, kernel, args, **kw):
    import cuda.tile as ct
    from cuda.tile._cext import CallingConvention, default_tile_context
    from cuda.tile.compilation import ArrayConstraint, KernelSignature, ScalarConstraint

    params = []
    for a in args:
        if isinstance(a, FTensor):
            ctd = getattr(ct, a.dtype.ct_name)
            big = a.numel() * a.dtype.itemsize >= 2**31
            params.append(ArrayConstraint(
                ctd, a.ndim, index_dtype=ct.int64 if big else ct.int32, stride_lower_bound_incl=0,
                alias_groups=(), may_alias_internally=False,
                stride_constant=[None] * (a.ndim - 1) + [1],
                stride_divisible_by=[math.gcd(s, 16) or 1 for s in a.stride()[:-1]] + [1],
                base_addr_divisible_by=16))
        elif isinstance(a, bool):
            params.append(a)
        elif isinstance(a, int):
            params.append(ScalarConstraint(ct.int32))
        elif isinstance(a, float):
            params.append(ScalarConstraint(ct.float32))
        else:
            raise TypeError(f"fake_launch: unsupported argument {a!r}")
    # ct.Constant parameters must be constants: rebuild with the values for annotated params
    ann = kernel._annotated_function.parameter_annotations
    for i, (a, an) in enumerate(zip(args, ann)):
        if getattr(an, "constant", False):
            params[i] = a
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    t0 = time.time()
    cubin, sym, _, _ = kernel._compile(sig, default_tile_context, (9, 0))
    COMPILED.append({"kernel": kernel._pyfunc.__name__, "grid": tuple(grid), "secs": round(time.time() - t0, 1),
                     **cubin_summary(cubin)})


# ---------------------------------------------------------------- driver ----------------------
MLA_SHAPES = [
    {"b": 32, "s": 1, "h": 128, "t": 4096},
    {"b": 32, "s": 16, "h": 128, "t": 4096},
    {"b": 3, "s": 3, "h": 16, "t": 70},
    {"b": 2, "s": 16, "h": 32, "t": 300},
    {"b": 4, "s": 2, "h": 64, "t": 32768},
]


def mla_tensors(tm, p):
    b, s, h, t = p["b"], p["s"], p["h"], p["t"]
    mb = -(-t // 64)
    return dict(q=FTensor((b, s, h, 576), tm.bfloat16), kv_cache=FTensor((b * mb + 4, 64, 576), tm.bfloat16),
                block_table=FTensor((b, mb), tm.int32), cache_seqlens=FTensor((b,), tm.int32),
                softmax_scale=1.0 / math.sqrt(576)), dict(out=FTensor((b, s, h, 512), tm.bfloat16),
                                                          lse=FTensor((b, h, s), tm.float32))


def main(argv):
    sys.modules["torch"] = tm = make_fake_torch()
    sys.path.insert(0, ROOT)
    import cuda.tile as ct

    ct.launch = fake_launch
    from pytest_kforge.registry import Registry

    reg = Registry(ROOT + "/kernels")
    failures = 0
    wanted: dict[str, list[dict]] = {}
    shape_filter = None
    for arg in argv:
        if arg.startswith("--shape="):  # e.g. --shape=0,1 (indices into MLA_SHAPES)
            shape_filter = [int(x) for x in arg.split("=", 1)[1].split(",")]
            continue
        name, _, over = arg.partition(":")
        cfg = {}
        for kv in filter(None, over.split(",")):
            k, _, val = kv.partition("=")
            cfg[k] = None if val == "None" else (float(val) if "." in val else (val if not val.lstrip("-").isdigit() else int(val)))
        wanted.setdefault(name, []).append(cfg)
    for kname in ("mla", "softmax"):
        kern = reg.kernel(kname)
        for vname in kern.version_names():
            if wanted and vname not in wanted:
                continue
            try:
                v = kern.version(vname)
            except Exception as exc:  # noqa: BLE001
                print(f"{kname}/{vname}: IMPORT FAILED {exc}")
                failures += 1
                continue
            if v.language != "cutile-dsl":
                continue
            shapes = MLA_SHAPES if kname == "mla" else [{"rows": 4096, "cols": 8192}, {"rows": 100, "cols": 1000},
                                                         {"rows": 65536, "cols": 1024}]
            if shape_filter is not None and kname == "mla":
                shapes = [shapes[i] for i in shape_filter]
            for p, over in [(p, o) for o in wanted.get(vname, [{}]) for p in shapes]:
                COMPILED.clear()
                t0 = time.time()
                try:
                    if kname == "mla":
                        ins, outs = mla_tensors(tm, p)
                    else:
                        ins, outs = {"x": FTensor((p["rows"], p["cols"]), tm.bfloat16)}, {
                            "y": FTensor((p["rows"], p["cols"]), tm.bfloat16)}
                    v.fn(**ins, **outs, config={**v.config, **over})
                    print(f"{kname}/{vname}{over or ''} {p}: OK {time.time() - t0:.1f}s {COMPILED}")
                except Exception as exc:  # noqa: BLE001
                    failures += 1
                    print(f"{kname}/{vname}{over or ''} {p}: FAILED {type(exc).__name__}: {str(exc)[:3000]}")
                    traceback.print_exc(limit=4, file=sys.stdout)
    print(f"compile check: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
