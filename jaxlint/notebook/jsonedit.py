"""JSON surgery: replace the ``"source"`` values of some cells inside the notebook's original
JSON text, keeping everything else (outputs, metadata, key order, indentation, escaping)
byte for byte."""
from __future__ import annotations

import json
import re
from typing import Any, Dict

from ..analysis.source import SourceError

def _normalise_sources(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("cells"), list):
        data = dict(data)
        cells = []
        for c in data["cells"]:
            if isinstance(c, dict) and isinstance(c.get("source"), list):
                c = dict(c)
                c["source"] = "".join(c["source"])
            cells.append(c)
        data["cells"] = cells
    return data



_WS = re.compile(r"[ \t\r\n]*")


def _string_end(s: str, i: int) -> int:
    """End of the JSON string whose opening quote is at ``i`` (str.find, not a regex: outputs
    hold megabytes of base64)."""
    j = i
    while True:
        j = s.find('"', j + 1)
        if j < 0:
            raise ValueError("unterminated string")
        k = j - 1
        while s[k] == "\\":
            k -= 1
        if (j - 1 - k) % 2 == 0:
            return j + 1
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _Doc:
    """Spans of values in a JSON text (only what replacing cell sources needs)."""

    def __init__(self, text: str):
        self.s = text

    def expect(self, i: int, char: str) -> None:
        if self.s[i:i + 1] != char:
            raise ValueError(f"expected {char!r} at offset {i}")

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()

    def skip(self, i: int) -> int:
        """End of the value starting at ``i`` (no leading whitespace); iterative, any depth."""
        s = self.s
        depth = 0
        while True:
            i = self.ws(i)
            c = s[i]
            if c == '"':
                i = _string_end(s, i)
            elif c in "[{":
                depth += 1
                i += 1
                continue
            elif c in "]}":
                depth -= 1
                i += 1
            elif c in ",:":
                i += 1
                continue
            else:
                m = _SCALAR.match(s, i)
                if not m:
                    raise ValueError(f"unexpected {c!r} at {i}")
                i = m.end()
            if depth == 0:
                return i

    def members(self, i: int):
        """``(key, value_start, value_end)`` of the object starting at ``i``."""
        return self._entries(i, "{", "}", self._member)

    def items(self, i: int):
        """``(start, end)`` of each item of the array starting at ``i``."""
        return self._entries(i, "[", "]", self._item)

    def _item(self, i: int):
        end = self.skip(i)
        return (i, end), end

    def _member(self, i: int):
        end = _string_end(self.s, i)
        key = json.loads(self.s[i:end])
        i = self.ws(end)
        self.expect(i, ":")
        start = self.ws(i + 1)
        end = self.skip(start)
        return (key, start, end), end

    def _entries(self, i: int, opening: str, closing: str, entry):
        """The comma-separated entries of the container ``opening ... closing`` starting at
        ``i``: ``entry(start) -> (what to yield, end)`` reads one."""
        s = self.s
        self.expect(i, opening)
        i = self.ws(i + 1)
        if s[i] == closing:
            return
        while True:
            found, end = entry(i)
            yield found
            i = self.ws(end)
            if s[i] == closing:
                return
            self.expect(i, ",")
            i = self.ws(i + 1)


def _replace_sources(document: str, changed: Dict[int, str]) -> str:
    doc = _Doc(document)
    top = doc.ws(0)
    cells_span = next(((a, b) for k, a, b in doc.members(top) if k == "cells"), None)
    if cells_span is None:
        raise SourceError("fixes can be written only to nbformat 4 notebooks (no top-level 'cells'); "
                          "nothing was written")
    ascii_only = _uses_ascii_escapes(document)
    spans = []
    for index, (cstart, _cend) in enumerate(doc.items(cells_span[0])):
        if index not in changed:
            continue
        span = next(((a, b) for k, a, b in doc.members(cstart) if k == "source"), None)
        if span is None:
            raise SourceError(f"cell {index + 1} has no 'source' key; nothing was written")
        spans.append((span[0], span[1], _encode_source(doc, span[0], span[1], changed[index], ascii_only)))
    if len(spans) != len(changed):
        raise SourceError("the notebook's cells changed shape; nothing was written")
    out = []
    pos = 0
    for a, b, new in spans:
        out.append(document[pos:a])
        out.append(new)
        pos = b
    out.append(document[pos:])
    return "".join(out)


def _uses_ascii_escapes(document: str) -> bool:
    if not document.isascii():
        return False
    return re.search(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})",
                     document) is not None


def _encode_source(doc: _Doc, start: int, end: int, source: str, ascii_only: bool) -> str:
    s = doc.s

    def dump(v: str) -> str:
        return json.dumps(v, ensure_ascii=ascii_only)

    if s[start] == '"':
        return dump(source)
    lines = source.splitlines(keepends=True)   # what nbformat writes
    items = list(doc.items(start))
    if items:
        first_ws = s[start + 1:items[0][0]]
        close_ws = s[items[-1][1]:end - 1]
        if len(items) > 1:
            sep = s[items[0][1]:items[1][0]]
        else:
            sep = "," + first_ws
    else:
        # an empty list gives no layout: indent like the key's own line, one level deeper
        line_start = s.rfind("\n", 0, start) + 1
        key_line = s[line_start:start]
        indent = key_line[: len(key_line) - len(key_line.lstrip(" \t"))]
        if line_start == 0 or not key_line.strip().startswith('"'):
            first_ws, sep, close_ws = "", ",", ""
        else:
            unit = _indent_unit(s, line_start, indent)
            first_ws = "\n" + indent + unit
            sep = "," + first_ws
            close_ws = "\n" + indent
    if not lines:
        return "[]"
    return "[" + first_ws + sep.join(dump(ln) for ln in lines) + close_ws + "]"


def _indent_unit(s: str, key_line_start: int, indent: str) -> str:
    """One indentation step, read from the enclosing object's opening line."""
    brace = s.rfind("{", 0, key_line_start)
    if brace >= 0:
        ls = s.rfind("\n", 0, brace) + 1
        outer = s[ls:brace]
        if not outer.strip() and len(indent) > len(outer):
            return indent[len(outer):]
    return " "
