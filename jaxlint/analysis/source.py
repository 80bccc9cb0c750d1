"""Source text: decoding, line tables and offset conversion.

``ast`` reports column offsets in UTF-8 *bytes* of the line; everything jaxlint
prints or edits uses *characters*.  This module is the one place that converts
between the two, and the one place that knows a file's encoding, BOM and line
endings so that ``--fix`` can write the file back byte-for-byte outside the
edited spans.
"""
from __future__ import annotations

import ast
import bisect
import codecs
import io
import itertools
import re
import sys
import tokenize
import warnings
from typing import Dict, List, Optional, Set, Tuple

_NEWLINE = re.compile(r"\r\n|\r|\n")
# ``type Vec = list[float]``: a Python 3.12 type alias statement
_TYPE_ALIAS = re.compile(r"\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*=")
_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


class SourceError(Exception):
    """A file that cannot be linted: the message is one line for the user."""


class SourceFile:
    """The decoded text of one file with line/offset tables."""

    def __init__(self, path: str, text: str, encoding: str = "utf-8", raw: Optional[bytes] = None):
        self.path = path
        self.text = text
        self.encoding = encoding
        self.raw = raw
        self._line_starts: Optional[List[int]] = None
        self._byte_lines: Dict[int, bytes] = {}
        self._noqa: Optional[Dict[int, Optional[Set[str]]]] = None

    @property
    def _starts(self) -> List[int]:
        """The start offset (in characters) of every line: line N (1-based) starts
        at ``_starts[N-1]``.  Built on first use (a cached lint never needs it)."""
        if self._line_starts is None:
            text = self.text
            if "\r" in text:
                starts = [0]
                for m in _NEWLINE.finditer(text):
                    starts.append(m.end())
            else:   # the common case, without a Python-level loop over every line
                starts = list(itertools.accumulate(map((1).__add__, map(len, text.split("\n")[:-1])), initial=0))
            self._line_starts = starts
        return self._line_starts

    # ---------------------------------------------------------------- loading
    @classmethod
    def from_bytes(cls, path: str, raw: bytes) -> "SourceFile":
        if b"\x00" in raw[:8192]:
            raise SourceError("binary file (contains NUL bytes), not Python source")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        except SyntaxError as exc:
            # detect_encoding also fails on undecodable bytes in the first two lines
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as uexc:
                raise SourceError(f"cannot decode as utf-8 at byte {uexc.start}: {uexc.reason}") from None
            raise SourceError(f"bad encoding declaration: {exc}") from None
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
            where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
            raise SourceError(f"cannot decode as {encoding}{where}: {reason}") from None
        if encoding == "utf-8-sig" and text.startswith("\ufeff"):
            text = text[1:]
        return cls(path, text, encoding, raw)

    @classmethod
    def from_path(cls, path: str) -> "SourceFile":
        return cls.from_bytes(path, read_bytes(path))

    def parse(self) -> ast.Module:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences etc.
                return ast.parse(self.text, filename=self.path, type_comments=False)
        except SyntaxError as exc:
            line = exc.lineno or 0
            col = (exc.offset or 0)
            raise SourceError(f"syntax error at {line}:{col}: {exc.msg}{self._newer_syntax(line, exc.msg)}") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise SourceError(f"cannot parse: {exc}") from None

    def _newer_syntax(self, lineno: int, msg: str) -> str:
        """A hint when the line uses syntax of a newer Python than the one running jaxlint
        (``type X = ...`` and f-strings nesting the same quotes are Python 3.12): the file is
        fine, the interpreter is too old to read it."""
        if sys.version_info >= (3, 12):
            return ""
        text = self.line_text(lineno)
        if _TYPE_ALIAS.match(text) or msg.startswith("f-string"):
            return (f" (this looks like Python 3.12 syntax; jaxlint is running on Python "
                    f"{sys.version_info[0]}.{sys.version_info[1]}: run it with the Python your code targets)")
        return ""

    # a notebook whose cells did not all parse says which (see jaxlint.notebook.source)
    partial_error: Optional[str] = None

    def encode(self, text: str) -> bytes:
        """Encode ``text`` the way this file was stored (keeping a BOM)."""
        data = text.encode(self.encoding if self.encoding != "utf-8-sig" else "utf-8")
        if self.encoding == "utf-8-sig":
            data = codecs.BOM_UTF8 + data
        return data

    # ---------------------------------------------------------------- lines
    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_text(self, lineno: int) -> str:
        """Line ``lineno`` (1-based) without its line ending."""
        starts = self._line_starts or self._starts
        if lineno < 1 or lineno > len(starts):
            return ""
        start = starts[lineno - 1]
        end = starts[lineno] if lineno < len(starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def _line_bytes(self, lineno: int) -> bytes:
        b = self._byte_lines.get(lineno)
        if b is None:
            b = self.line_text(lineno).encode("utf-8", "surrogatepass")
            self._byte_lines[lineno] = b
        return b

    def char_col(self, lineno: int, byte_col: int) -> int:
        """Convert an ``ast`` byte column to a character column."""
        if byte_col <= 0:
            return 0
        line = self.line_text(lineno)
        if line.isascii():
            return byte_col
        return len(self._line_bytes(lineno)[:byte_col].decode("utf-8", "replace"))

    def offset(self, lineno: int, byte_col: int) -> int:
        """Absolute character offset of an ``ast`` (line, byte column) position."""
        starts = self._line_starts or self._starts
        if lineno > len(starts):
            return len(self.text)
        return starts[lineno - 1] + self.char_col(lineno, byte_col)

    def node_span(self, node: ast.AST) -> Tuple[int, int]:
        """Absolute character offsets [start, end) of a node."""
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def segment(self, node: ast.AST) -> str:
        start, end = self.node_span(node)
        return self.text[start:end]

    def position(self, offset: int) -> Tuple[int, int]:
        """(line, character column), both line 1-based and column 0-based."""
        starts = self._line_starts or self._starts
        lo = bisect.bisect_right(starts, offset) - 1 if starts else 0
        lo = max(lo, 0)
        return lo + 1, offset - starts[lo]

    def newline(self) -> str:
        m = _NEWLINE.search(self.text)
        return m.group(0) if m else "\n"

    def indentation(self, lineno: int) -> str:
        line = self.line_text(lineno)
        return line[: len(line) - len(line.lstrip(" \t"))]

    # ---------------------------------------------------------------- noqa
    def noqa(self, lineno: int) -> Optional[Set[str]]:
        """``None``: no noqa; empty set: blanket ``# noqa``; else the codes."""
        if self._noqa is None:
            self._noqa = {}
            if "noqa" in self.text or "NOQA" in self.text:
                for i in range(1, len(self._starts) + 1):
                    line = self.line_text(i)
                    if "#" not in line:
                        continue
                    m = _NOQA.search(line)
                    if m:
                        codes = m.group("codes")
                        self._noqa[i] = (set(c.upper() for c in re.split(r"[,\s]+", codes) if c)
                                         if codes else set())
        return self._noqa.get(lineno)

    def is_suppressed(self, lineno: int, code: str) -> bool:
        codes = self.noqa(lineno)
        if codes is None:
            return False
        if not codes:
            return True
        return any(code == c or code.startswith(c) for c in codes)


def _open_and_read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def read_bytes(path: str, reader=_open_and_read) -> bytes:
    """A file's bytes; raises :class:`SourceError` with one line (no path: callers add it).
    ``reader`` reads them (the command line passes one that refuses FIFOs and devices)."""
    try:
        return reader(path)
    except FileNotFoundError:
        raise SourceError("no such file or directory") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None

