"""Masking IPython syntax in a code cell so that the cell parses as Python.

Line magics, cell magics, shell escapes, captured shell output and help become
``pass  # IPython ...`` at their own indentation; continuation lines and foreign
cell-magic bodies become comments.  Every other line keeps its text.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

# Cell magics whose body is Python run in the notebook's own namespace.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_LINE_END = re.compile(r"\r\n|\r|\n")
# `files = !ls`, `out = %sx ls`, `a, b = %time f()`
_ASSIGN_MAGIC = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
# what changes the scanner's state: in code, and inside a string opened with ' or "
_CODE_EVENT = re.compile(r"[#'\"()\[\]{}\\]")
_IN_STRING = {"'": re.compile(r"['\\]"), '"': re.compile(r'["\\]')}
_CELL_MAGIC = re.compile(r"^\s*%%\s*([A-Za-z_][\w.]*)")


def _split_lines(text: str) -> List[str]:
    """Lines with their endings, split the way :class:`SourceFile` counts lines."""
    out = []
    pos = 0
    for m in _LINE_END.finditer(text):
        out.append(text[pos:m.end()])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def _ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""


class _Scanner:
    """Just enough of Python's tokenizer to know where logical lines start."""

    def __init__(self):
        self.depth = 0
        self.string: Optional[str] = None   # the open quote of a string spanning lines
        self.continued = False               # previous line ended with a backslash

    def at_logical_start(self) -> bool:
        return self.depth == 0 and self.string is None and not self.continued

    def feed(self, line: str) -> int:
        """Consume one physical line; return where its code ends (a comment's ``#`` or the end)."""
        body = line.rstrip("\r\n")
        n = len(body)
        i = 0
        self.continued = False
        while i < n:
            if self.string is not None:
                q = self.string
                m = _IN_STRING[q[0]].search(body, i)
                if m is None:
                    break
                j = m.start()
                if body[j] == "\\":
                    i = j + 2
                elif body.startswith(q, j):
                    i = j + len(q)
                    self.string = None
                else:
                    i = j + 1
                continue
            m = _CODE_EVENT.search(body, i)
            if m is None:
                break
            i = m.start()
            c = body[i]
            if c == "#":
                return i
            if c in "\"'":
                self.string = body[i:i + 3] if body.startswith(c * 3, i) else c
                i += len(self.string)
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            elif c == "\\" and i == n - 1:
                self.continued = True
            i += 1
        if self.string is not None and len(self.string) == 1 and not body.endswith("\\"):
            self.string = None   # an unterminated one-line string: a syntax error anyway
        return n


def _mask_cell(source: str) -> Tuple[str, List[int]]:
    """Mask IPython syntax in one cell; returns the text and the masked line indexes (0-based)."""
    lines = _split_lines(source)
    masked: List[int] = []
    out = list(lines)

    first = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    if first is not None:
        m = _CELL_MAGIC.match(lines[first])
        if m:
            if m.group(1) in PYTHON_BODY_CELL_MAGICS:
                out[first] = _masked(lines[first], "cell magic")
                masked.append(first)
                start = first + 1
            else:
                for k, ln in enumerate(lines):
                    if k >= first:
                        out[k] = ("# IPython cell magic (%%" + m.group(1) + ")" if k == first else "#") + _ending(ln)
                        masked.append(k)
                return "".join(out), masked
        else:
            start = 0
    else:
        start = 0

    scan = _Scanner()
    k = start
    while k < len(lines):
        line = lines[k]
        kind = _magic_kind(line) if scan.at_logical_start() else None
        if kind is None and scan.at_logical_start():
            probe = _Scanner()
            code_end = probe.feed(line)
            if probe.string is None and line[:code_end].rstrip().endswith("?") and line.strip():
                kind = "help"
        if kind is None:
            scan.feed(line)
            k += 1
            continue
        out[k] = _masked(line, kind)
        masked.append(k)
        # a magic continues over lines ending with a backslash
        while line.rstrip("\r\n").endswith("\\") and k + 1 < len(lines):
            k += 1
            line = lines[k]
            out[k] = "#" + _ending(line)
            masked.append(k)
        k += 1
    return "".join(out), masked


def _magic_kind(line: str) -> Optional[str]:
    stripped = line.lstrip(" \t")
    if stripped.startswith("%"):
        return "magic"
    if stripped.startswith("!"):
        return "shell"
    if stripped.startswith("?"):
        return "help"
    if _ASSIGN_MAGIC.match(line):
        return "magic" if stripped.split("=", 1)[1].lstrip().startswith("%") else "shell"
    return None


def _masked(line: str, kind: str) -> str:
    body = line.rstrip("\r\n")
    indent = body[: len(body) - len(body.lstrip(" \t"))]
    return f"{indent}pass  # IPython {kind}" + _ending(line)

