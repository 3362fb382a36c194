"""``python -m pytest_kforge.doctor``: is this machine ready to build and time kernels?

One line per check (``ok``, ``warn`` or ``FAIL`` and what to do); exits 1 when something needed is
missing.  Besides the obvious (torch, a CUDA GPU, the DSLs, ncu) it catches the CUDA_HOME trap:
tileiras 13.4 compiles with its own libnvvm/ptxas, and when ``CUDA_HOME`` points at an older
toolkit it fails with exit code 5 and only "failed to compile Tile IR program".
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["Check", "run_checks", "check_cuda_home", "parse_cuda_version", "main"]


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "FAIL"
    detail: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name}: {self.detail}"


def parse_cuda_version(text: str) -> tuple[int, int] | None:
    """``(13, 4)`` from ``nvcc``/``tileiras --version`` output or a CUDA ``version.json``."""
    m = re.search(r"release (\d+)\.(\d+)", text) or re.search(r'"version"\s*:\s*"(\d+)\.(\d+)', text) \
        or re.search(r"V(\d+)\.(\d+)\.\d+", text) or re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _run(cmd: list[str]) -> str:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"<failed: {exc}>"
    return res.stdout + res.stderr


def cuda_home_version(cuda_home: str) -> tuple[int, int] | None:
    root = Path(cuda_home)
    vj = root / "version.json"
    if vj.is_file():
        return parse_cuda_version(vj.read_text(errors="replace"))
    nvcc = root / "bin" / "nvcc"
    return parse_cuda_version(_run([str(nvcc), "--version"])) if nvcc.exists() else None


def check_cuda_home(tileiras: tuple[int, int] | None, cuda_home: str | None,
                    home_version: tuple[int, int] | None) -> Check:
    """The CUDA_HOME trap: a CUDA_HOME toolkit whose version differs from tileiras's."""
    name = "CUDA_HOME"
    if not cuda_home:
        return Check(name, "ok", "not set (tileiras uses its own libnvvm/ptxas)")
    if tileiras is None or home_version is None:
        return Check(name, "warn", f"{cuda_home} is set; could not compare its version with tileiras's")
    if home_version != tileiras:
        return Check(name, "FAIL",
                     f"{cuda_home} is CUDA {home_version[0]}.{home_version[1]} but tileiras is "
                     f"{tileiras[0]}.{tileiras[1]}, so cuTile compiles fail with exit 5 \"failed to compile Tile "
                     f"IR program\"; `unset CUDA_HOME` or `pip install \"cuda-tile[tileiras]\"` matching it")
    return Check(name, "ok", f"{cuda_home} is CUDA {home_version[0]}.{home_version[1]}, same as tileiras")


def _import(mod: str) -> str | None:
    import importlib

    try:
        importlib.import_module(mod)
    except Exception as exc:  # noqa: BLE001 - any failure means unusable
        return f"{type(exc).__name__}: {exc}"
    return None


DSLS = ("cutile-dsl", "cute-dsl")


def run_checks(dsls: tuple[str, ...] = DSLS) -> tuple[list[Check], bool]:
    """All checks, and whether everything *needed* passed; the toolchain of a DSL not in ``dsls`` is not
    checked (a run of CuTe versions only needs no cuTile)."""
    from .errors import install_command
    from .gpuinfo import dsl_versions, gpu_identity

    checks: list[Check] = []
    vers = dsl_versions()
    err = _import("torch")
    checks.append(Check("torch", "FAIL" if err else "ok", err or f"torch {vers['torch']}"))
    ident = gpu_identity() if not err else {"gpu": None}
    if ident.get("gpu"):
        checks.append(Check("GPU", "ok", f"{ident['gpu']} (sm {ident['capability']}, driver {ident['driver']}, "
                                         f"CUDA {ident['cuda']})"))
    else:
        checks.append(Check("GPU", "FAIL", "torch.cuda.is_available() is False; kernels and timing need a "
                                           "CUDA GPU (CPU runs only check torch versions)"))
    if "cutile-dsl" in dsls:
        checks += _cutile_checks(vers, ident, install_command())
    else:
        checks.append(Check("cuTile", "ok", "not checked (this run has no cutile-dsl version)"))
    if "cute-dsl" in dsls:
        err = _import("cutlass.cute")
        checks.append(Check("CuTe DSL", "FAIL" if err else "ok",
                            f"import cutlass.cute failed ({err}); {install_command()}" if err
                            else f"nvidia-cutlass-dsl {vers['nvidia-cutlass-dsl']}"))
        if not err:
            checks.append(cute_flavour_check(_cute_cuda_version()))
    else:
        checks.append(Check("CuTe DSL", "ok", "not checked (this run has no cute-dsl version)"))
    ncu = shutil.which("ncu")
    checks.append(Check("ncu", "ok" if ncu else "warn",
                        ncu or "not on PATH; profiling (--kforge-profile) needs Nsight Compute"))
    return checks, all(c.status != "FAIL" for c in checks)


