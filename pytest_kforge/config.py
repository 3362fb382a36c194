"""Project configuration: ``[tool.kforge]`` in pyproject.toml, or a ``kforge.toml``.

``kforge.toml`` (top-level keys, or a ``[kforge]`` table) wins over pyproject.toml when both
exist.  Every key is optional::

    [tool.kforge]
    kernels_dir = "kernels"          # relative to the file that sets it
    default_kernel = "mla"           # used by the kforge CLI when --kernel is omitted
    peak_bandwidth_tbs = 4.3         # roofline ceilings; when unset, the GPU's calibrated or shipped figures
    peak_tflops = 790.0              # (python -m pytest_kforge.calibrate), else the H200's measured ones
    rounds = 100                     # timed rounds per trial config
    warmup = 10                      # untimed launches before timing
    clock_guard_pct = 99.0           # re-take rounds the GPU ran throttled below 99% of its max clock (0: off)
    clock_witness_ms = 50.0          # after timing, count the SM clock inside a burst this long (0: off)
    fuzz_examples = 25               # hypothesis max_examples of test_fuzz (default 25, 10 on CPU)
    trials = ["decode", "spec"]      # trial names run by default (else each spec's default)

    [tool.kforge.trial_matrix.mla]   # per-kernel override / extension of the trial matrix
    decode = {b = 32, s = 1, t = 4096, h = 128}

A malformed file raises :class:`~pytest_kforge.errors.ConfigError` with one sentence naming the
file, the key, what is wrong and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["KforgeConfig", "load_config", "find_config_file"]

_NAME = r"[a-z][a-z0-9_]*"
_KNOWN = {
    "kernels_dir": str,
    "default_kernel": str,
    "peak_bandwidth_tbs": float,
    "peak_tflops": float,
    "rounds": int,
    "warmup": int,
    "clock_guard_pct": float,
    "clock_witness_ms": float,
    "fuzz_examples": int,
    "trials": list,
    "trial_matrix": dict,
}


@dataclasses.dataclass(frozen=True)
class KforgeConfig:
    """The validated settings (defaults where the file is silent)."""

    kernels_dir: Path
    default_kernel: str | None = None
    peak_bandwidth_tbs: float = 4.3
    peak_tflops: float = 790.0
    rounds: int = 100
    warmup: int = 10
    clock_guard_pct: float = 99.0
    clock_witness_ms: float = 50.0
    fuzz_examples: int | None = None  # None: 25 on a GPU, 10 on CPU
    trials: tuple[str, ...] | None = None
    trial_matrix: Mapping[str, Mapping[str, Mapping[str, int]]] = dataclasses.field(default_factory=dict)
    source: Path | None = None
    #: the keys the file set (the rest are defaults): a peak_* set here wins over the GPU's calibration
    explicit_keys: frozenset[str] = frozenset()


def find_config_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest ``kforge.toml`` or pyproject.toml with ``[tool.kforge]`` at or above ``start``."""
    for d in (start, *start.parents):
        kt = d / "kforge.toml"
        if kt.is_file():
            data = _read(kt)
            return kt, _table(kt, data.get("kforge", data), "[kforge]")
        pp = d / "pyproject.toml"
        if pp.is_file():
            data = _read(pp)
            tool = data.get("tool", {})
            if isinstance(tool, dict) and "kforge" in tool:
                return pp, _table(pp, tool["kforge"], "[tool.kforge]")
    return None


def _table(path: Path, value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {name} must be a table of settings, got {type(value).__name__}")
    return dict(value)


def load_config(rootdir: str | Path) -> KforgeConfig:
    """Read and validate the configuration found at or above ``rootdir``."""
    root = Path(rootdir).resolve()
    found = find_config_file(root)
    if found is None:
        return KforgeConfig(kernels_dir=root / "kernels")
    path, table = found
    where = f"[tool.kforge] of {path}" if path.name == "pyproject.toml" else str(path)
    kwargs: dict[str, Any] = {"source": path, "explicit_keys": frozenset(table)}
    for key, value in table.items():
        if key not in _KNOWN:
            raise ConfigError(f"{where}: unknown key {key!r}; known keys are {', '.join(sorted(_KNOWN))}")
        want = _KNOWN[key]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be a {want.__name__}, got {type(value).__name__} {value!r}")
        kwargs[key] = value
    for key in ("peak_bandwidth_tbs", "peak_tflops", "rounds", "fuzz_examples"):
        if key in kwargs and not (0 < kwargs[key] < math.inf):
            raise ConfigError(f"{where}: {key} must be positive, got {kwargs[key]!r}")
    if kwargs.get("warmup", 0) < 0:
        raise ConfigError(f"{where}: warmup must be 0 or more, got {kwargs['warmup']!r}")
    if not 0 <= kwargs.get("clock_witness_ms", 0.0) <= 1000:
        raise ConfigError(f"{where}: clock_witness_ms must be from 0 (off) to 1000 milliseconds, "
                          f"got {kwargs['clock_witness_ms']!r}")
    if not 0 <= kwargs.get("clock_guard_pct", 0.0) < 100:
        raise ConfigError(f"{where}: clock_guard_pct must be from 0 (off) to below 100, got {kwargs['clock_guard_pct']!r}")
    try:
        kwargs["kernels_dir"] = (path.parent / kwargs.get("kernels_dir", "kernels")).resolve()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: kernels_dir {kwargs.get('kernels_dir')!r} is not a usable path ({exc})") from None
    if "trials" in kwargs:
        names = kwargs["trials"]
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{where}: trials must be a non-empty list of trial names, got {names!r}")
        kwargs["trials"] = tuple(names)
    if "trial_matrix" in kwargs:
        kwargs["trial_matrix"] = _check_matrix(where, kwargs["trial_matrix"])
    return KforgeConfig(**kwargs)


def _check_matrix(where: str, matrix: Mapping[str, Any]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for kernel, trials in matrix.items():
        if not isinstance(trials, dict):
            raise ConfigError(f"{where}: trial_matrix.{kernel} must be a table of trial name -> parameters")
        out[kernel] = {}
        for name, params in trials.items():
            ok = isinstance(params, dict) and params and re.fullmatch(_NAME, name) and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 and re.fullmatch(_NAME, k)
                for k, v in params.items()
            )
            if not ok:
                raise ConfigError(
                    f"{where}: trial_matrix.{kernel}.{name} must map lower-case parameter names to positive "
                    f"integers, e.g. decode = {{b = 32, s = 1}}, got {params!r}"
                )
            out[kernel][name] = dict(params)
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix the file or remove it") from None
