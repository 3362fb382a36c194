"""Errors the harness raises for bad input.  Each message is one sentence: what is wrong,
what exists, and what to do."""

from __future__ import annotations

__all__ = [
    "KforgeError",
    "UnknownKernelError",
    "UnknownVersionError",
    "BadVersionModuleError",
    "DSLNotInstalledError",
    "NoGPUError",
    "ConfigError",
    "install_command",
]


def install_command(extra: str = "gpu") -> str:
    """The command that installs a toolchain extra (``gpu``: cuTile + CuTe DSL); the doctor, the
    registry and the profiler all word a missing toolchain with it."""
    return f'pip install -e ".[{extra}]"'


class KforgeError(Exception):
    """Base class: a user-facing problem with a one-line explanation."""


class UnknownKernelError(KforgeError, LookupError):
    def __init__(self, name: str, known: list[str], where: str) -> None:
        super().__init__(
            f"unknown kernel {name!r}: {where} has {', '.join(known) or 'no kernels'}; "
            f"pass one of those to --kernel or add kernels/{name}/spec.py"
        )


class UnknownVersionError(KforgeError, LookupError):
    def __init__(self, kernel: str, version: str, known: list[str]) -> None:
        super().__init__(
            f"kernel {kernel!r} has no version {version!r}; it has {', '.join(known) or 'none'} "
            f"(or 'all'); pick one with --kernel-version or add kernels/{kernel}/{version}.py"
        )


class BadVersionModuleError(KforgeError):
    """A version module is missing a required attribute or fails to import."""


class DSLNotInstalledError(KforgeError, ImportError):
    def __init__(self, kernel: str, version: str, language: str, module: str, extra: str) -> None:
        super().__init__(
            f"{kernel} {version} is written in {language}, but `import {module}` failed; "
            f"install it with `{install_command(extra)}` (or run `python -m pytest_kforge.doctor`)"
        )


class NoGPUError(KforgeError, RuntimeError):
    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs a CUDA GPU, but torch.cuda.is_available() is False here; "
            f"run it on a GPU machine (CPU-only runs skip GPU tests)"
        )


class ConfigError(KforgeError, ValueError):
    """Malformed ``[tool.kforge]`` / ``kforge.toml`` configuration."""
