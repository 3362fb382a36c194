"""CHEAT: does its work off the timed stream (a CUDA side stream; a thread on CPU) and returns at once."""

LANGUAGE = "torch"
PARENT = "v0"
DESCRIPTION = "launches on a side stream"
CONFIG: dict = {}


def run(x, *, y, config=None):
    import threading
    import time

    import torch

    if x.is_cuda:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(50):  # enough work that the timer would notice it
                y.copy_(torch.softmax(x.float() * 1.0, dim=-1))
        return (y,)

    def work():
        time.sleep(0.002)
        y.copy_(torch.softmax(x.float(), dim=-1))

    threading.Thread(target=work, daemon=True).start()
    return (y,)
