"""Identity of the machine a result was measured on: GPU, driver, torch and DSL versions.

Everything is gathered lazily and cached; nothing here fails when there is no GPU (the GPU
fields are then ``None``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import shutil
import subprocess
from typing import Any

__all__ = ["gpu_identity", "gpu_name", "dsl_versions", "l2_cache_bytes"]

_DISTS = ("torch", "cuda-tile", "nvidia-cutlass-dsl")


def dsl_versions() -> dict[str, str | None]:
    """Installed versions of torch and the kernel DSLs (``None`` when not installed)."""
    out: dict[str, str | None] = {}
    for dist in _DISTS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = res.stdout.strip().splitlines()
    return line[0].strip() if res.returncode == 0 and line else None


@functools.lru_cache(maxsize=None)
def gpu_identity(device_index: int = 0) -> dict[str, Any]:
    """``{"gpu": name|None, "capability", "sm_count", "memory_gib", "l2_bytes", "driver", "cuda", ...}``."""
    info: dict[str, Any] = {"gpu": None, "capability": None, "sm_count": None, "memory_gib": None,
                            "l2_bytes": None, "driver": None, "cuda": None}
    info.update(dsl_versions())
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return info
    info["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        return info
    props = torch.cuda.get_device_properties(device_index)
    info.update(
        gpu=props.name,
        capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        memory_gib=round(props.total_memory / 2**30, 1),
        l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
        driver=_driver_version(),
    )
    return info


def gpu_name() -> str | None:
    return gpu_identity()["gpu"]


def l2_cache_bytes(default: int = 64 * 2**20) -> int:
    """The device's L2 size, or ``default`` (64 MiB, more than any current GPU) when unknown."""
    return gpu_identity()["l2_bytes"] or default
