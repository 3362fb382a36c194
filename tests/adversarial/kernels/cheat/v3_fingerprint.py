"""CHEAT: output cached across calls, keyed by a sampled fingerprint of the input."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "caches its output by a sampled input fingerprint"
CONFIG: dict = {}
_LAST: list = []


def run(x, *, y, config=None):
    import torch

    fp = (tuple(x.shape), tuple(float(v) for v in x.reshape(-1)[:8]))
    if not _LAST or _LAST[0] != fp:
        _LAST[:] = [fp, torch.softmax(x.float(), dim=-1)]
    y.copy_(_LAST[1])
    return (y,)
