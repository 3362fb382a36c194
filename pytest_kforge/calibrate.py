"""Per-GPU roofline ceilings: measure them once per device, cache them, and pick the ones a run uses.

Measure on the current CUDA device (5 s on an H100, ``--quick`` 4 s, torch start-up included)::

    python -m pytest_kforge.calibrate [--out FILE] [--quick]   # measure, cache, print a table
    python -m pytest_kforge.calibrate --show                   # the cached and shipped figures; no GPU needed
    python -m pytest_kforge.calibrate --record-known           # measure, and write into calibration_known.json
    python -m pytest_kforge.calibrate --record-known --from FILE   # copy a --out file into calibration_known.json

What is measured, each with CUDA events through the harness's clock (:func:`~pytest_kforge.timing.time_launch`:
warm-up, an L2 flush and a spin before every round, throttled rounds re-taken), as the median of many rounds,
on buffers of 1-2 GiB (20-40x the 50-60 MB L2 of an H100/H200):

* DRAM read bandwidth: reductions (``sum`` of fp32, ``amax`` of bf16) of one buffer, the best method's median;
* copy bandwidth: ``dst.copy_(src)``, bytes read plus bytes written;
* dense bf16 tensor throughput: ``torch.matmul`` of several shapes on random data, the best shape's median;
* fp8 e4m3 throughput: ``torch._scaled_mm`` with per-tensor scales (None, with the reason, where unavailable).

The roofline a run uses is the larger of the read and copy bandwidths (a floor must be one no correct
kernel beats) and the bf16 throughput.  Results are cached by device name (``torch.cuda.get_device_name``)
in ``$KFORGE_CACHE_DIR/calibration.json`` or ``~/.cache/pytest-kforge/calibration.json``;
``calibration_known.json`` beside this module ships figures for known GPUs.  :func:`roofline_for` resolves
each ceiling, first found wins: ``--kforge-peak-tbs``/``--kforge-peak-tflops``, ``peak_bandwidth_tbs``/``peak_tflops``
set in ``[tool.kforge]``, the user cache for this device, the shipped file, the H200 default.  CPU runs look up
no calibration (the H200 default, as before).  torch is imported only when measuring.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import KforgeError
from .spec import Roofline

if TYPE_CHECKING:  # pragma: no cover
    from .config import KforgeConfig

__all__ = ["CalibrationError", "KNOWN_FILE", "DEFAULT_DEVICE", "cache_path", "load_entries", "save_entry",
           "roofline_for", "device_name", "measure", "main"]

KNOWN_FILE = Path(__file__).with_name("calibration_known.json")
#: the GPU whose figures :class:`~pytest_kforge.spec.Roofline` carries by default
DEFAULT_DEVICE = "NVIDIA H200"
RUN_HINT = "run python -m pytest_kforge.calibrate"
_GIB = 2**30


class CalibrationError(KforgeError):
    """A calibration file that cannot be used, or a measurement that cannot run here."""


# ---- files ---------------------------------------------------------------------------------------
def cache_path() -> Path:
    """The user cache: ``$KFORGE_CACHE_DIR/calibration.json``, else ``~/.cache/pytest-kforge/calibration.json``."""
    base = os.environ.get("KFORGE_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "pytest-kforge") / "calibration.json"


def _short(path: Path) -> str:
    """``path`` with the home folder written ``~``."""
    try:
        return "~/" + str(path.resolve().relative_to(Path.home().resolve()))
    except ValueError:
        return str(path)


def load_entries(path: Path) -> dict[str, dict[str, Any]]:
    """``{device name: entry}`` of a calibration file (``{}`` when it does not exist; ``_``-keys are notes)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{path} is not a readable calibration JSON ({exc}); delete it or {RUN_HINT}") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"{path} must hold a JSON object keyed by device name; delete it or {RUN_HINT}")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data.items():
        if name.startswith("_"):
            continue
        ok = isinstance(entry, dict) and all(
            isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool) and entry[k] > 0
            for k in ("bandwidth_bytes_per_s", "flops_per_s"))
        if not ok:
            raise CalibrationError(f"{path}: the entry for {name!r} needs positive bandwidth_bytes_per_s and "
                                   f"flops_per_s; fix it, delete it or {RUN_HINT}")
        out[name] = entry
    return out


