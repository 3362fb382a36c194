"""CHEAT: writes only the first half of the output rows."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "writes half the output"
CONFIG: dict = {}


def run(x, *, y, config=None):
    import torch

    half = x.shape[0] // 2
    y[:half].copy_(torch.softmax(x[:half].float(), dim=-1))
    return (y,)
