"""``KnowledgeBase``: load, validate and query the entries, and the LEARN-step updates to them."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text, file_lock
from ._md import _front, _get_block, _markers, _set_block, _split_front
from .catalog import (_CAT_HEAD, _CAT_HEADING, _CAT_KEY, _CAT_SKELETON, _default_catalog, _row_file, _row_name,
                      _scope_key, _table_rows, catalog_row)
from .entry import _NAME_RE, _NO_ROWS, KINDS, SCOPES, Entry, EvidenceRow, _rel_path, _triggers_body, render_entry
from .triggers import KnowledgeError, TriggerError, parse_trigger

__all__ = ["KnowledgeBase", "Match"]


@dataclasses.dataclass(frozen=True)
class Match:
    """An entry whose trigger held: ``trigger`` shows the values it looked at (``dram_pct=83.1``)."""

    entry: Entry
    est_gain_pct: float
    trigger: str
    condition: str = ""


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
                name, f = _row_name(row), _row_file(row, kind)
                found = entries.get(name)
                if not (self.root / f).is_file():
                    probs.append(f"catalog: row {name!r} points at {f}, which does not exist")
                elif found is None or found.kind != kind:
                    probs.append(f"catalog: row {name!r} in the {kind} table has no {kind} entry of that name")
                elif row != catalog_row(found):
                    probs.append(f"catalog: row {name!r} is out of date with {found.rel}; run "
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

    def add_pitfall(self, name: str, note: str) -> Entry:
        """Append a dated line to the entry's learned notes (under Pitfalls), keeping human text."""
        if not note.strip():
            raise KnowledgeError("add_pitfall needs a non-empty note saying what failed and where")
        return self._mutate(name, lambda e: (self._learned(e.text, note), e.rel))

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
