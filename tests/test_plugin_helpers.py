"""Shared helpers (no tests): a tiny kernel written into a pytester directory.

The ``tiny`` kernel computes ``y = 2 x + 1`` over a float32 vector of ``n`` elements; its
versions are honest (v0) or deliberately broken in one way each, so every harness check is
exercised by a kernel that must fail it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Import torch and hypothesis here, in the outer process: pytester's in-process runs drop the
# modules first imported inside them, and torch cannot be imported a second time.
import hypothesis  # noqa: F401
import torch  # noqa: F401

TINY_SPEC = '''
from pytest_kforge.spec import KernelSpec, Tolerance


class TinySpec(KernelSpec):
    name = "tiny"
    input_names = ("x",)
    output_names = ("y",)
    trials = {"small": {"n": 256}, "big": {"n": 4096}, "odd": {"n": 333}}
    default_trials = ("small", "big")
    shrink_param = "n"
    tolerances = {"y": Tolerance(max_abs=1e-5, rel_l2=1e-6)}

    def make_inputs(self, params, *, seed, device="cpu"):
        import torch
        g = torch.Generator().manual_seed(seed)
        return {"x": torch.randn(params["n"], generator=g).to(device)}

    def alloc_outputs(self, params, *, device="cpu"):
        import torch
        return {"y": torch.empty(params["n"], device=device)}

    def reference(self, inputs, *, dtype=None):
        import torch
        return {"y": inputs["x"].to(dtype or torch.float32) * 2 + 1}

    def flops(self, params):
        return 2.0 * params["n"]

    def min_bytes(self, params):
        return 8.0 * params["n"]

    def small_params(self, params):
        return dict(params)  # already CPU-sized

    def hypothesis_params(self, *, small=False):
        from hypothesis import strategies as st
        return st.builds(lambda n: {"params": {"n": n}}, st.integers(1, 300))


SPEC = TinySpec()
'''

HEADER = 'LANGUAGE = "{lang}"\nPARENT = {parent}\nDESCRIPTION = "{desc}"\nCONFIG = {{}}\n'

VERSIONS = {
    "v0": ("torch", None, "honest", """
def run(x, *, y, config=None):
    y.copy_(x * 2 + 1)
    return (y,)
"""),
    "v1_nowrite": ("torch", "v0", "never writes its output", """
def run(x, *, y, config=None):
    return (y,)
"""),
    "v2_fresh": ("torch", "v0", "returns a new tensor instead of the output buffer", """
def run(x, *, y, config=None):
    return (x * 2 + 1,)
"""),
    "v3_mutate": ("torch", "v0", "writes into its input", """
def run(x, *, y, config=None):
    y.copy_(x * 2 + 1)
    x.mul_(0.5)
    return (y,)
"""),
    "v4_cache": ("torch", "v0", "caches results by output pointer", """
_seen = {}
def run(x, *, y, config=None):
    key = (y.data_ptr(), tuple(y.shape))
    if key not in _seen:
        y.copy_(x * 2 + 1)
        _seen[key] = y.clone()
    else:
        y.copy_(_seen[key])
    return (y,)
"""),
    "v5_wrong": ("torch", "v0", "off by a bit", """
def run(x, *, y, config=None):
    y.copy_(x * 2 + 1.01)
    return (y,)
"""),
    "v6_picky": ("torch", "v0", "supports n <= 300 only", """
def supports(params):
    return None if params["n"] <= 300 else "n must be <= 300"
def run(x, *, y, config=None):
    y.copy_(x * 2 + 1)
    return (y,)
"""),
    "v7_tile": ("cutile-dsl", "v0", "needs cuda.tile", """
def run(x, *, y, config=None):
    import cuda.tile  # noqa: F401
    return (y,)
"""),
    "v8_thread": ("torch", "v0", "does its work on a thread it does not join (side-stream analogue)", """
import threading, time
def run(x, *, y, config=None):
    def work():
        time.sleep(0.05)
        y.copy_(x * 2 + 1)
    threading.Thread(target=work).start()
    return (y,)
"""),
    "v9_oom": ("torch", "v0", "runs out of memory above n=1024", """
def run(x, *, y, config=None):
    import torch
    if x.numel() > 1024:
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
    y.copy_(x * 2 + 1)
    return (y,)
"""),
    "v10_ptrcache": ("torch", "v0", "skips the work when the input pointer was seen (fake timing)", """
_seen = {}
def run(x, *, y, config=None):
    if x.data_ptr() not in _seen:
        _seen[x.data_ptr()] = x * 2 + 1
    y.copy_(_seen[x.data_ptr()])
    return (y,)
"""),
}


def write_tiny(root: Path, versions: tuple[str, ...] = ("v0",), toml: str = "") -> Path:
    """Write ``kforge.toml`` and ``kernels/tiny/`` with ``versions`` under ``root``; returns root."""
    (root / "kforge.toml").write_text(toml or 'kernels_dir = "kernels"\n')
    kdir = root / "kernels" / "tiny"
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "spec.py").write_text(textwrap.dedent(TINY_SPEC))
    for name in dict.fromkeys(("v0", *versions)):
        lang, parent, desc, body = VERSIONS[name]
        head = HEADER.format(lang=lang, parent=repr(parent), desc=desc)
        (kdir / f"{name}.py").write_text(head + textwrap.dedent(body))
    return root
