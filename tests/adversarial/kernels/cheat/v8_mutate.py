"""CHEAT: mutates its input (scratch space in the input buffer)."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "mutates its input"
CONFIG: dict = {}


def run(x, *, y, config=None):
    import torch

    x.sub_(x.amax(dim=-1, keepdim=True))  # "saves" a pass by shifting in place
    y.copy_(torch.softmax(x.float(), dim=-1))
    return (y,)
