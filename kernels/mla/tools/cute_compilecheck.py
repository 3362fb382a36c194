"""Compile the CuTe DSL MLA kernels for sm_90a WITHOUT a GPU and report registers / spills.

Needs Python 3.12 with the DSL importable (the wheels ship cp312 binaries) and, for the
register report, a ``ptxas`` on PATH.  Example (from the repository root):

    CUTE_DSL_ARCH=sm_90a /tmp/venv-cute/bin/python kernels/mla/tools/cute_compilecheck.py \\
        sm80:1:128 sm80_dedup:16:128:direct sm80_dedup:5:32

Each argument is ``kind:s:h[:direct][:paired]`` (decode runs the ``sm90_seesaw_pair*`` kinds as
``kind:1:128:direct:paired``, spec as ``kind:16:128:direct``).  Every line also lists a named barrier that sits at more
than one place in the PTX (``_cute_ptxreplay.barrier_sites``): legitimate for separate sync points
(v4_cute's ``bar.sync 1 x3``, v10_cute's ``bar.sync 6 x3``), a hang when a per-thread branch splits
a warp between two copies of one barrier (run 9's probe) -- read the branch above each site.  It fails
on wgmma instructions that ptxas serialises (``_cute_ptxas.serialized_wgmma``: the C75xx "Potential Performance
Loss" notes), and for ``sm80_dedup`` it also replays the P-exchange shared-memory addresses of all 256
threads from the PTX (``_cute_ptxreplay``) and fails if any is off.  The DSL's NVVM emits PTX ISA 9.4; an older local
ptxas (13.0 accepts 9.0) is fed the same text with the version line lowered, which is fine for a
resource estimate but is not the binary the GPU runs.

Frozen versions (:mod:`pytest_kforge.frozen`): ``--frozen check [--versions all|v1_cute,...] [--jobs N]`` compiles
every CuTe version's kernels on the default trial shapes and compares their normalised PTX digests (and the cuTile
versions' device-function ASTs) with ``docs/kernels/mla/frozen.json``; ``--frozen write`` records them (a new
version, once measured).  CI runs the check.  ``--fresh`` compiles each version in its own process, so no digest
depends on what a worker compiled before it (a combine's PTX can: v23_cute, v33_cute); use it to prove a layout move
(it replaced ``tools/ptx_hashes.py``, whose record of the issue-33 move is in git history).

Before an all-version run, ``--prepare all`` (or ``--prepare v1_cute,v59_cute``) runs every CuTe version's own
``prepare`` on the trial and self-check fuzz shapes, so a host-side error on any version's path shows here, not on
the H200.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def trial_params() -> tuple[dict[str, int], ...]:
    """The spec's default trial shapes (``spec.py`` and ``pytest_kforge`` import without torch)."""
    _package()
    from kforge_kernels.mla.spec import SPEC

    return tuple(dict(SPEC.trials[t]) for t in SPEC.default_trials)


def _package() -> None:
    """Install ``kforge_kernels.mla`` as the registry does (its versions resolve from ``versions/``)."""
    if str(ROOT) not in sys.path:  # pytest_kforge, when the project is not installed
        sys.path.insert(0, str(ROOT))
    from pytest_kforge.registry import load_kernel

    load_kernel("mla", ROOT / "kernels")


def version_names(arg: str) -> list[str]:
    """``all`` (every ``v*_cute.py``, in version order) or a comma list, each checked to exist."""
    _package()
    from pytest_kforge.registry import version_sort_key

    mla = ROOT / "kernels" / "mla" / "versions"
    if arg == "all":
        return sorted((p.stem for p in mla.glob("v*_cute.py")), key=version_sort_key)
    names = [n for n in arg.split(",") if n]
    missing = [n for n in names if not (n.startswith("v") and n.endswith("_cute") and (mla / f"{n}.py").is_file())]
    if missing or not names:
        raise SystemExit(f"--prepare {arg}: no kernels/mla/versions/<name>.py for {', '.join(missing) or 'an empty list'}; "
                         "give 'all' or a comma list of CuTe versions such as v1_cute,v59_cute.")
    return names


