"""How many thread-block clusters of n CTAs the GPU keeps resident at once, for CTAs of one per SM.

A GPC holds whole clusters only, so a grid of clusters can run in more waves than its CTA count says: on the H100 of
run 35, clusters of 4 CTAs of 227 KB fit 30 at once (not 132 / 4 = 33), and v67_cute's 32 clusters on decode ran a
second wave (1.70x) while ncu's ``launch__waves_per_multiprocessor`` read 0.97.  Ask this before planning a grid of
clusters.  The driver's ``cuOccupancyMaxActiveClusters`` answers for a kernel at the opt-in shared-memory maximum (one
CTA per SM), which is every sm90 MLA kind's case (``cutlass.utils.HardwareInfo``).

Run on the GPU machine (CuTe DSL staged): ``python3 kernels/mla/tools/cluster_occupancy.py [--sizes 1,2,4,8,16]``
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cluster_occupancy.py")
    ap.add_argument("--sizes", default="1,2,4,8,16", help="cluster sizes (CTAs per cluster), comma-separated")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        print(f"cluster_occupancy: --sizes takes integers like 1,2,4, got {args.sizes!r}")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("cluster_occupancy: no CUDA GPU here; run it on the GPU machine")
        return 2
    torch.zeros(1, device="cuda")  # a current context for the driver calls
    from cutlass.utils import HardwareInfo

    hw = HardwareInfo()
    sms = hw.get_device_multiprocessor_count()
    print(f"{torch.cuda.get_device_name()}: {sms} SMs, one CTA per SM (opt-in shared-memory maximum)")
    print("| CTAs per cluster | clusters resident at once | CTAs resident |")
    print("|---|---|---|")
    for n in sizes:
        k = hw.get_max_active_clusters(n)
        print(f"| {n} | {k} | {k * n} of {sms} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
