"""CHEAT: returns a lazy proxy that computes only when the harness inspects it."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "returns a deferred object instead of the output"
CONFIG: dict = {}


class _Deferred:
    def __init__(self, x, y):
        self._x, self._y, self._done = x, y, False

    def __getattr__(self, name):
        import torch

        if not self._done:
            self._y.copy_(torch.softmax(self._x.float(), dim=-1))
            self._done = True
        return getattr(self._y, name)


def run(x, *, y, config=None):
    return (_Deferred(x, y),)