def prepare_versions(names: list[str]) -> int:
    """Run each version's own ``prepare`` on the trial shapes and the self-check's fuzz shapes (with their
    config overrides): the host's compile paths for one-split, split and merged-pair shapes, compiled with no GPU
    (the harness's own fuzz draws other sizes of the same paths).  One line per
    version; exit status 1 when any shape failed.  Run 24 shows why: a host attribute only the sm90 classes had
    failed v1_cute-v3_cute's split path on the H200, and compile checks of sm90 kinds never reach that path."""
    import importlib
    import traceback

    from kforge_kernels.mla.tools.cute_selfcheck import FUZZ

    shapes = [(p, {}) for p in trial_params()]
    shapes += [({"b": b, "s": s, "t": max(lens), "h": h}, cfg) for b, s, h, lens, cfg in FUZZ]
    bad = 0
    for name in names:
        t0, fails = time.time(), []
        try:
            mod = importlib.import_module(f"kforge_kernels.mla.{name}")
        except Exception as exc:  # noqa: BLE001 - report every version
            fails.append(f"import: {type(exc).__name__}: {exc}")
            mod = None
        for params, cfg in shapes if mod is not None else ():
            try:
                mod.prepare(params, cfg)
            except Exception as exc:  # noqa: BLE001
                where = traceback.extract_tb(exc.__traceback__)[-1]
                fails.append(f"{params} {cfg or ''}: {type(exc).__name__}: {exc} "
                             f"({Path(where.filename).name}:{where.lineno})")
        bad += bool(fails)
        print(f"{name}: " + ("FAILED: " + " | ".join(fails) if fails else
                             f"ok, {len(shapes)} shapes prepared in {time.time() - t0:.1f} s"), flush=True)
    return 1 if bad else 0


# ---- frozen versions: digests of what each version runs (pytest_kforge.frozen) ---------------------------
def _mla_kernel():
    from pytest_kforge.registry import Registry

    return Registry(ROOT / "kernels").kernel("mla")


def cute_digests(names: list[str]) -> dict[str, dict]:
    """``{version: {"kind": "ptx", "kernels": {label: digest}}}``: every kernel each CuTe version's ``prepare``
    compiles on the default trial shapes, its PTX normalised (:func:`pytest_kforge.frozen.normalize_ptx`).  A
    kernel two versions share is compiled once (``cute/host.py``'s cache)."""
    from pytest_kforge.frozen import digest, normalize_ptx

    kernel = _mla_kernel()
    from kforge_kernels.mla.cute import host

    original = host.compiled
    touched: list[tuple] = []

    def recording(kind, s, h, stages, direct=False, paired=False):
        touched.append((kind, s, h, stages, direct, paired))
        return original(kind, s, h, stages, direct=direct, paired=paired)

    host.compiled = recording
    out: dict[str, dict] = {}
    try:
        for name in names:
            version = kernel.version(name)
            kernels: dict[str, str] = {}
            for trial in kernel.spec.default_trials:
                touched.clear()
                version.module.prepare(dict(kernel.spec.trials[trial]))
                for kind, s, h, stages, direct, paired in dict.fromkeys(touched):
                    f_main, f_comb, *_ = original(kind, s, h, stages, direct=direct, paired=paired)
                    label = f"{trial}:{kind}:s{s}:h{h}:stages{stages}" + (":direct" if direct else "") + \
                        (":paired" if paired else "")
                    for part, fn in (("main", f_main), ("combine", f_comb)):
                        if fn is not None:
                            ptx = getattr(fn, "__ptx__", None)
                            if not ptx:
                                raise RuntimeError(f"{name}: {label} kept no PTX; run with KFORGE_CUTE_OPTIONS=--keep-ptx")
                            kernels[f"{label}:{part}"] = digest(normalize_ptx(ptx))
            out[name] = {"kind": "ptx", "kernels": kernels}
            print(f"{name}: {len(kernels)} kernels", file=sys.stderr, flush=True)
    finally:
        host.compiled = original
    return out


def cutile_digests(names: list[str]) -> dict[str, dict]:
    """``{version: {"kind": "source-ast", ...}}`` for cuTile versions: compiling needs ``tileiras``, which a CPU
    machine has no binary of, so the AST of their device functions is what is frozen here."""
    from pytest_kforge.frozen import device_function_digests, kernel_folder_modules

    kernel = _mla_kernel()
    return {n: {"kind": "source-ast", "kernels": device_function_digests(
        kernel_folder_modules(kernel.version(n).module, "kforge_kernels."))} for n in names}


