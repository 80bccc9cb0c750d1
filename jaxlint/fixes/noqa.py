"""``# noqa`` directives as edits: add them for current findings (``--add-noqa``) and
find the ones that suppress nothing (``--report-unused-noqa``).

Only real comments count (found with :mod:`tokenize`, never inside strings), and a
directive is added only where a comment can go: not at the end of a line that
continues a string literal or ends with a backslash.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, Iterable, List, Sequence, Set, Tuple

from ..analysis.source import SourceFile
from .edits import Edit

# the directive SourceFile.noqa understands (flake8-compatible)
NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)

UNUSED_NOQA_CODE = "JAX000"
UNUSED_NOQA_SYMBOL = "unused-noqa"


@dataclass
class _Lines:
    comments: Dict[int, Tuple[int, str]]   # line -> (character column, comment text)
    blocked: Set[int]                      # lines whose end cannot take a comment


def _scan(source: SourceFile) -> _Lines:
    comments: Dict[int, Tuple[int, str]] = {}
    blocked: Set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source.text).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = (tok.start[1], tok.string)
            elif tok.end[0] > tok.start[0] and tok.type not in (tokenize.NEWLINE, tokenize.NL):
                blocked.update(range(tok.start[0], tok.end[0]))     # a string spanning lines
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    for i in range(1, source.line_count + 1):
        line = source.line_text(i)
        if i not in comments and line.rstrip().endswith("\\"):
            blocked.add(i)
    return _Lines(comments, blocked)


def add_noqa_edits(source: SourceFile, findings: Iterable) -> Tuple[List[Edit], int, List[int]]:
    """Edits that add ``# noqa: CODE`` for every finding (on the finding's first line,
    where jaxlint and flake8 look), merging into an existing ``# noqa: X`` list and
    keeping any other comment.  Returns ``(edits, directives_added, skipped_lines)``.
    """
    by_line: Dict[int, List[str]] = {}
    for f in findings:
        codes = by_line.setdefault(f.line, [])
        if f.code not in codes:
            codes.append(f.code)
    if not by_line:
        return [], 0, []
    info = _scan(source)
    edits: List[Edit] = []
    added = 0
    skipped: List[int] = []
    for line, codes in sorted(by_line.items()):
        start = source.offset(line, 0)
        text = source.line_text(line)
        comment = info.comments.get(line)
        m = NOQA.search(comment[1]) if comment else None
        if m is not None and m.group("codes"):
            # merge into the existing list: `# noqa: E501` -> `# noqa: E501,JAX101`
            at = start + comment[0] + m.end("codes")
            edits.append(Edit.insert(at, "".join("," + c for c in codes)))
            added += 1
        elif m is not None:
            continue          # a blanket noqa already suppresses everything on the line
        elif line in info.blocked:
            skipped.append(line)
        else:
            code_end = len(text.rstrip())
            edits.append(Edit(start + code_end, start + len(text), f"  # noqa: {','.join(codes)}"))
            added += 1
    return edits, added, skipped


@dataclass
class UnusedNoqa:
    line: int
    col: int            # character column of the unused code
    end_col: int
    code: str
    edit: Edit          # removes the code (or the whole directive when nothing else is left)


def _removal(source: SourceFile, line: int, col: int, comment: str, m, drop: Set[str]) -> Edit:
    """An edit dropping the codes ``drop`` from the directive ``m`` in ``comment`` at ``col``."""
    start = source.offset(line, 0) + col
    codes = re.findall(r"[A-Z]+[0-9]+", m.group("codes"), re.IGNORECASE)
    keep = [c for c in codes if c.upper() not in drop]
    if keep:
        sep = ", " if ", " in m.group("codes") else ","
        return Edit(start + m.start("codes"), start + m.end("codes"), sep.join(keep))
    # nothing left: remove the directive, and the comment if the directive was all of it
    text = source.line_text(line)
    head = comment[: m.start()].rstrip()
    tail = comment[m.end():]
    if not head.strip("# ") and not tail.strip():
        code_end = len(text[:col].rstrip())
        return Edit(source.offset(line, 0) + code_end, start + len(comment), "")
    if not tail.strip():
        return Edit(start + len(head), start + len(comment), "")
    return Edit(start + m.start(), start + m.end(), "")


def unused_noqa(source: SourceFile, raw_findings: Sequence, active_codes: Iterable[str]) -> List[UnusedNoqa]:
    """Each code in a ``# noqa: CODES`` comment that names jaxlint rules active on this
    file and suppresses no finding on its line, with an edit that removes it.

    Codes of other tools (``E501``) and blanket ``# noqa`` are never reported: they
    may be there for flake8 or another linter.  When several codes of one directive
    are unused, each carries the edit that removes all of them (the fixes overlap,
    so the applier applies one).
    """
    active = list(active_codes)
    hits: Dict[int, Set[str]] = {}
    for f in raw_findings:
        hits.setdefault(f.line, set()).add(f.code)
    out = []
    for line, (col, comment) in sorted(_scan(source).comments.items()):
        m = NOQA.search(comment)
        if m is None or not m.group("codes"):
            continue
        unused = []
        for cm in re.finditer(r"[A-Z]+[0-9]+", m.group("codes"), re.IGNORECASE):
            code = cm.group(0).upper()
            if not any(a.startswith(code) for a in active):
                continue
            if any(h.startswith(code) for h in hits.get(line, ())):
                continue
            c0 = col + m.start("codes") + cm.start()
            unused.append((c0, code))
        if unused:
            edit = _removal(source, line, col, comment, m, {code for _, code in unused})
            out.extend(UnusedNoqa(line, c0, c0 + len(code), code, edit) for c0, code in unused)
    return out
