"""One knowledge entry: loading and validating its file, its evidence rows, and rendering a new one."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._md import _front, _get_block, _markers, _rows, _sections, _split_front, _strip_blocks
from .triggers import KnowledgeError, Trigger, TriggerError, parse_trigger

__all__ = ["Entry", "EvidenceRow", "render_entry", "KINDS", "SCOPES", "LANGS", "SECTIONS"]

KINDS = ("optimization", "anti-pattern")
SCOPES = ("shared", "cutile-dsl", "cute-dsl")
LANGS = ("cutile-dsl", "cute-dsl", "torch")
SECTIONS = ("When to Apply", "Mechanism", "Affected Metrics", "Implementation", "Performance Evidence",
            "Generalization", "Pitfalls", "Interactions")
_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FOLDER = {"optimization": "optimizations", "anti-pattern": "anti-patterns"}


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

def _rel_path(name: str, kind: str, scope: str) -> str:
    base = "" if scope == "shared" else f"languages/{scope}/"
    return f"{base}{_FOLDER[kind]}/{name}.md"


def _triggers_body(triggers: Iterable[str]) -> str:
    return "\n".join(f"- Metric condition: `{t}`" for t in triggers)


_NO_ROWS = "_No rows yet._"


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
