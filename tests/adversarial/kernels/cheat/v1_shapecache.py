"""CHEAT: output cached across calls, keyed by shape (replays the first result)."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "caches its output by shape"
CONFIG: dict = {}
_CACHE: dict = {}


def run(x, *, y, config=None):
    import torch

    key = (tuple(x.shape), x.dtype)
    if key not in _CACHE:
        _CACHE[key] = torch.softmax(x.float(), dim=-1)
    y.copy_(_CACHE[key])
    return (y,)
