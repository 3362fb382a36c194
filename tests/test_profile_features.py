"""What a version already applies: ``FEATURES``, detection in the code its run loaded, and the
profile report leaving those opportunities out (it used to recommend a TMA + mbarrier pipeline and
warp specialisation to v5_cute, which is built on both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_kforge.contracts import ProfileContract
from pytest_kforge.errors import BadVersionModuleError
from pytest_kforge.profile.command import driver_command
from pytest_kforge.profile.derive import is_derived
from pytest_kforge.profile.features import (DETECTORS, code_text, declared_features, detect_features,
                                            version_features)
from pytest_kforge.profile.parse import parse_raw_csv
from pytest_kforge.profile.report import build_report, load_report_json
from pytest_kforge.profile.run import profile_version
from pytest_kforge.registry import Registry, load_kernel
from test_plugin_helpers import HEADER, write_tiny
from test_profile_faults import fake_path  # noqa: F401 - a fixture: ncu played by tests/data/ncu/fake_ncu.py

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "ncu"
ALL3 = {"tma-mbarrier-pipeline", "warp-specialization-producer-consumer", "wgmma-over-mma-sync"}

HOPPER = '''
"""Hopper kernel: TMA + mbarrier pipeline, setmaxnreg producer/consumer warpgroups, wgmma."""


def kernel(cute, cpasync, pipeline, warpgroup):
    tma_kv, gkv = cpasync.make_tiled_tma_atom(None)
    kv_pipe = pipeline.PipelineTmaAsync.create(num_stages=2)
    if cute.arch.warp_idx() < 4:
        cute.arch.setmaxregister_decrease(40)
    else:
        cute.arch.setmaxregister_increase(232)
        warpgroup.fence()
        warpgroup.commit_group()
'''
AMPERE = '''
"""Ampere kernel.  Unlike the Hopper one: no make_tiled_tma_atom, no PipelineTmaAsync, no
setmaxregister_decrease / setmaxregister_increase, no warpgroup.commit_group."""


def kernel(cute, cpasync, warp):
    atom = cpasync.CopyG2SOp()  # PipelineTmaAsync + setmaxregister_decrease would need sm_90
    return atom, warp.MmaF16BF16Op()
'''
HOST = '''
def pick(kind):
    """Dispatch like kernels/mla/cute/kinds.py: only the kernel module asked for is imported."""
    if kind == "hopper":
        from kforge_kernels.tiny import _hopper as mod
    else:
        from kforge_kernels.tiny import _ampere as mod
    return mod
'''


def _version(kind: str, extra: str = "") -> str:
    return HEADER.format(lang="torch", parent="'v0'", desc=f"{kind} via the host") + extra + textwrap.dedent(f'''
        def run(x, *, y, config=None):
            from kforge_kernels.tiny._host import pick
            pick("{kind}")
            y.copy_(x * 2 + 1)
            return (y,)
        ''')


def _kernels(root: Path) -> Path:
    """``tiny`` with a host module dispatching to a Hopper or an Ampere kernel file; returns kernels/."""
    write_tiny(root)
    kdir = root / "kernels" / "tiny"
    for name, text in (("_hopper", HOPPER), ("_ampere", AMPERE), ("_host", HOST),
                       ("v1_hopper", _version("hopper")), ("v2_ampere", _version("ampere")),
                       ("v3_declared", _version("hopper", 'FEATURES = ("wgmma-over-mma-sync",)\n')),
                       ("v4_none", _version("hopper", "FEATURES = ()\n"))):
        (kdir / f"{name}.py").write_text(text)
    return root / "kernels"


def test_code_text_blanks_comments_and_docstrings_but_keeps_code_and_ptx_strings() -> None:
    src = textwrap.dedent('''
        """make_tiled_tma_atom"""  # setmaxregister_decrease
        def f():
            """PipelineTmaAsync"""
            "a bare string statement" "warpgroup.commit_group"
            asm = (
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            )
            return warpgroup.wait_group(0)  # wgmma.commit_group
        ''')
    code = code_text(src)
    assert code.count("\n") == src.count("\n")  # lines stay where they were
    for gone in ("make_tiled_tma_atom", "setmaxregister_decrease", "PipelineTmaAsync", "commit_group"):
        assert gone not in code
    assert "cp.async.bulk.tensor" in code and "warpgroup.wait_group(0)" in code
    assert code_text("def broken(:\n    '''") == ""


def test_detection_needs_every_marker_group_and_reads_code_only() -> None:
    got = detect_features({"_hopper.py": HOPPER})
    assert set(got) == ALL3
    assert got["tma-mbarrier-pipeline"] == "detected `make_tiled_tma_atom` + `PipelineTmaAsync` in _hopper.py"
    assert detect_features({"_ampere.py": AMPERE}) == {}  # named only in its docstring and comments
    # TMA without an mbarrier, or registers given away without being taken: no feature
    assert detect_features({"a.py": "t = cpasync.make_tiled_tma_atom(op)\ncute.arch.setmaxregister_decrease(40)\n"}) == {}
    # groups may match in different files of the same run
    split = detect_features({"tma.py": "t = cpasync.tma_partition(a)\n", "bar.py": "cute.arch.mbarrier_init(p, 1)\n"})
    assert split == {"tma-mbarrier-pipeline": "detected `tma_partition` in tma.py, `mbarrier_init` in bar.py"}


def test_detectors_name_real_knowledge_entries() -> None:
    kb = pytest.importorskip("pytest_kforge.knowledge").KnowledgeBase(root=REPO / "docs" / "knowledge")
    for det in DETECTORS:
        assert kb.get(det.name).kind == "optimization"


def test_the_project_cute_kernels() -> None:
    """Read-only look at kernels/mla: the sm_90 line has all three, the sm_80 line none."""
    mla = REPO / "kernels" / "mla"
    if not (mla / "cute/sm90.py").exists() or not (mla / "cute/sm80.py").exists():
        pytest.skip("kernels/mla has no CuTe sm_80/sm_90 modules in this checkout")
    # what a v4_cute..v7_cute run loads: the CTA and its consumer mixin
    sm90 = {name: (mla / "cute" / f"{name}.py").read_text() for name in ("sm90", "sm90_halfpage")}
    assert set(detect_features(sm90)) == ALL3
    assert detect_features({"sm80": (mla / "cute/sm80.py").read_text()}) == {}
    # v1_cute's own file only describes the design (docstring) and calls the host: nothing without
    # the driver's module list, rather than everything the host could dispatch to
    assert version_features(REPO / "kernels", "mla", "v1_cute") == {}
    # v5_cute declares FEATURES (built from the host's shared tuple, so read from the loaded module):
    # the declaration is final, detection is not consulted
    from pytest_kforge.registry import load_version

    feats = load_version("mla", "v5_cute", kernels_dir=REPO / "kernels").features
    declared = version_features(REPO / "kernels", "mla", "v5_cute", declared=feats)
    assert ALL3 <= set(declared) and "release-stage-before-next-gemm" in declared


def _driver(kernels: Path, version: str) -> subprocess.CompletedProcess[str]:
    cmd = [*driver_command("tiny", version, "small", kernels_dir=kernels, warmup=0, python=sys.executable),
           "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=kernels.parent, env=env)


def _loaded(stderr: str) -> list[str]:
    line = next(ln for ln in stderr.splitlines() if ln.startswith("KFORGE-DRIVER: loaded: "))
    return line.split(": ", 2)[2].split(",")


def test_driver_reports_the_modules_its_run_loaded(tmp_path: Path) -> None:
    kernels = _kernels(tmp_path)
    hopper, ampere = _driver(kernels, "v1_hopper"), _driver(kernels, "v2_ampere")
    assert hopper.returncode == 0 and ampere.returncode == 0, hopper.stderr + ampere.stderr
    assert hopper.stderr.strip().splitlines()[-1].startswith("KFORGE-DRIVER: ok:")  # still the last word
    loaded = _loaded(hopper.stderr)
    assert "kforge_kernels.tiny._hopper" in loaded and "kforge_kernels.tiny._ampere" not in loaded
    got = version_features(kernels, "tiny", "v1_hopper", loaded=loaded)
    assert set(got) == ALL3 and got["warp-specialization-producer-consumer"] == \
        "detected `setmaxregister_decrease` + `setmaxregister_increase` in tiny/_hopper.py"
    assert version_features(kernels, "tiny", "v2_ampere", loaded=_loaded(ampere.stderr)) == {}
    # without the list: the version file and what it imports directly (the host), nothing deeper
    assert version_features(kernels, "tiny", "v1_hopper") == {}


def test_declared_features_win_over_detection(tmp_path: Path) -> None:
    kernels = _kernels(tmp_path)
    loaded = ["kforge_kernels.tiny._host", "kforge_kernels.tiny._hopper"]
    assert version_features(kernels, "tiny", "v3_declared", loaded=loaded) == {
        "wgmma-over-mma-sync": "declared in FEATURES"}
    assert version_features(kernels, "tiny", "v4_none", loaded=loaded) == {}  # "none" overrides detection
    # read from the file when the module does not import here
    (kernels / "tiny" / "v5_nodsl.py").write_text("import no_such_dsl\nFEATURES: tuple[str, ...] = "
                                                  "('tma-mbarrier-pipeline',)\n")
    assert declared_features(kernels / "tiny" / "v5_nodsl.py") == ("tma-mbarrier-pipeline",)
    assert declared_features(kernels / "tiny" / "v1_hopper.py") is None


def test_registry_checks_and_keeps_features(tmp_path: Path) -> None:
    kernels = _kernels(tmp_path)
    tiny = Registry(kernels).kernel("tiny")
    assert tiny.version("v3_declared").features == ("wgmma-over-mma-sync",)
    assert tiny.version("v4_none").features == () and tiny.version("v1_hopper").features is None
    (kernels / "tiny" / "v6_bad.py").write_text(_version("hopper", 'FEATURES = ("TMA pipeline",)\n'))
    with pytest.raises(BadVersionModuleError, match=r"v6_bad.py: FEATURES must be a tuple of knowledge-entry "
                                                    r"names like \('tma-mbarrier-pipeline'"):
        tiny.version("v6_bad")


GAINS = {"wgmma-over-mma-sync": 40.0, "split-kv-combine": 30.0, "tma-mbarrier-pipeline": 25.0,
         "exp2-folded-scale": 10.0, "fold-queries-into-mma-m": 5.0}


def _knowledge(root: Path, gains: dict[str, float] = GAINS) -> Path:
    """A knowledge base whose entries all match the synthetic v1 metrics (two launches)."""
    kb = pytest.importorskip("pytest_kforge.knowledge").KnowledgeBase(root=root)
    for name, gain in gains.items():
        kb.add_entry(name, kind="optimization", scope="shared", title=name, contexts=["any"],
                     triggers=["num_launches >= 1"], est_gain=gain, mechanism="m", affected_metrics=["x"],
                     implementation="x = 1", generalization="g", pitfalls=["p"], interactions=["i"],
                     evidence=[("decode", "2 us", "1 us", "-50%")])
    return root


def _build(kb: Path, applied: dict[str, str] | None, **kw):
    spec = load_kernel("mla", REPO / "kernels").spec
    p = {"b": 32, "s": 1, "t": 4096, "h": 128}
    recs = parse_raw_csv((DATA / "synthetic-mla-v1-decode.csv").read_text())
    return build_report("mla", "v5_cute", "decode", p, recs, flops=spec.flops(p), min_bytes=spec.min_bytes(p),
                        language="cute-dsl", knowledge_root=kb, applied=applied, **kw)


def test_report_leaves_out_what_is_applied_and_ranks_the_next(tmp_path: Path) -> None:
    kb = _knowledge(tmp_path / "docs" / "knowledge")
    plain = _build(kb, None)
    assert [o.name for o in plain.contract.opportunities] == list(GAINS)[:3]
    assert "features" not in plain.data and "already applied" not in plain.markdown
    applied = {"tma-mbarrier-pipeline": "declared in FEATURES",
               "wgmma-over-mma-sync": "detected `warpgroup.commit_group` in mla/cute/sm90.py"}
    rep = _build(kb, applied)
    # dropped before the top 3 is cut, so the next matches move up
    assert [o.name for o in rep.contract.opportunities] == ["split-kv-combine", "exp2-folded-scale",
                                                            "fold-queries-into-mma-m"]
    assert [a["name"] for a in rep.data["already_applied"]] == ["wgmma-over-mma-sync", "tma-mbarrier-pipeline"]
    assert rep.data["features"] == applied and rep.data["already_applied"][0]["trigger"] == "num_launches=2"
    assert ("3. fold-queries-into-mma-m -- est. 5% gain -- trigger: num_launches=2 -- entry: docs/knowledge/"
            "optimizations/fold-queries-into-mma-m.md\n(not ranked, already applied: wgmma-over-mma-sync, detected "
            "`warpgroup.commit_group` in mla/cute/sm90.py; tma-mbarrier-pipeline, declared in FEATURES)\n"
            ) in rep.markdown
    assert ProfileContract.parse(rep.markdown).opportunities == rep.contract.opportunities
    assert json.loads(json.dumps(rep.data))["already_applied"] == rep.data["already_applied"]


def test_report_when_every_match_is_applied(tmp_path: Path) -> None:
    kb = _knowledge(tmp_path / "docs" / "knowledge", {"tma-mbarrier-pipeline": 25.0})
    rep = _build(kb, {"tma-mbarrier-pipeline": "declared in FEATURES"}, derive_opportunities=False)
    assert rep.contract.opportunities == []
    head = "### Top 3 Opportunities (ranked by estimated impact)\n"
    assert (head + "(none: no entry left to rank: every match is already applied by this version)\n"
            "(not ranked, already applied: tma-mbarrier-pipeline, declared in FEATURES)\n") in rep.markdown
    assert ProfileContract.parse(rep.markdown).opportunities == []
    # by default the counters fill the list the knowledge base left empty, each marked as derived
    derived = _build(kb, {"tma-mbarrier-pipeline": "declared in FEATURES"})
    opps = derived.contract.opportunities
    assert opps and all(is_derived(o.entry) for o in opps)
    assert "(not ranked, already applied: tma-mbarrier-pipeline" in derived.markdown
    assert ProfileContract.parse(derived.markdown).opportunities == opps


def test_profile_version_detects_in_the_modules_the_driver_loaded(fake_path: Path, tmp_path: Path,  # noqa: F811
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    kernels = _kernels(root)
    _knowledge(root / "docs" / "knowledge")
    monkeypatch.setenv("FAKE_NCU_LOADED", "kforge_kernels.tiny._host,kforge_kernels.tiny._hopper,"
                                          "kforge_kernels.tiny.v1_hopper")
    [out] = profile_version("tiny", "v1_hopper", ["small"], root=root, kernels_dir=kernels)
    assert out.fault is None, out.fault
    data = load_report_json(out.json_path)
    assert set(data["features"]) == ALL3
    assert [a["name"] for a in data["already_applied"]] == ["wgmma-over-mma-sync", "tma-mbarrier-pipeline"]
    assert [o["name"] for o in data["contract"]["opportunities"]] == ["split-kv-combine", "exp2-folded-scale",
                                                                      "fold-queries-into-mma-m"]
    monkeypatch.setenv("FAKE_NCU_LOADED", "kforge_kernels.tiny._host,kforge_kernels.tiny._ampere")
    [out] = profile_version("tiny", "v2_ampere", ["small"], root=root, kernels_dir=kernels)
    data = load_report_json(out.json_path)
    assert "features" not in data and data["contract"]["opportunities"][0]["name"] == "wgmma-over-mma-sync"
