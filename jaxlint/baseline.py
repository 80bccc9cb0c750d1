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
from .discovery import read_regular, regular_file_problem

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
    why = regular_file_problem(path) if os.path.lexists(path) else None
    if why is not None:     # never replace a FIFO or a device (as root, /dev/zero itself) with a file
        raise BaselineError(f"{path}: cannot write baseline: {why.replace('; not checked', '')}")
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None
    return len(entries)


# a baseline is JSON of one entry per finding: past this size it is not one
MAX_BYTES = 256 << 20


def load_baseline(path: str) -> Counter:
    try:
        doc = json.loads(read_regular(path, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file (create it with --write-baseline)") from None
    except OSError as exc:      # a FIFO, /dev/zero, too large, unreadable: never a hang
        raise BaselineError(f"{path}: cannot read the baseline: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise BaselineError(f"{path}: not a jaxlint baseline: {' '.join(str(exc).split())[:200]}") from None
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