def save_entry(path: Path, name: str, entry: Mapping[str, Any]) -> None:
    """Put ``entry`` under ``name`` in the calibration file at ``path`` (other devices and notes kept)."""
    from .fsutil import atomic_write_text

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[name] = dict(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


# ---- resolution ----------------------------------------------------------------------------------
def _num(x: float) -> str:
    """A ceiling in the header: 4.3, 3.35, 790, 1979."""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def _describe(entry: Mapping[str, Any], path: Path, shipped: bool) -> str:
    """Where an entry's figures came from, for the header line."""
    src = str(entry.get("source") or "")
    date = entry.get("date") or "undated"
    if not entry.get("measured", True):
        return f"{src.split(' (')[0] or 'not measured'}: shipped {path.name}; {RUN_HINT}"
    if shipped:
        return f"shipped {path.name}: " + (f"measured {date}" if not src or src.startswith("python") else src)
    return f"calibrated {date}{' --quick' if entry.get('quick') else ''}, {_short(path)}"


def roofline_for(device: str | None, cfg: KforgeConfig | None = None,
                 cli: tuple[float | None, float | None] = (None, None), *,
                 cache: Path | None = None, known: Path | None = None) -> tuple[Roofline, str]:
    """``(roofline, header line)`` for the GPU named ``device`` (None: a CPU run, nothing looked up).

    ``cli`` is ``(--kforge-peak-tbs, --kforge-peak-tflops)``; each ceiling is resolved on its own, first found:
    the flag, the ``[tool.kforge]`` key set in the file, the user cache's entry for ``device``, the shipped
    ``calibration_known.json``'s, the H200 default.  The line reads e.g.
    ``roofline 3.2 TB/s, 750 TFLOP/s (calibrated 2026-12-06, ~/.cache/pytest-kforge/calibration.json)``.
    """
    default = Roofline()
    explicit = cfg.explicit_keys if cfg is not None else frozenset()
    where = f"[tool.kforge] of {cfg.source}" if cfg is not None and cfg.source is not None else "[tool.kforge]"
    if cfg is not None and cfg.source is not None and cfg.source.name == "kforge.toml":
        where = str(cfg.source)
    found: tuple[Mapping[str, Any], str] | None = None
    keys = ("peak_bandwidth_tbs", "peak_tflops")
    if device is not None and any(f is None and k not in explicit for f, k in zip(cli, keys)):
        for path, shipped in ((cache or cache_path(), False), (known or KNOWN_FILE, True)):
            entry = load_entries(path).get(device)
            if entry is not None:
                found = entry, _describe(entry, path, shipped)
                break
    fallback = "H200 default; cpu run" if device is None else (
        "H200 default" if device == DEFAULT_DEVICE else f"no calibration for {device!r}: H200 default; {RUN_HINT}")
    picks: list[tuple[float, str]] = []
    for flag, (flag_name, key, field, scale) in zip(cli, (
            ("--kforge-peak-tbs", "peak_bandwidth_tbs", "bandwidth_bytes_per_s", 1e12),
            ("--kforge-peak-tflops", "peak_tflops", "flops_per_s", 1e12))):
        if flag is not None:
            picks.append((flag * scale, flag_name))
        elif key in explicit and cfg is not None:
            picks.append((float(getattr(cfg, key)) * scale, f"{key} from {where}"))
        elif found is not None:
            picks.append((float(found[0][field]), found[1]))
        else:
            picks.append((float(getattr(default, field)), fallback))
    (bw, bw_src), (fl, fl_src) = picks
    figures = f"roofline {_num(bw / 1e12)} TB/s, {_num(fl / 1e12)} TFLOP/s"
    why = f"({bw_src})" if bw_src == fl_src else f"(TB/s: {bw_src}; TFLOP/s: {fl_src})"
    return Roofline(bw, fl), f"{figures} {why}"


def device_name(device: str = "cuda") -> str | None:
    """torch's name of the GPU behind ``device`` (``cuda``, ``cuda:1``), None for a CPU device or no CUDA."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(torch.device(device)))


# ---- measurement ---------------------------------------------------------------------------------
def _timed(launch: Callable[[], Any], clock: Any, rounds: int, warmup: int) -> tuple[float, dict[str, Any]]:
    """``(median seconds, clock fields)`` of ``launch`` through the harness's clock."""
    from .timing import time_launch

    res = time_launch(launch, clock=clock, rounds=rounds, warmup=warmup)
    return res.median_s, {"spread_pct": round(res.spread_pct, 2), **res.clock_fields()}


def _nvml_clocks(device: str) -> dict[str, Any]:
    """The maximum SM and memory clocks NVML reports (empty without NVML)."""
    import ctypes

    from .gpuclock import reader_for

    reader = reader_for(device)
    if reader is None:
        return {}
    mem = ctypes.c_uint(0)
    got = reader.lib.nvmlDeviceGetMaxClockInfo(reader.handle, 2, ctypes.byref(mem)) == 0  # 2: NVML_CLOCK_MEM
    return {"sm_max_mhz": reader.max_mhz() or None, "mem_max_mhz": int(mem.value) if got else None}


def _bandwidths(torch: Any, dev: Any, nbytes: int, clock: Any, rounds: int, warmup: int,
                method: dict[str, Any]) -> dict[str, float]:
    """DRAM read (reductions of one ``nbytes`` buffer, the best method) and copy (its first half into its second,
    bytes read plus written) bandwidths; the buffer is freed on return."""
    buf = torch.rand(nbytes // 4, device=dev)
    half = buf.view(torch.bfloat16)
    reads = {}
    for label, fn in (("sum fp32", lambda: torch.sum(buf)), ("amax bf16", lambda: torch.amax(half))):
        t, clk = _timed(fn, clock, rounds, warmup)
        reads[label] = {"bytes_per_s": nbytes / t, "median_us": round(t * 1e6, 2), **clk}
    best = max(reads, key=lambda k: reads[k]["bytes_per_s"])
    method["read"] = {"bytes": nbytes, "methods": reads, "best": best}
    n = buf.numel() // 2
    src, dst = buf[:n], buf[n:2 * n]
    t, clk = _timed(lambda: dst.copy_(src), clock, rounds, warmup)
    method["copy"] = {"bytes_each_way": n * 4, "counted": "read + written", "median_us": round(t * 1e6, 2), **clk}
    return {"read_bandwidth_bytes_per_s": reads[best]["bytes_per_s"], "copy_bandwidth_bytes_per_s": 2 * n * 4 / t}


def measure(device: str = "cuda", *, quick: bool = False, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure the ceilings of the GPU behind ``device``; returns the cache entry (see the module docstring)."""
    import torch

    from .errors import NoGPUError
    from .timing import make_clock

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        raise NoGPUError("measuring the roofline ceilings (python -m pytest_kforge.calibrate)")
    dev = torch.device(device)
    dev = dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    rounds_bw, rounds_mm, warmup = (30, 15, 3) if quick else (100, 40, 5)
    read_gib = 1 if quick else 2
    clock = make_clock(str(device))
    method: dict[str, Any] = {"timer": "pytest_kforge.timing.time_launch (CUDA events, L2 flush + spin per round, "
                                       "throttled rounds re-taken), median of the rounds",
                              "warmup": warmup, "rounds_bandwidth": rounds_bw, "rounds_matmul": rounds_mm}
    entry: dict[str, Any] = {}

    log(f"DRAM read and copy: {read_gib} GiB buffer")
    entry.update(_bandwidths(torch, dev, read_gib * _GIB, clock, rounds_bw, warmup, method))

    shapes = [(8192, 8192, 8192)] if quick else [(8192, 8192, 8192), (16384, 8192, 8192), (8192, 16384, 4096)]

    def best_of(kind: str, make: Callable[[int, int, int], Callable[[], Any]]) -> tuple[float, dict[str, Any]]:
        runs = {}
        for m, n, k in shapes:
            t, clk = _timed(make(m, n, k), clock, rounds_mm, warmup)
            runs[f"{m}x{n}x{k}"] = {"flops_per_s": 2.0 * m * n * k / t, "median_us": round(t * 1e6, 1), **clk}
        best = max(runs, key=lambda s: runs[s]["flops_per_s"])
        method[kind] = {"shapes": runs, "best": best, "data": "random (torch.randn)"}
        return float(runs[best]["flops_per_s"]), runs[best]

    def bf16_mm(m: int, n: int, k: int) -> Callable[[], Any]:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)

    log(f"bf16 matmul: {', '.join('x'.join(map(str, s)) for s in shapes)}")
    entry["bf16_flops_per_s"] = best_of("bf16", bf16_mm)[0]

    fp8 = getattr(torch, "float8_e4m3fn", None)
    scaled_mm = getattr(torch, "_scaled_mm", None)
    if fp8 is None or scaled_mm is None:
        entry["fp8_flops_per_s"], entry["fp8_note"] = None, f"torch {torch.__version__} has no float8_e4m3fn/_scaled_mm"
    elif props.major < 9 and (props.major, props.minor) != (8, 9):
        entry["fp8_flops_per_s"], entry["fp8_note"] = None, f"compute capability {props.major}.{props.minor} has no fp8"
    else:
        one = torch.ones((), device=dev, dtype=torch.float32)

        def fp8_mm(m: int, n: int, k: int) -> Callable[[], Any]:
            a = torch.randn(m, k, device=dev).to(fp8)
            b = torch.randn(n, k, device=dev).to(fp8).t()  # column-major, as _scaled_mm wants
            return lambda: scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

        log("fp8 e4m3 _scaled_mm (per-tensor scales, fast accumulation)")
        try:
            entry["fp8_flops_per_s"] = best_of("fp8_e4m3", fp8_mm)[0]
            entry["fp8_note"] = "torch._scaled_mm, per-tensor scales, use_fast_accum=True, bf16 out"
        except (RuntimeError, TypeError) as exc:
            entry["fp8_flops_per_s"], entry["fp8_note"] = None, f"torch._scaled_mm failed: {str(exc).splitlines()[0]}"
    torch.cuda.empty_cache()

    name = str(torch.cuda.get_device_name(dev))
    return {
        "bandwidth_bytes_per_s": max(entry["read_bandwidth_bytes_per_s"], entry["copy_bandwidth_bytes_per_s"]),
        "flops_per_s": entry["bf16_flops_per_s"],
        **entry,
        "source": "python -m pytest_kforge.calibrate" + (" --quick" if quick else ""),
        "measured": True, "quick": quick,
        "date": _dt.date.today().isoformat(),
        "device": name, "sm_count": props.multi_processor_count, "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / _GIB, 1), "clocks": _nvml_clocks(str(device)),
        "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(),
        "method": method,
    }


# ---- the command ---------------------------------------------------------------------------------
def _fig(value: Any, unit: str) -> str:
    return f"{_num(value / 1e12):>8} {unit}" if isinstance(value, (int, float)) and value else f"{'-':>8} {unit}"


def format_table(entries: Mapping[str, Mapping[str, Any]], title: str) -> str:
    """A short table: one row per device, the roofline and the measured figures."""
    head = (f"{'device':<26} {'roofline':>11} {'':>13} {'read':>11} {'copy':>11} {'bf16':>15} {'fp8':>15}  source")
    rows = [title, head]
    for name, e in entries.items():
        src = e.get("source", "")
        src += f", {e['date']}" if e.get("date") else ""
        rows.append(f"{name:<26} {_fig(e['bandwidth_bytes_per_s'], 'TB/s')} {_fig(e['flops_per_s'], 'TFLOP/s')} "
                    f"{_fig(e.get('read_bandwidth_bytes_per_s'), 'TB/s')} {_fig(e.get('copy_bandwidth_bytes_per_s'), 'TB/s')} "
                    f"{_fig(e.get('bf16_flops_per_s'), 'TFLOP/s')} {_fig(e.get('fp8_flops_per_s'), 'TFLOP/s')}  {src}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.calibrate",
                                 description="Measure this GPU's roofline ceilings and cache them by device name.")
    ap.add_argument("--out", type=Path, default=None, help="also write the measurement to FILE ({device: entry})")
    ap.add_argument("--quick", action="store_true", help="fewer rounds, 1 GiB buffers, one matmul shape (~10 s)")
    ap.add_argument("--show", action="store_true", help="print the cached and shipped figures; measure nothing")
    ap.add_argument("--record-known", action="store_true",
                    help=f"write the measurement into the shipped {KNOWN_FILE.name} (with --from: a --out file's)")
    ap.add_argument("--from", dest="from_file", type=Path, default=None, metavar="FILE",
                    help="with --record-known: take the entries of a file --out wrote instead of measuring")
    ap.add_argument("--device", default="cuda", help="the CUDA device to measure (default cuda)")
    args = ap.parse_args(argv)
    try:
        if args.from_file is not None and not args.record_known:
            ap.error("--from FILE goes with --record-known (python -m pytest_kforge.calibrate --record-known --from FILE)")
        if args.show:
            print(format_table(load_entries(cache_path()), f"cached ({_short(cache_path())}):"))
            print(format_table(load_entries(KNOWN_FILE), f"shipped ({KNOWN_FILE}):"))
            return 0
        if args.from_file is not None:
            taken = load_entries(args.from_file)
            if not taken:
                raise CalibrationError(f"{args.from_file} holds no device entries; write one with --out FILE on the GPU")
            for name, entry in taken.items():
                save_entry(KNOWN_FILE, name, entry)
            print(format_table(taken, f"recorded into {KNOWN_FILE}:"))
            return 0
        entry = measure(args.device, quick=args.quick, log=lambda s: print(f"  measuring {s}", file=sys.stderr))
    except KforgeError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    name = entry["device"]
    targets = [cache_path(), *([args.out] if args.out else []), *([KNOWN_FILE] if args.record_known else [])]
    for path in targets:
        save_entry(path, name, entry)
    print(format_table({name: entry}, f"{name}: {entry['sm_count']} SMs, torch {entry['torch']}, CUDA {entry['cuda']}, "
                                      f"clocks {entry['clocks'] or 'n/a'}, read best: {entry['method']['read']['best']}"))
    if entry.get("fp8_flops_per_s") is None:
        print(f"fp8: {entry['fp8_note']}")
    print("written: " + ", ".join(_short(p) for p in targets))
    spread = max(float(v.get("spread_pct", 0)) for v in entry["method"]["read"]["methods"].values())
    if spread > 5:
        print(f"note: the read rounds spread {spread:.1f}% (IQR/median): the GPU was busy or throttling; run it again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
