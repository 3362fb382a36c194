"""CHEAT: output cached across calls, keyed by the input's data_ptr (same buffers -> no work)."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "caches its output by data_ptr"
CONFIG: dict = {}
_CACHE: dict = {}


def run(x, *, y, config=None):
    import torch

    key = x.data_ptr()
    if key not in _CACHE:
        _CACHE[key] = torch.softmax(x.float(), dim=-1)
    y.copy_(_CACHE[key])
    return (y,)
