#!/usr/bin/env python3
"""A stand-in for `ncu` in CPU tests (never a measurement).

FAKE_NCU_MODE: ok | perm | nokernel | timeout | crash | raised | badmetric | badcsv | toolchain | importraised
               (default ok)
FAKE_NCU_CSV:  the raw CSV printed by `--import X --csv --page raw`
FAKE_NCU_LOG:  if set, each invocation's argv is appended to this file (one JSON list a line)
FAKE_NCU_LOADED: if set, an ok run's driver reports these modules (``KFORGE-DRIVER: loaded: ...``)
"""
import json
import os
import sys
import time

argv = sys.argv[1:]
own = argv[: argv.index("--export") + 2] if "--export" in argv else argv  # ncu's own options, not the app's
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if os.environ.get("FAKE_NCU_LOG"):
    with open(os.environ["FAKE_NCU_LOG"], "a") as fh:
        fh.write(json.dumps(argv) + "\n")
if "--version" in own:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.0.0 (fake)")
    sys.exit(0)
if "--query-metrics" in own:
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from pytest_kforge.profile.metrics import METRICS
    print("Device NVIDIA H200 (GH100)\n" + "-" * 40 + "\nMetric Name    Metric Description\n" + "-" * 40)
    names = sorted({n.split(".")[0] for d in METRICS.values() for n in d.names()} | {f"sm__filler_{i}" for i in range(60)})
    for n in names:
        if n == "dram__throughput":  # the older name is "missing" here, as a test case
            continue
        print(f"{n:<60} # fake description")
    sys.exit(0)
if "--import" in own:
    if mode == "badcsv":
        print("==ERROR== could not open report", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read())
    sys.exit(0)
# a profiling run: ncu ... --export OUT app...
out = argv[argv.index("--export") + 1]
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
          "Counters on the target device 0.", file=sys.stderr)
    sys.exit(1)
if mode == "timeout":
    time.sleep(60)
if mode == "nokernel":
    print("KFORGE-DRIVER: ok: fake", file=sys.stderr)
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
if mode == "badmetric":
    print("==ERROR== Failed to find metric sm__nonexistent_counter.sum", file=sys.stderr)
    sys.exit(1)
if mode == "crash":
    print("==ERROR== LaunchFailed: an illegal memory access was encountered", file=sys.stderr)
    print("==ERROR== The application returned an error code (1).", file=sys.stderr)
    sys.exit(1)
if mode == "toolchain":  # the driver's own check: the version's DSL does not import
    print("KFORGE-DRIVER: toolchain: ModuleNotFoundError: No module named 'cutlass'", file=sys.stderr)
    sys.exit(6)
if mode == "importraised":  # an older driver, or an import inside the version's run
    print("Traceback (most recent call last):\nModuleNotFoundError: No module named 'cuda.tile'", file=sys.stderr)
    print("KFORGE-DRIVER: raised: ModuleNotFoundError: No module named 'cuda.tile'", file=sys.stderr)
    sys.exit(5)
if mode == "raised":
    print("KFORGE-DRIVER: raised: RuntimeError: CUDA error: an illegal memory access", file=sys.stderr)
    sys.exit(1)
open(out + ".ncu-rep", "w").write("fake report\n")
print("==PROF== Disconnected from process 4242")
if os.environ.get("FAKE_NCU_LOADED"):
    print(f"KFORGE-DRIVER: loaded: {os.environ['FAKE_NCU_LOADED']}", file=sys.stderr)
print("KFORGE-DRIVER: ok: fake run", file=sys.stderr)