def frozen_versions(arg: str) -> tuple[list[str], list[str]]:
    """(CuTe, cuTile) versions for ``all`` or a comma list (every version but the torch reference)."""
    kernel = _mla_kernel()
    names = kernel.version_names() if arg == "all" else [n for n in arg.split(",") if n]
    unknown = [n for n in names if n not in kernel.version_names()]
    if unknown:
        raise SystemExit(f"--versions: {', '.join(unknown)} not a version of mla; give 'all' or a comma list.")
    langs = {n: kernel.version(n).language for n in names}
    return [n for n in names if langs[n] == "cute-dsl"], [n for n in names if langs[n] == "cutile-dsl"]


def _toolchain() -> dict[str, str]:
    import importlib.metadata as md

    # the CUDA flavour the DSL loaded (its libs-cu12 or libs-cu13 build) sets the PTX ISA version and changes the
    # generated code: a machine with both picks the newest when no driver is present, so CI installs [cu13]
    from cutlass.base_dsl.version_info import CUDA_VERSION

    return {"arch": os.environ.get("CUTE_DSL_ARCH", ""), "nvidia-cutlass-dsl": md.version("nvidia-cutlass-dsl"),
            "cuda": f"{CUDA_VERSION.major}.{CUDA_VERSION.minor}"}


def frozen_main(mode: str, arg: str, jobs: int, fresh: bool = False) -> int:
    """``--frozen dump|write|check``: digests of the versions (``dump``: JSON on stdout, one worker's share),
    written into ``docs/kernels/mla/frozen.json`` or checked against it (exit 1 with one line per change)."""
    os.environ["KFORGE_CUTE_OPTIONS"] = (os.environ.get("KFORGE_CUTE_OPTIONS", "") + " --keep-ptx").strip()
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="cute_ptx_") as tmp:
        os.chdir(tmp)  # --keep-ptx also writes .ptx files into the cwd
        try:
            return _frozen(mode, arg, jobs, fresh)
        finally:
            os.chdir(here)


