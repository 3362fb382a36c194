"""The knowledge base: optimisation and anti-pattern entries, their catalog, and the LEARN-step updates.

Layout under ``root`` (``docs/knowledge``)::

    optimizations/<name>.md                      anti-patterns/<name>.md           (shared knowledge)
    languages/<lang>/optimizations/<name>.md     languages/<lang>/anti-patterns/<name>.md

Each entry is YAML front matter (``name, kind, scope, applies_to, languages, triggers, est_gain,
evidence``) plus the workflow's template sections.  The catalog -- one row per entry, in an
optimisation table and an anti-pattern table -- is the ``optimization-catalog`` skill
(``agents/skills/optimization-catalog/SKILL.md``, found by walking up from ``root``; ``CATALOG.md``
in ``root`` when there is no such skill).  The machine-owned parts of a file sit between
``<!-- kforge:KEY:start/end -->`` markers; every update rewrites only those and the front matter,
under a lock (``<root>/.kforge-kb.lock``), atomically, so human text elsewhere survives.

Triggers are a tiny safe language over the profiler's metric short names (no ``eval``)::

    dram_pct > 70            achieved_occupancy_pct < 25 and tensor_pct < 40      (a or b) and c

An entry matches when any one of its triggers holds; a trigger naming a metric that was not
measured does not hold.  ``python -m pytest_kforge.knowledge validate|sync|match k=v ...`` is the CLI.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import KforgeError
from .fsutil import atomic_write_text, file_lock

__all__ = ["KnowledgeBase", "Entry", "Match", "EvidenceRow", "KnowledgeError", "TriggerError", "parse_trigger",
           "METRIC_NAMES", "SECTIONS", "KINDS", "SCOPES", "LANGS"]

KINDS = ("optimization", "anti-pattern")
SCOPES = ("shared", "cutile-dsl", "cute-dsl")
LANGS = ("cutile-dsl", "cute-dsl", "torch")
SECTIONS = ("When to Apply", "Mechanism", "Affected Metrics", "Implementation", "Performance Evidence",
            "Generalization", "Pitfalls", "Interactions")
_BRIEF_METRICS = ("duration_us", "dram_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct",
                  "theoretical_occupancy_pct", "registers_per_thread", "shared_mem_per_block_kb",
                  "local_spill_bytes", "l2_hit_pct", "dram_read_mb", "dram_write_mb",
                  "pct_floor", "arith_intensity", "num_launches")


def _metric_names() -> frozenset[str]:
    try:  # the profiler's table adds its extra rule inputs (mem_pct, grid_size, ...)
        from .profile.metrics import METRICS
        return frozenset(_BRIEF_METRICS) | frozenset(METRICS)
    except ImportError:  # pragma: no cover - partial checkout
        return frozenset(_BRIEF_METRICS)


METRIC_NAMES: frozenset[str] = _metric_names()
_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FOLDER = {"optimization": "optimizations", "anti-pattern": "anti-patterns"}


class KnowledgeError(KforgeError, ValueError):
    """A bad knowledge-base request (unknown entry, duplicate name, malformed entry)."""


class TriggerError(KnowledgeError):
    """A trigger that is not ``metric op number`` joined by and/or."""


# ------------------------------------------------------------------------------------- triggers
_TOKEN = re.compile(r"\s*(?:(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<op><=|>=|==|!=|<|>)|"
                    r"(?P<par>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")
_OPS = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__, "==": float.__eq__,
        "!=": float.__ne__}
_HOW = "write triggers as `metric op number` (op one of < <= > >= == !=) joined by and/or"


@dataclasses.dataclass(frozen=True)
class Trigger:
    """A parsed trigger: ``("cmp", metric, op, value)`` or ``("and"|"or", [children])`` in ``node``."""

    text: str
    node: tuple[Any, ...]

    def holds(self, metrics: Mapping[str, float]) -> bool:
        def ev(n: tuple[Any, ...]) -> bool:
            if n[0] == "cmp":
                v = metrics.get(n[1])
                return v is not None and _OPS[n[2]](float(v), n[3])
            parts = (ev(c) for c in n[1])
            return all(parts) if n[0] == "and" else any(parts)
        return ev(self.node)

    def metrics(self) -> list[str]:
        out: list[str] = []

        def walk(n: tuple[Any, ...]) -> None:
            if n[0] == "cmp":
                out.append(n[1]) if n[1] not in out else None
            else:
                for c in n[1]:
                    walk(c)
        walk(self.node)
        return out

    def describe(self, metrics: Mapping[str, float]) -> str:
        """``dram_pct=83.1, tensor_pct=12`` -- the measured values the trigger looked at."""
        return ", ".join(f"{m}={float(metrics[m]):.4g}" for m in self.metrics() if m in metrics)


def parse_trigger(text: str) -> Trigger:
    """Parse one trigger; raises :class:`TriggerError` with the position of the problem."""
    if not isinstance(text, str) or not text.strip():
        raise TriggerError(f"trigger {text!r} is empty; {_HOW}")
    toks: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise TriggerError(f"trigger {text!r} has an unexpected character at position {pos} "
                               f"({text[pos:pos + 8]!r}); {_HOW}")
        kind = m.lastgroup or ""
        val, start = m.group(kind), m.start(kind)
        if kind == "word" and val.lower() in ("and", "or"):
            kind, val = val.lower(), val.lower()
        toks.append((kind, val, start))
        pos = m.end()
    i = 0

    def peek() -> tuple[str, str, int]:
        return toks[i] if i < len(toks) else ("end", "", len(text))

    def fail(want: str) -> TriggerError:
        k, v, p = peek()
        got = "the end" if k == "end" else repr(v)
        return TriggerError(f"trigger {text!r}: expected {want} at position {p} but found {got}; {_HOW}")

    def expr(level: str) -> tuple[Any, ...]:
        nonlocal i
        sub = (lambda: expr("and")) if level == "or" else atom
        items = [sub()]
        while peek()[0] == level:
            i += 1
            items.append(sub())
        return items[0] if len(items) == 1 else (level, items)

    def atom() -> tuple[Any, ...]:
        nonlocal i
        k, v, _ = peek()
        if k == "par" and v == "(":
            i += 1
            node = expr("or")
            if peek()[1] != ")":
                raise fail("')'")
            i += 1
            return node
        if k != "word":
            raise fail("a metric name")
        if v not in METRIC_NAMES:
            raise TriggerError(f"trigger {text!r} names unknown metric {v!r}; known metrics are "
                               f"{', '.join(sorted(METRIC_NAMES))}")
        i += 1
        if peek()[0] != "op":
            raise fail("a comparison operator")
        op = peek()[1]
        i += 1
        if peek()[0] != "num":
            raise fail("a number")
        num = float(peek()[1])
        i += 1
        return ("cmp", v, op, num)

    node = expr("or")
    if i != len(toks):
        raise fail("'and', 'or' or the end")
    return Trigger(text.strip(), node)


# ------------------------------------------------------------------------------------- markdown
def _markers(key: str) -> tuple[str, str]:
    return f"<!-- kforge:{key}:start -->", f"<!-- kforge:{key}:end -->"


def _get_block(text: str, key: str) -> str | None:
    s, e = _markers(key)
    m = re.search(re.escape(s) + r"\n?(.*?)" + re.escape(e), text, re.S)
    return m.group(1) if m else None


def _set_block(text: str, key: str, body: str, *, after: str | None = None) -> str:
    """Replace block ``key`` (or insert it at the end of section ``after`` / the end of the text)."""
    s, e = _markers(key)
    block = f"{s}\n{body.rstrip()}\n{e}" if body.strip() else f"{s}\n{e}"
    pat = re.compile(re.escape(s) + r".*?" + re.escape(e), re.S)
    if pat.search(text):
        return pat.sub(lambda _m: block, text, count=1)
    if after is not None:
        m = re.search(rf"^## {re.escape(after)}\s*$.*?(?=^## |\Z)", text, re.S | re.M)
        if m:
            return text[: m.end()].rstrip("\n") + "\n" + block + "\n\n" + text[m.end():].lstrip("\n")
    return text.rstrip("\n") + "\n\n" + block + "\n"


def _split_front(text: str) -> tuple[str | None, str]:
    m = re.match(r"^---\s*\n(.*?)\n---\s*\n", text, re.S)
    return (m.group(1), text[m.end():]) if m else (None, text)


def _sections(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in re.finditer(r"^## (.+?)\s*$(.*?)(?=^## |\Z)", body, re.S | re.M):
        out.setdefault(m.group(1).strip(), m.group(2))
    return out


def _rows(block: str) -> list[list[str]]:
    lines = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("|")]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
    return [r for r in rows[1:] if not all(re.fullmatch(r":?-+:?", c) for c in r)]


def _fmt_gain(x: float) -> str:
    return f"{x:g}"


@dataclasses.dataclass(frozen=True)
class EvidenceRow:
    """One ``| Config | Before | After | Change |`` row."""

    config: str
    before: str
    after: str
    change: str

    @classmethod
    def coerce(cls, row: EvidenceRow | Mapping[str, Any] | Sequence[Any]) -> EvidenceRow:
        if isinstance(row, EvidenceRow):
            return row
        vals = [row.get(k, "") for k in ("config", "before", "after", "change")] if isinstance(row, Mapping) \
            else list(row)
        if len(vals) != 4 or not str(vals[0]).strip():
            raise KnowledgeError(f"evidence row {row!r} needs config, before, after and change; pass "
                                 f"EvidenceRow('mla decode b=32 s=1 t=4096, H200', '120 us', '61 us', '-49%')")
        return cls(*(" ".join(str(v).split()).replace("|", "\\|") for v in vals))

    def render(self) -> str:
        return f"| {self.config} | {self.before} | {self.after} | {self.change} |"


_TABLE_HEAD = "| Config | Before | After | Change |\n|--------|--------|-------|--------|"


@dataclasses.dataclass
class Entry:
    """One knowledge file: front matter fields, title, sections (``{title: text}``) and raw text."""

    name: str
    kind: str
    scope: str
    applies_to: list[str]
    languages: list[str]
    triggers: list[str]
    est_gain: float
    evidence: str
    title: str
    path: Path
    rel: str
    sections: dict[str, str]
    text: str
    meta: dict[str, Any]

    @property
    def est_gain_pct(self) -> float:
        return self.est_gain

    def parsed_triggers(self) -> list[Trigger]:
        return [parse_trigger(t) for t in self.triggers]

    def evidence_rows(self, source: str) -> list[EvidenceRow]:
        block = _get_block(self.text, f"{source}-evidence") or ""
        return [EvidenceRow(*r) for r in _rows(block) if len(r) == 4]

    @classmethod
    def load(cls, path: Path, root: Path) -> Entry:
        return cls.load_text(path.read_text(encoding="utf-8"), path, root)

    @classmethod
    def load_text(cls, text: str, path: Path, root: Path) -> Entry:
        front, body = _split_front(text)
        if front is None:
            raise KnowledgeError(f"{path} has no YAML front matter; start it with '---', the fields, '---'")
        import yaml

        try:
            meta = yaml.safe_load(front) or {}
        except yaml.YAMLError as exc:
            raise KnowledgeError(f"{path} front matter is not valid YAML ({str(exc).splitlines()[0]}); fix it") from None
        if not isinstance(meta, dict):
            raise KnowledgeError(f"{path} front matter is not a mapping; write `key: value` lines")
        title = next((m.group(1).strip() for m in re.finditer(r"^# (.+)$", body, re.M)), "")
        g = meta.get

        def lst(v: Any) -> list[str]:
            return [str(x) for x in v] if isinstance(v, list) else ([] if v is None else [str(v)])
        gain = g("est_gain")
        return cls(str(g("name", "")), str(g("kind", "")), str(g("scope", "")), lst(g("applies_to")),
                   lst(g("languages")), lst(g("triggers")),
                   float(gain) if isinstance(gain, (int, float)) and not isinstance(gain, bool) else float("nan"),
                   str(g("evidence", "")), title, path, path.relative_to(root).as_posix(), _sections(body), text, meta)

    def problems(self) -> list[str]:
        """Everything wrong with this entry (empty when it is valid)."""
        p: list[str] = []
        for key in ("name", "kind", "scope", "applies_to", "languages", "triggers", "est_gain", "evidence"):
            if key not in self.meta:
                p.append(f"front matter has no `{key}`")
        if not _NAME_RE.match(self.name):
            p.append(f"name {self.name!r} is not lower-case-hyphenated")
        elif Path(self.rel).stem != self.name:
            p.append(f"name {self.name!r} differs from the file name {Path(self.rel).name!r}")
        if self.kind not in KINDS:
            p.append(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.scope not in SCOPES:
            p.append(f"scope {self.scope!r} is not one of {', '.join(SCOPES)}")
        if self.kind in KINDS and self.scope in SCOPES and self.rel != _rel_path(self.name, self.kind, self.scope):
            p.append(f"a {self.scope} {self.kind} belongs at {_rel_path(self.name, self.kind, self.scope)}")
        if not self.applies_to:
            p.append("applies_to is empty; list contexts such as mla, online-softmax or any")
        bad = [x for x in self.languages if x not in LANGS]
        if bad or not self.languages:
            p.append(f"languages must be a non-empty list of {', '.join(LANGS)}")
        if self.scope in LANGS and self.languages != [self.scope]:
            p.append(f"a {self.scope} entry must have languages: [{self.scope}]")
        if not self.triggers:
            p.append("triggers is empty; give at least one `metric op number` condition")
        for t in self.triggers:
            try:
                parse_trigger(t)
            except TriggerError as exc:
                p.append(str(exc))
        if not (self.est_gain == self.est_gain and 0 <= self.est_gain <= 1000):
            p.append("est_gain must be a number of percent between 0 and 1000")
        if self.evidence not in ("local", "external"):
            p.append(f"evidence {self.evidence!r} is not local or external")
        elif not self.evidence_rows(self.evidence):
            p.append(f"evidence is {self.evidence!r} but the {self.evidence}-evidence table has no rows")
        if not self.title:
            p.append("there is no `# Title` line")
        missing = [s for s in SECTIONS if s not in self.sections]
        if missing:
            p.append(f"missing section(s) {', '.join('## ' + s for s in missing)}")
        else:
            order = [s for s in self.sections if s in SECTIONS]
            if order != list(SECTIONS):
                p.append(f"sections are out of the template order ({', '.join(SECTIONS)})")
            if not re.search(r"^\s*-\s+\S", _strip_blocks(self.sections["When to Apply"]), re.M):
                p.append("When to Apply lists no context (e.g. `- MLA decode ...`, `- any online-softmax kernel`)")
            if "```" not in self.sections["Implementation"]:
                p.append("Implementation has no fenced code snippet")
            ev = self.sections["Performance Evidence"]
            for src, label in (("local", "Local evidence"), ("external", "External evidence")):
                block = _get_block(ev, f"{src}-evidence")
                if f"### {label}" not in ev or block is None:
                    p.append(f"Performance Evidence lacks `### {label}` with its kforge:{src}-evidence block")
                elif "Source type:" not in block or "| Config | Before | After | Change |" not in block:
                    p.append(f"the {src}-evidence block needs a `Source type:` line and a Config|Before|After|"
                             f"Change table")
        listed = [m.group(1) for m in re.finditer(r"`([^`]+)`", _get_block(self.text, "triggers") or "")]
        if listed != self.triggers:
            p.append("the kforge:triggers block in When to Apply does not list the front-matter triggers")
        return p


def _strip_blocks(text: str) -> str:
    return re.sub(r"<!-- kforge:(\S+):start -->.*?<!-- kforge:\1:end -->", "", text, flags=re.S)


def _rel_path(name: str, kind: str, scope: str) -> str:
    base = "" if scope == "shared" else f"languages/{scope}/"
    return f"{base}{_FOLDER[kind]}/{name}.md"


def _triggers_body(triggers: Iterable[str]) -> str:
    return "\n".join(f"- Metric condition: `{t}`" for t in triggers)


def _front(meta: Mapping[str, Any]) -> str:
    """Front matter in a fixed key order; lists in JSON flow style (valid YAML) so triggers stay quoted."""
    import json

    import yaml

    order = ["name", "kind", "scope", "applies_to", "languages", "triggers", "est_gain", "evidence"]
    lines = []
    for k in order + [k for k in meta if k not in order]:
        if k not in meta:
            continue
        v = meta[k]
        if isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
            lines.append(f"{k}: {json.dumps(v, ensure_ascii=False)}")
        elif isinstance(v, float) and v == int(v):
            lines.append(f"{k}: {int(v)}")
        else:
            lines.append(yaml.safe_dump({k: v}, sort_keys=False, allow_unicode=True, width=1000).rstrip("\n"))
    return "---\n" + "\n".join(lines) + "\n---\n"


@dataclasses.dataclass(frozen=True)
class Match:
    """An entry whose trigger held: ``trigger`` shows the values it looked at (``dram_pct=83.1``)."""

    entry: Entry
    est_gain_pct: float
    trigger: str
    condition: str = ""


# ------------------------------------------------------------------------------------- catalog
_CAT_HEAD = ("| Name | Title | Scope | Languages | Applies to | Triggers (any) | Est. gain | Evidence | File |\n"
             "|------|-------|-------|-----------|------------|----------------|-----------|----------|------|")
_CAT_KEY = {"optimization": "catalog-optimizations", "anti-pattern": "catalog-anti-patterns"}
_CAT_HEADING = {"optimization": "## Optimizations", "anti-pattern": "## Anti-patterns"}


def catalog_row(e: Entry) -> str:
    cells = [e.name, e.title, e.scope, ", ".join(e.languages), ", ".join(e.applies_to),
             "; ".join(f"`{t}`" for t in e.triggers), f"{_fmt_gain(e.est_gain)}%", e.evidence, f"`{e.rel}`"]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _row_name(row: str) -> str:
    cells = re.split(r"(?<!\\)\|", row.strip())
    return cells[1].strip() if len(cells) > 2 else ""


def _row_file(row: str) -> str:
    cells = re.split(r"(?<!\\)\|", row.strip())
    return cells[-2].strip().strip("`") if len(cells) > 2 else ""


def _scope_key(row: str) -> tuple[int, str]:
    cells = re.split(r"(?<!\\)\|", row.strip())
    scope = cells[3].strip() if len(cells) > 4 else ""
    return (SCOPES.index(scope) if scope in SCOPES else 9, _row_name(row))


def _table_rows(block: str | None) -> list[str]:
    rows = [ln.strip() for ln in (block or "").splitlines() if ln.strip().startswith("|")]
    return [r for r in rows[1:] if not re.fullmatch(r"\|[\s:|-]*\|", r)]


def _default_catalog(root: Path) -> Path:
    for d in [root, *root.resolve().parents]:
        cand = d / "agents" / "skills" / "optimization-catalog" / "SKILL.md"
        if cand.exists():
            return cand
    return root / "CATALOG.md"


_NO_ROWS = "_No rows yet._"
_CAT_SKELETON = ("# Optimization catalog\n\nOne row per knowledge entry; the rows are generated from the entries' front "
                 "matter.\n")


def _evidence_body(source: str, rows: Sequence[EvidenceRow], notes: Sequence[str] = ()) -> str:
    label = "local experiment" if source == "local" else "external report"
    lines = [f"Source type: {label}", _TABLE_HEAD, *(r.render() for r in rows)]
    post = [f"- {n}" for n in notes] or ([] if rows else [_NO_ROWS])
    return "\n".join(lines + ([""] + post if post else []))


def render_entry(*, name: str, kind: str, scope: str, title: str, contexts: Sequence[str], triggers: Sequence[str],
                 est_gain: float, mechanism: str, affected_metrics: Sequence[str], implementation: str,
                 generalization: str, pitfalls: Sequence[str], interactions: Sequence[str],
                 applies_to: Sequence[str] = ("any",), languages: Sequence[str] | None = None,
                 local: Sequence[EvidenceRow] = (), external: Sequence[EvidenceRow] = (),
                 local_notes: Sequence[str] = (), external_notes: Sequence[str] = ()) -> str:
    """The markdown of a new entry in the workflow's template (front matter first)."""
    langs = list(languages) if languages else ([scope] if scope in LANGS else ["cutile-dsl", "cute-dsl"])
    meta = {"name": name, "kind": kind, "scope": scope, "applies_to": list(applies_to), "languages": langs,
            "triggers": list(triggers), "est_gain": est_gain, "evidence": "local" if local else "external"}
    s, e = _markers("triggers")

    def bullets(items: Sequence[str]) -> str:
        return "\n".join(f"- {x}" for x in items)
    lb, le = _markers("local-evidence")
    xb, xe = _markers("external-evidence")
    return (f"{_front(meta)}# {title}\n\n## When to Apply\n{bullets(contexts)}\n{s}\n{_triggers_body(triggers)}\n{e}\n\n"
            f"## Mechanism\n{mechanism.strip()}\n\n## Affected Metrics\n{bullets(affected_metrics)}\n\n"
            f"## Implementation\n```python\n{implementation.strip()}\n```\n\n## Performance Evidence\n"
            f"### Local evidence\n{lb}\n{_evidence_body('local', local, local_notes)}\n{le}\n\n"
            f"### External evidence\n{xb}\n{_evidence_body('external', external, external_notes)}\n{xe}\n\n"
            f"## Generalization\n{generalization.strip()}\n\n## Pitfalls\n{bullets(pitfalls)}\n\n"
            f"## Interactions\n{bullets(interactions)}\n")


