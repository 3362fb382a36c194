"""Markdown helpers of the knowledge files: ``kforge:KEY`` marked blocks, front matter, sections, tables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


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


def _strip_blocks(text: str) -> str:
    return re.sub(r"<!-- kforge:(\S+):start -->.*?<!-- kforge:\1:end -->", "", text, flags=re.S)


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