def _cute_cuda_version() -> tuple[int, int] | None:
    try:
        from cutlass.base_dsl.version_info import CUDA_VERSION
    except Exception:  # noqa: BLE001 -- an older DSL without it: nothing to say
        return None
    return int(CUDA_VERSION.major), int(CUDA_VERSION.minor)


def cute_flavour_check(cuda: tuple[int, int] | None) -> Check:
    """Which CUDA build of the CuTe DSL loaded: the plain ``pip install nvidia-cutlass-dsl`` brings only the cu12
    build (PTX ISA 8.8), whose code differs from the cu13 build's (ISA 9.4) that the frozen-version record and
    every measured version use (stop 45's CI failed on all 63 CuTe versions for this)."""
    if cuda is None:
        return Check("CuTe DSL flavour", "warn", "the DSL does not say which CUDA build it loaded")
    if cuda[0] < 13:
        return Check("CuTe DSL flavour", "warn", f"the cu{cuda[0]} build (CUDA {cuda[0]}.{cuda[1]}) loaded: its PTX "
                     "differs from the cu13 build the versions were measured and frozen with; pip install "
                     "'nvidia-cutlass-dsl[cu13]==4.8.1'")
    return Check("CuTe DSL flavour", "ok", f"the cu{cuda[0]} build (CUDA {cuda[0]}.{cuda[1]})")


def _cutile_checks(vers: dict, ident: dict, install: str) -> list[Check]:
    """cuTile's import, its tileiras compiler and the CUDA_HOME trap."""
    out: list[Check] = []
    err = _import("cuda.tile")
    out.append(Check("cuTile", "FAIL" if err else "ok",
                     f"import cuda.tile failed ({err}); {install}" if err else f"cuda-tile {vers['cuda-tile']}"))
    tileiras = shutil.which("tileiras")
    tv = parse_cuda_version(_run([tileiras, "--version"])) if tileiras else None
    if tileiras is None:
        out.append(Check("tileiras", "FAIL", "not on PATH; pip install \"cuda-tile[tileiras]\""))
    elif tv is not None and tv < (13, 3) and str(ident.get("capability", "")).startswith("9."):
        out.append(Check("tileiras", "FAIL", f"{tileiras} is {tv[0]}.{tv[1]}; Hopper needs >= 13.3"))
    else:
        out.append(Check("tileiras", "ok", f"{tileiras} ({'%d.%d' % tv if tv else 'version unknown'})"))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    out.append(check_cuda_home(tv, home, cuda_home_version(home) if home else None))
    return out


def main(argv: list[str] | None = None) -> int:
    """``[--json] [--dsl cute-dsl[,cutile-dsl]]``: ``--dsl`` checks only the named DSLs' toolchains."""
    args = list(sys.argv[1:] if argv is None else argv)
    dsls: tuple[str, ...] = DSLS
    if "--dsl" in args:
        i = args.index("--dsl")
        picked = tuple(d.strip() for d in (args[i + 1] if i + 1 < len(args) else "").split(",") if d.strip())
        unknown = [d for d in picked if d not in DSLS]
        if not picked or unknown:
            print(f"doctor: --dsl wants a comma list of {', '.join(DSLS)}; got {', '.join(unknown) or 'nothing'}")
            return 2
        dsls = picked
    checks, ok = run_checks(dsls)
    if "--json" in args:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            print(c.line())
        print("doctor: ready" if ok else "doctor: something needed is missing (FAIL lines above)")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