class KnowledgeBase:
    """Load, validate, query and update the entries under ``root`` and their catalog rows."""

    def __init__(self, root: str | Path = "docs/knowledge", *, catalog: str | Path | None = None) -> None:
        self.root = Path(root)
        self.catalog = Path(catalog) if catalog is not None else _default_catalog(self.root)

    # ------------------------------------------------------------------ reading
    def _files(self) -> list[Path]:
        pats = ("optimizations/*.md", "anti-patterns/*.md", "languages/*/optimizations/*.md",
                "languages/*/anti-patterns/*.md")
        return sorted({p for pat in pats for p in self.root.glob(pat)})

    def entries(self) -> list[Entry]:
        """Every entry that loads (malformed ones are skipped here and reported by :meth:`validate`)."""
        out = []
        for p in self._files():
            try:
                out.append(Entry.load(p, self.root))
            except KnowledgeError:
                continue
        return out

    def get(self, name: str) -> Entry:
        for e in self.entries():
            if e.name == name:
                return e
        names = ", ".join(e.name for e in self.entries()) or "none"
        raise KnowledgeError(f"no knowledge entry named {name!r}; the entries are {names}")

    def match(self, metrics: Mapping[str, float], *, kernel_tags: Iterable[str] = (), language: str | None = None,
              kinds: Iterable[str] = KINDS) -> list[Match]:
        """Entries whose context fits and one of whose triggers holds, highest estimated gain first."""
        tags = {kernel_tags} if isinstance(kernel_tags, str) else set(kernel_tags)
        kinds = {kinds} if isinstance(kinds, str) else set(kinds)
        found = []
        for e in self.entries():
            if e.kind not in kinds or (language and language not in e.languages):
                continue
            if tags and "any" not in e.applies_to and not tags & set(e.applies_to):
                continue
            for t in e.triggers:
                try:
                    trig = parse_trigger(t)
                except TriggerError:
                    continue
                if trig.holds(metrics):
                    found.append(Match(e, e.est_gain, trig.describe(metrics), trig.text))
                    break
        return sorted(found, key=lambda m: (-m.est_gain_pct, m.entry.name))

    def validate(self) -> list[str]:
        """Every problem in the entries and the catalog, one line each (empty when all is well)."""
        probs: list[str] = []
        entries: dict[str, Entry] = {}
        layout = set(self._files())
        for p in sorted(self.root.rglob("*.md")):
            rel = p.relative_to(self.root).as_posix()
            if p not in layout and "/" in rel and p.resolve() != self.catalog.resolve():
                probs.append(f"{rel}: not in the layout (optimizations/, anti-patterns/, languages/<lang>/...)")
        for p in sorted(layout):
            rel = p.relative_to(self.root).as_posix()
            try:
                e = Entry.load(p, self.root)
            except KnowledgeError as exc:
                probs.append(f"{rel}: {exc}")
                continue
            probs += [f"{rel}: {x}" for x in e.problems()]
            for link in re.findall(r"\]\(([^)#\s]+\.md)\)", e.text):
                if not link.startswith(("http:", "https:")) and not (p.parent / link).exists():
                    probs.append(f"{rel}: link {link} points at no file")
            if e.name in entries:
                probs.append(f"{rel}: name {e.name!r} is also used by {entries[e.name].rel}")
            entries[e.name] = e
        if not self.catalog.exists():
            return probs + [f"catalog {self.catalog} does not exist; run `python -m pytest_kforge.knowledge sync`"]
        text = self.catalog.read_text(encoding="utf-8")
        seen: dict[str, str] = {}
        for kind, key in _CAT_KEY.items():
            block = _get_block(text, key)
            if block is None:
                probs.append(f"catalog: no kforge:{key} table; run `python -m pytest_kforge.knowledge sync`")
                continue
            for row in _table_rows(block):
                name, f = _row_name(row), _row_file(row)
                e = entries.get(name)
                if not (self.root / f).is_file():
                    probs.append(f"catalog: row {name!r} points at {f}, which does not exist")
                elif e is None or e.kind != kind:
                    probs.append(f"catalog: row {name!r} in the {kind} table has no {kind} entry of that name")
                elif row != catalog_row(e):
                    probs.append(f"catalog: row {name!r} is out of date with {e.rel}; run "
                                 f"`python -m pytest_kforge.knowledge sync`")
                if name in seen:
                    probs.append(f"catalog: entry {name!r} has more than one row")
                seen[name] = kind
        probs += [f"{e.rel}: no row in the catalog ({self.catalog.name}); run `python -m pytest_kforge.knowledge "
                  f"sync`" for n, e in entries.items() if n not in seen]
        return probs

    # ------------------------------------------------------------------ writing
    def _catalog_with(self, text: str, entry: Entry | None, drop: str) -> str:
        for kind, key in _CAT_KEY.items():
            rows = [r for r in _table_rows(_get_block(text, key)) if _row_name(r) != drop]
            if entry is not None and entry.kind == kind:
                new = catalog_row(entry)
                at = next((i for i, r in enumerate(rows) if _scope_key(r) > _scope_key(new)), len(rows))
                rows.insert(at, new)
            if _get_block(text, key) is None:
                text = text.rstrip("\n") + f"\n\n{_CAT_HEADING[kind]}\n\n"
            text = _set_block(text, key, "\n".join([_CAT_HEAD, *rows]))
        return text

    def _lock(self) -> Any:
        return file_lock(self.root / ".kforge-kb")

    def _write(self, entry_text: str, rel: str, *, old_rel: str | None = None, name: str) -> Entry:
        """Write one entry (moving it from ``old_rel``) and its catalog row; the caller holds the lock."""
        path = self.root / rel
        atomic_write_text(path, entry_text)
        if old_rel and old_rel != rel:
            (self.root / old_rel).unlink(missing_ok=True)
        entry = Entry.load(path, self.root)
        cat = self.catalog.read_text(encoding="utf-8") if self.catalog.exists() else _CAT_SKELETON
        atomic_write_text(self.catalog, self._catalog_with(cat, entry, name))
        return entry

    def _mutate(self, name: str, change: Any) -> Entry:
        """Read-modify-write of one entry under the lock: ``change(entry) -> (new text, new rel path)``."""
        with self._lock():
            e = self.get(name)
            text, rel = change(e)
            return self._write(text, rel, old_rel=e.rel, name=name)

    def sync_catalog(self) -> None:
        """Regenerate every catalog row from the entries (rows without an entry are dropped)."""
        with self._lock():
            cat = self.catalog.read_text(encoding="utf-8") if self.catalog.exists() else _CAT_SKELETON
            for key in _CAT_KEY.values():
                cat = _set_block(cat, key, _CAT_HEAD) if _get_block(cat, key) is not None else cat
            cat = self._catalog_with(cat, None, "")  # creates missing tables
            for e in self.entries():
                cat = self._catalog_with(cat, e, e.name)
            atomic_write_text(self.catalog, cat)

    def add_entry(self, name: str, *, kind: str, scope: str, title: str, contexts: Sequence[str],
                  triggers: Sequence[str], est_gain: float, mechanism: str, affected_metrics: Sequence[str],
                  implementation: str, generalization: str, pitfalls: Sequence[str], interactions: Sequence[str],
                  applies_to: Sequence[str] = ("any",), languages: Sequence[str] | None = None,
                  evidence: Sequence[EvidenceRow | Mapping[str, Any] | Sequence[Any]] = (), source: str = "local",
                  citation: str = "") -> Entry:
        """Create a new entry (LEARN: a new optimisation or anti-pattern) and its catalog row."""
        src = self._source(source)
        for t in triggers:
            parse_trigger(t)
        rows = [EvidenceRow.coerce(r) for r in evidence]
        if not rows:
            raise KnowledgeError(f"entry {name!r} needs at least one evidence row; pass evidence=[(config, before, "
                                 f"after, change)] and source='local' or 'external'")
        notes = [f"{rows[0].config}: {citation}"] if citation else []
        if kind not in KINDS or scope not in SCOPES:
            raise KnowledgeError(f"kind {kind!r}/scope {scope!r} invalid; kind is one of {', '.join(KINDS)} and "
                                 f"scope one of {', '.join(SCOPES)}")
        text = render_entry(name=name, kind=kind, scope=scope, title=title, contexts=contexts, triggers=triggers,
                            est_gain=est_gain, mechanism=mechanism, affected_metrics=affected_metrics,
                            implementation=implementation, generalization=generalization, pitfalls=pitfalls,
                            interactions=interactions, applies_to=applies_to, languages=languages,
                            local=rows if src == "local" else (), external=rows if src == "external" else (),
                            local_notes=notes if src == "local" else (), external_notes=notes if src != "local" else ())
        return self._checked_commit(text, _rel_path(name, kind, scope), name=name)

    def add_entry_text(self, text: str) -> Entry:
        """Create an entry from complete markdown (front matter + template), e.g. one an agent wrote."""
        front, _ = _split_front(text)
        import yaml

        meta = yaml.safe_load(front or "") if front else None
        if not isinstance(meta, dict) or not all(k in meta for k in ("name", "kind", "scope")):
            raise KnowledgeError("the entry text has no front matter with name, kind and scope; start it with the "
                                 "template's '---' block")
        name = str(meta["name"])
        if meta["kind"] not in KINDS or meta["scope"] not in SCOPES or not _NAME_RE.match(name):
            raise KnowledgeError(f"front matter name {name!r}, kind {meta['kind']!r}, scope {meta['scope']!r}: "
                                 f"name must be lower-case-hyphenated, kind one of {KINDS}, scope one of {SCOPES}")
        return self._checked_commit(text, _rel_path(name, str(meta["kind"]), str(meta["scope"])), name=name)

    def _checked_commit(self, text: str, rel: str, *, name: str, old_rel: str | None = None) -> Entry:
        problems = Entry.load_text(text, self.root / rel, self.root).problems()
        if problems:
            raise KnowledgeError(f"entry {name!r} would be malformed: {problems[0]}; fix that and retry")
        with self._lock():
            if any(e.name == name for e in self.entries()):
                raise KnowledgeError(f"an entry named {name!r} exists; use add_evidence, narrow_conditions or "
                                     f"to_anti_pattern to change it")
            return self._write(text, rel, old_rel=old_rel, name=name)

    @staticmethod
    def _source(source: str) -> str:
        s = source.strip().lower()
        for kind in ("local", "external"):
            if s.startswith(kind):
                return kind
        raise KnowledgeError(f"evidence source {source!r} is neither 'local' (measured here) nor 'external' "
                             f"(a published report); pass one of those")

    def add_evidence(self, name: str, row: EvidenceRow | Mapping[str, Any] | Sequence[Any], source: str = "local",
                     *, citation: str = "") -> Entry:
        """Append a Config|Before|After|Change row to the entry's local or external evidence table."""
        src, r = self._source(source), EvidenceRow.coerce(row)
        key = f"{src}-evidence"

        def change(e: Entry) -> tuple[str, str]:
            block = _get_block(e.text, key)
            if block is None:
                raise KnowledgeError(f"{e.rel} has no kforge:{key} block; add `### {src.title()} evidence` with it "
                                     f"as in the template")
            lines = block.rstrip("\n").splitlines()
            first = next((i for i, ln in enumerate(lines) if ln.strip().startswith("|")), len(lines))
            end = next((i for i in range(first, len(lines)) if not lines[i].strip().startswith("|")), len(lines))
            post = [ln for ln in lines[end:] if ln.strip() and ln.strip() != _NO_ROWS]
            if citation:
                post.append(f"- {r.config}: {' '.join(citation.split())}")
            text = _set_block(e.text, key, "\n".join(lines[:end] + [r.render()] + ([""] + post if post else [])))
            if src == "local" and e.evidence != "local":
                text = self._with_meta(text, evidence="local")
            return text, e.rel
        return self._mutate(name, change)

    def narrow_conditions(self, name: str, triggers: Sequence[str], *, reason: str = "") -> Entry:
        """Replace the entry's triggers (front matter and When to Apply), noting why under Pitfalls."""
        if isinstance(triggers, str) or not triggers:
            raise KnowledgeError("narrow_conditions needs a non-empty list of trigger strings, e.g. ['dram_pct > 80']")
        for t in triggers:
            parse_trigger(t)

        def change(e: Entry) -> tuple[str, str]:
            text = self._with_meta(e.text, triggers=list(triggers))
            text = _set_block(text, "triggers", _triggers_body(triggers), after="When to Apply")
            note = f"Conditions narrowed from {'; '.join(e.triggers)} to {'; '.join(triggers)}"
            return self._learned(text, note + (f": {reason}" if reason else "")), e.rel
        return self._mutate(name, change)

    def to_anti_pattern(self, name: str, reason: str, *, triggers: Sequence[str] | None = None) -> Entry:
        """Turn an optimisation that proved harmful into an anti-pattern (moves the file, moves its row)."""
        if not reason.strip():
            raise KnowledgeError("to_anti_pattern needs a reason: what regressed, measured how")
        for t in triggers or ():
            parse_trigger(t)

        def change(e: Entry) -> tuple[str, str]:
            if e.kind == "anti-pattern":
                raise KnowledgeError(f"{name!r} is already an anti-pattern ({e.rel}); use narrow_conditions instead")
            rel = _rel_path(name, "anti-pattern", e.scope)
            if (self.root / rel).exists():
                raise KnowledgeError(f"{rel} already exists; remove or rename it before demoting {name!r}")
            text = self._with_meta(e.text, kind="anti-pattern", **({"triggers": list(triggers)} if triggers else {}))
            if triggers:
                text = _set_block(text, "triggers", _triggers_body(triggers), after="When to Apply")
            status = (f"> **Anti-pattern since {_dt.date.today().isoformat()}** (was an optimisation): "
                      f"{' '.join(reason.split())}")
            if _get_block(text, "status") is None:
                text = re.sub(r"^(# .+)$", lambda m: m.group(1) + "\n\n" + "\n".join(_markers("status")), text,
                              count=1, flags=re.M)
            text = _set_block(text, "status", status)
            return self._learned(text, f"Turned into an anti-pattern: {reason}"), rel
        return self._mutate(name, change)

    @staticmethod
    def _with_meta(text: str, **changes: Any) -> str:
        import yaml

        front, body = _split_front(text)
        meta = dict(yaml.safe_load(front or "") or {})
        meta.update(changes)
        return _front(meta) + body

    @staticmethod
    def _learned(text: str, note: str) -> str:
        old = _get_block(text, "learned") or ""
        line = f"- ({_dt.date.today().isoformat()}) {' '.join(note.split())}"
        return _set_block(text, "learned", (old.rstrip("\n") + "\n" + line).strip("\n"), after="Pitfalls")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_kforge.knowledge validate|sync|list|match dram_pct=83 ... [--tags mla]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pytest_kforge.knowledge", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="docs/knowledge", help="knowledge folder (default docs/knowledge)")
    ap.add_argument("--catalog", default=None, help="catalog file (default: the optimization-catalog skill)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="list every problem; exit 1 if there is one")
    sub.add_parser("sync", help="regenerate the catalog rows from the entries")
    sub.add_parser("list", help="one line per entry")
    mp = sub.add_parser("match", help="entries whose triggers hold for the given metrics, best first")
    mp.add_argument("metrics", nargs="+", help="short_name=value, e.g. dram_pct=83.1")
    mp.add_argument("--tags", default="", help="comma-separated kernel contexts, e.g. mla,online-softmax")
    mp.add_argument("--language", default=None, choices=LANGS)
    a = ap.parse_args(argv)
    kb = KnowledgeBase(a.root, catalog=a.catalog)
    if a.cmd == "validate":
        probs = kb.validate()
        print("\n".join(probs) if probs else f"ok: {len(kb.entries())} entries, catalog {kb.catalog}")
        return 1 if probs else 0
    if a.cmd == "sync":
        kb.sync_catalog()
        print(f"catalog rewritten: {kb.catalog}")
        return 0
    if a.cmd == "list":
        for e in kb.entries():
            print(f"{e.name:40s} {e.kind:13s} {e.scope:11s} est {_fmt_gain(e.est_gain)}%  {e.rel}")
        return 0
    metrics: dict[str, float] = {}
    for item in a.metrics:
        k, _, v = item.partition("=")
        try:
            metrics[k.strip()] = float(v)
        except ValueError:
            print(f"ERROR: {item!r} is not name=number; write e.g. dram_pct=83.1", file=sys.stderr)
            return 2
    tags = tuple(t.strip() for t in a.tags.split(",") if t.strip())
    for m in kb.match(metrics, kernel_tags=tags, language=a.language):
        print(f"{m.entry.name} -- est. {_fmt_gain(m.est_gain_pct)}% gain -- trigger: {m.trigger} -- entry: "
              f"{(kb.root / m.entry.rel).as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
