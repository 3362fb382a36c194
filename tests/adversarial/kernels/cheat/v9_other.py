"""CHEAT: returns a freshly allocated tensor instead of writing into the given output."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "returns a tensor other than the given output"
CONFIG: dict = {}


def run(x, *, y, config=None):
    import torch

    return (torch.softmax(x.float(), dim=-1),)
