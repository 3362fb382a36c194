"""pytest-kforge: optimise a GPU kernel version by version and prove each step."""

from __future__ import annotations

from .registry import Kernel, Registry, Version, load_kernel, load_version
from .spec import KernelSpec, Roofline, Tolerance, TrialConfig

__version__ = "0.1.0"
__all__ = ["Kernel", "KernelSpec", "Registry", "Roofline", "Tolerance", "TrialConfig", "Version",
           "load_kernel", "load_version", "__version__"]
