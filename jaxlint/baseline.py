"""Baseline files: adopt jaxlint on a legacy codebase by reporting only new findings.

``jaxlint --write-baseline --baseline jaxlint-baseline.json`` records every current
finding; ``jaxlint --baseline jaxlint-baseline.json`` then reports only findings that
are not in it.  A finding is matched by its file (relative to the baseline file),
its code and the text of its line (stripped), counted: moving code up or down keeps
it matched, editing the flagged line or adding a second identical finding does not.
"""
from __future__ import annotations

import collections
import json
import os
from typing import Counter, Iterable, List, Tuple

from . import __version__

Key = Tuple[str, str, str]
VERSION = 1


class BaselineError(Exception):
    pass


def _rel(path: str, base_dir: str) -> str:
    return os.path.relpath(os.path.abspath(path), base_dir).replace(os.sep, "/")


def _key(res, f, base_dir: str) -> Key:
    text = res.source.line_text(f.line).strip() if res.source is not None else ""
    return (_rel(res.path, base_dir), f.code, text)


def write_baseline(path: str, results: Iterable) -> int:
    """Write every finding of ``results`` to ``path``; returns how many."""
    base_dir = os.path.dirname(os.path.abspath(path))
    entries = []
    for res in results:
        for f in res.findings:
            rel, code, text = _key(res, f, base_dir)
            entries.append({"path": rel, "code": code, "line": f.line, "source": text, "message": f.message})
    entries.sort(key=lambda e: (e["path"], e["line"], e["code"]))
    doc = {"tool": "jaxlint", "version": VERSION, "jaxlint": __version__, "findings": entries}
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None
    return len(entries)


def load_baseline(path: str) -> Counter:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file (create it with --write-baseline)") from None
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: not a jaxlint baseline: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise BaselineError(f"{path}: not a jaxlint baseline (no 'findings' list)")
    counts: Counter = collections.Counter()
    for e in doc["findings"]:
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("path", "code", "source")):
            raise BaselineError(f"{path}: malformed baseline entry {e!r}")
        counts[(e["path"], e["code"], e["source"])] += 1
    return counts


def apply_baseline(path: str, results: Iterable) -> int:
    """Drop from ``results`` the findings recorded in the baseline at ``path``; returns how many."""
    counts = load_baseline(path)
    base_dir = os.path.dirname(os.path.abspath(path))
    hidden = 0
    for res in results:
        kept: List = []
        for f in res.findings:
            k = _key(res, f, base_dir)
            if counts[k] > 0:
                counts[k] -= 1
                hidden += 1
            else:
                kept.append(f)
        res.findings = kept
    return hidden