def _frozen(mode: str, arg: str, jobs: int, fresh: bool = False) -> int:
    import json
    import subprocess

    from pytest_kforge.frozen import FrozenRecord, compare, frozen_path

    cute, cutile = frozen_versions(arg)
    if mode == "dump":
        print(json.dumps(cute_digests(cute)))
        return 0
    t0 = time.time()
    now = cutile_digests(cutile)
    if fresh:  # one process per version: no digest can depend on what a process compiled before (slower)
        slices = [[v] for v in cute]
    else:  # contiguous slices: neighbouring versions share kernels, and each worker compiles a shared one once
        step = -(-len(cute) // max(1, jobs)) if cute else 1
        slices = [cute[i:i + step] for i in range(0, len(cute), step)]
    running: list[subprocess.Popen[str]] = []
    while slices or running:
        while slices and len(running) < max(1, jobs):
            part = slices.pop(0)
            running.append(subprocess.Popen([sys.executable, __file__, "--frozen", "dump", "--versions",
                                             ",".join(part)], stdout=subprocess.PIPE, text=True))
        proc = running.pop(0)
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            for other in running:
                other.kill()
            print(f"--frozen: a compile worker failed (exit {proc.returncode}); its versions are not checked")
            return 1
        now.update(json.loads(stdout))
    path = frozen_path(ROOT, "mla")
    took = f"{len(now)} versions in {time.time() - t0:.0f} s"
    if mode == "write":
        old = FrozenRecord.load(path).versions if path.exists() else {}
        FrozenRecord("mla", {**old, **now}, _toolchain()).write(path)
        print(f"--frozen write: {path} ({took})")
        return 0
    record = FrozenRecord.load(path)
    if record.toolchain != _toolchain():
        want = record.toolchain
        flavour = f"[cu{want['cuda'].split('.')[0]}]" if "cuda" in want else ""
        print(f"--frozen check: {path} was recorded with {want}, this machine has {_toolchain()}; check with that "
              f"toolchain (pip install 'nvidia-cutlass-dsl{flavour}=={want.get('nvidia-cutlass-dsl')}')")
        return 1
    problems = compare(record.versions, now)
    for line in problems:
        print(f"--frozen check: {line}")
    print(f"--frozen check: {'FAILED' if problems else 'ok'}, {took} ({len(cute)} CuTe by PTX, {len(cutile)} "
          f"cuTile by device-function AST: cuTile needs tileiras to compile, which this machine lacks)")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    _package()
    if argv[:1] == ["--frozen"]:
        import argparse

        ap = argparse.ArgumentParser(prog="cute_compilecheck.py --frozen")
        ap.add_argument("mode", choices=("check", "write", "dump"))
        ap.add_argument("--versions", default="all")
        ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
        ap.add_argument("--fresh", action="store_true",
                        help="compile each version in its own process (a layout move's proof; ~25 min on 2 cores)")
        a = ap.parse_args(argv[1:])
        return frozen_main(a.mode, a.versions, a.jobs, a.fresh)
    if argv[:1] and argv[0].split("=", 1)[0] == "--prepare":
        args = argv[0].split("=", 1)[1:] + argv[1:]
        if len(args) != 1:
            raise SystemExit("--prepare takes one argument: 'all' or a comma list of CuTe versions.")
        return prepare_versions(version_names(args[0]))
    os.environ["KFORGE_CUTE_OPTIONS"] = (os.environ.get("KFORGE_CUTE_OPTIONS", "") + " --keep-ptx").strip()
    from kforge_kernels.mla.cute import host as host
    from kforge_kernels.mla.tools.cute_ptxas import ptxas_report, sass_loop_report

    bad = 0
    tmp = Path(tempfile.mkdtemp(prefix="cute_ptx_"))
    os.chdir(tmp)  # --keep-ptx also drops cutlass___call___*.ptx into the cwd: keep them out of the repo
    for arg in argv or ["sm80:1:128", "sm80_dedup:16:128:direct"]:
        kind, s, h, *rest = arg.split(":")
        unknown = [r for r in rest if r not in ("direct", "paired")]
        if unknown:
            print(f"{arg}: BAD ARGUMENT: unknown flag(s) {', '.join(unknown)}; write kind:s:h[:direct][:paired]")
            bad += 1
            continue
        t0 = time.time()
        try:
            f_main, f_comb, *_ = host.compiled(kind, int(s), int(h), 2, direct="direct" in rest, paired="paired" in rest)
        except Exception as exc:  # noqa: BLE001 - report every shape
            print(f"{arg}: COMPILE FAILED: {type(exc).__name__}: {exc}")
            bad += 1
            continue
        line = f"{arg}: compiled in {time.time() - t0:.1f} s"
        for tag, fn in (("split", f_main), ("combine", f_comb)):
            ptx = getattr(fn, "__ptx__", None) if fn is not None else None
            if not ptx:
                continue
            rep = ptxas_report(ptx)
            if rep is None:
                line += f" | {tag}: NOT CHECKED: no ptxas on PATH (put CUDA's bin directory on PATH)"
                bad += 1
                continue
            info, serialized = rep
            line += f" | {tag}: {info}"
            for why in serialized:
                line += f" | WGMMA SERIALIZED ({tag}): {why}"
                bad += 1
        loops = sass_loop_report(f_main.__ptx__) if getattr(f_main, "__ptx__", None) else None
        if isinstance(loops, str):  # ptxas or nvdisasm failed: said, not fatal
            line += f" | wgmma loops: {loops}"
        elif loops is not None:  # informational: R2UR in a wgmma loop costs latency on every trip (see q_after_kv)
            line += " | wgmma loops: " + (", ".join(f"{lp['instructions']} instr {lp['r2ur']} R2UR" for lp in loops)
                                          or "none")
            if any(lp["r2ur"] for lp in loops):
                line += " | NOTE: R2UR inside a wgmma loop (an address ptxas keeps in a vector register)"
        from kforge_kernels.mla.tools.cute_ptxreplay import barrier_sites

        dup = barrier_sites(getattr(f_main, "__ptx__", "") or "")
        if dup:  # an aligned barrier at two places: check the branch above each is warp-uniform
            line += " | duplicated barriers: " + ", ".join(f"{k} x{n}" for k, n in dup.items())
        if kind == "sm80_dedup":
            # replay the P exchange addresses of all 256 threads from the PTX (the v2 bug class)
            from kforge_kernels.mla.tools.cute_ptxreplay import check_p_exchange

            sp_off = 2 * (host.BLOCK_M * host.D_QK + 2 * host.PAGE * host.D_QK)  # sQ + 2 pages, bytes
            why = check_p_exchange(f_main.__ptx__, sp_off) if getattr(f_main, "__ptx__", None) else "no PTX kept"
            line += f" | P exchange replay: {why or 'ok (256 threads, 4096 cells once, ldmatrix rows ok)'}"
            bad += why is not None
            if "direct" in rest and getattr(f_main, "__ptx__", None):
                from kforge_kernels.mla.tools.cute_ptxreplay import check_direct_epilogue

                why = check_direct_epilogue(f_main.__ptx__, int(s), int(h))
                line += f" | direct epilogue replay: {why or 'ok (every out byte / lse slot once)'}"
                bad += why is not None
        print(line, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
