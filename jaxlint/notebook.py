"""Jupyter notebooks: lint the code cells as one module, write fixes back into the ``.ipynb``.

A notebook is read with ``nbformat`` and turned into a :class:`NotebookSource`,
a :class:`~jaxlint.analysis.SourceFile` whose text is the notebook's code cells
joined in order, so that the engine, the rules, ``# noqa`` and the fixer see
ordinary Python:

* Between two code cells stands one separator comment line
  (``# %% [jaxlint cell N]``, the jupytext "percent" spelling).  It makes the
  way back from the joined text to the cells unambiguous: an import a fix adds
  after the last import of cell 1 stays in cell 1, a line a fix inserts before
  the first statement of cell 2 goes into cell 2.
* IPython syntax is masked, not parsed: line magics (``%time f()``), cell
  magics (``%%capture``), shell escapes (``!pip install``), captured shell
  output (``files = !ls``) and help (``?obj``, ``obj?``).  A masked line
  becomes ``pass  # IPython ...`` at its own indentation (so a magic that is a
  block's only statement keeps the block valid); its continuation lines and the
  body of a cell magic that is not Python (``%%bash``, ``%%writefile``) become
  comments.  The body of ``%%time``, ``%%timeit``, ``%%capture``, ``%%prun`` and
  ``%%debug`` is Python and is linted.  Every other line keeps its text, so line
  numbers and (character) columns inside a cell are exact; only a magic line's
  own text changes.

Fixes are written back by :meth:`NotebookSource.write_fixed` (or by
``write_atomic(path, nb, text)``, since :meth:`NotebookSource.encode` yields the
whole new notebook): the joined text is split at the separators, masked lines
are restored from the original, and only the ``"source"`` values of the cells
that changed are replaced inside the original JSON text.  Outputs, metadata,
key order, indentation and escaping stay byte-for-byte as they were.  The
result is re-read and checked to equal the original notebook apart from those
sources before anything is written.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .analysis.source import SourceError, SourceFile

__all__ = ["NotebookSource", "NotPythonNotebook", "is_notebook", "load_source", "source_from_bytes"]

SUFFIX = ".ipynb"

# Cell magics whose body is Python run in the notebook's own namespace.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_LINE_END = re.compile(r"\r\n|\r|\n")
_MARKER = "# %% [jaxlint cell {}]"
_MARKER_LINE = re.compile(r"^# %% \[jaxlint cell (\d+)\]$")
# `files = !ls`, `out = %sx ls`, `a, b = %time f()`
_ASSIGN_MAGIC = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
_LINE_REF = re.compile(r"(?<![\w:])lines? (\d+(?:, \d+)*)\b")
# what changes the scanner's state: in code, and inside a string opened with ' or "
_CODE_EVENT = re.compile(r"[#'\"()\[\]{}\\]")
_IN_STRING = {"'": re.compile(r"['\\]"), '"': re.compile(r'["\\]')}
_CELL_MAGIC = re.compile(r"^\s*%%\s*([A-Za-z_][\w.]*)")


class NotPythonNotebook(SourceError):
    """A notebook whose kernel language is not Python: nothing in it can be linted."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


# ----------------------------------------------------------------- loading
def load_source(path: str) -> "NotebookSource":
    """Read and mask the notebook at ``path``; raises :class:`SourceError` with one line."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise SourceError("no such file or directory") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return source_from_bytes(path, raw)


def source_from_bytes(path: str, raw: bytes) -> "NotebookSource":
    """A :class:`NotebookSource` for the notebook bytes ``raw`` (stdin, an editor buffer)."""
    try:
        document = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not a notebook: cannot decode as utf-8 at byte {exc.start}: {exc.reason}") from None
    if document.startswith("\ufeff"):
        document = document[1:]
    try:
        data = json.loads(document)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a notebook: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise SourceError("not a notebook: JSON nested too deeply") from None
    nb = _to_v4(data)
    language = _language(nb)
    if language is not None and language.lower() not in ("python", "python3", "ipython", "ipython3"):
        raise NotPythonNotebook(f"not a Python notebook (kernel language {language!r})")
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") == "code":
            src = cell.get("source", "")
            if isinstance(src, list):  # defensive: nbformat rejoins lists on read
                src = "".join(src)
            cells.append((index, src))
    return NotebookSource._build(path, raw, document, data, len(nb.cells), cells)


def _to_v4(data: Any):
    import nbformat
    from nbformat.reader import get_version

    if not isinstance(data, dict):
        raise SourceError("not a notebook: the JSON document is not an object")
    if "nbformat" not in data:
        raise SourceError("not a notebook: no 'nbformat' version key")
    major, minor = get_version(data)
    if major not in nbformat.versions:
        raise SourceError(f"not a notebook: unsupported nbformat version {major!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # nbformat warns about missing cell ids and the like
            nb = nbformat.versions[major].to_notebook_json(data, minor=minor)
            nbformat.validate(nb)
            if major != 4:
                nb = nbformat.convert(nb, 4)
    except nbformat.ValidationError as exc:
        raise SourceError(f"not a valid nbformat {major} notebook: {_one_line(exc)}") from None
    except Exception as exc:  # the converters raise assorted errors on malformed input
        raise SourceError(f"not a valid nbformat {major} notebook: {type(exc).__name__}: "
                          f"{_first_line(str(exc))}") from None
    return nb


def _one_line(exc) -> str:
    msg = getattr(exc, "message", None) or str(exc)
    where = "/".join(str(p) for p in getattr(exc, "absolute_path", None) or getattr(exc, "path", ()) or ())
    text = _first_line(msg)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{text} (at {where})" if where else text


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid"


def _language(nb) -> Optional[str]:
    meta = nb.get("metadata") or {}
    info = meta.get("language_info") or {}
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return info["name"]
    spec = meta.get("kernelspec") or {}
    if isinstance(spec, dict) and isinstance(spec.get("language"), str):
        return spec["language"]
    return None


# ----------------------------------------------------------------- masking
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


# ----------------------------------------------------------------- the source
@dataclass(frozen=True)
class _Cell:
    index: int            # 0-based index into the notebook's cells (all kinds)
    source: str           # the cell's original source
    masked: str           # its masked text
    magic_lines: Tuple[int, ...]   # 0-based indexes of masked lines within the cell
    first_line: int       # 1-based line of its first line in the joined text
    line_count: int


class NotebookSource(SourceFile):
    """The code cells of one notebook as a :class:`SourceFile` (see the module docstring).

    ``cell_position(line)`` maps a line of :attr:`text` to ``(cell, line_in_cell)``:
    ``cell`` is **1-based and counts all cells** of the notebook (markdown and
    raw cells too, as a reader counts them scrolling down); ``line_in_cell`` is
    1-based.  ``cell_index(line)`` is the 0-based index into the notebook's
    ``cells`` array.  Character columns are the same in the cell and in the text.
    """

    def __init__(self, path: str, text: str, encoding: str = "utf-8", raw: Optional[bytes] = None):
        super().__init__(path, text, encoding, raw)
        self._document = ""
        self._data: Dict[str, Any] = {}
        self._cell_total = 0
        self._cells: List[_Cell] = []
        self._line_cells: List[int] = []   # for each 1-based text line - 1: position in _cells (-1: separator)

    # ------------------------------------------------------------ building
    @classmethod
    def _build(cls, path: str, raw: bytes, document: str, data: Dict[str, Any], cell_total: int,
               code_cells: Sequence[Tuple[int, str]]) -> "NotebookSource":
        parts: List[str] = []
        cells: List[_Cell] = []
        line = 1
        for pos, (index, src) in enumerate(code_cells):
            if pos:
                parts.append(_MARKER.format(index + 1) + "\n")
                line += 1
            masked, magic = _mask_cell(src)
            if masked and not masked.endswith(("\n", "\r")):
                masked += "\n"
            n = len(_split_lines(masked))
            cells.append(_Cell(index, src, masked, tuple(magic), line, n))
            parts.append(masked)
            line += n
        nb = cls(path, "".join(parts), "utf-8", raw)
        nb._document = document
        nb._data = data
        nb._cell_total = cell_total
        nb._set_cells(cells)
        return nb

    def _set_cells(self, cells: List[_Cell]) -> None:
        self._cells = cells
        table = [-1] * (self.line_count + 1)
        for pos, cell in enumerate(cells):
            for ln in range(cell.first_line, cell.first_line + cell.line_count):
                if ln - 1 < len(table):
                    table[ln - 1] = pos
        self._line_cells = table

    @property
    def cells(self) -> List[Tuple[int, str]]:
        """``(index into the notebook's cells, original source)`` of every code cell, in order."""
        return [(c.index, c.source) for c in self._cells]

    @property
    def cell_count(self) -> int:
        """How many cells the notebook has (all kinds)."""
        return self._cell_total

    # ------------------------------------------------------------ positions
    def _cell_at(self, line: int) -> Tuple[int, int]:
        """(position in _cells, 1-based line in that cell) for a 1-based text line."""
        if not self._cells:
            return -1, line
        line = max(1, line)
        if line - 1 < len(self._line_cells) and self._line_cells[line - 1] >= 0:
            pos = self._line_cells[line - 1]
        else:
            # a separator line (or past the end): belongs to the cell after it, as its line 0
            pos = next((p for p, c in enumerate(self._cells) if c.first_line > line), None)
            if pos is None:
                pos = len(self._cells) - 1
        cell = self._cells[pos]
        return pos, line - cell.first_line + 1

    def cell_position(self, line: int) -> Tuple[int, int]:
        """``(cell, line_in_cell)`` of a 1-based line of :attr:`text`; cell is 1-based over all cells."""
        pos, in_cell = self._cell_at(line)
        if pos < 0:
            return 1, line
        return self._cells[pos].index + 1, in_cell

    def cell_index(self, line: int) -> int:
        """0-based index into the notebook's ``cells`` array of the cell holding ``line``."""
        return self.cell_position(line)[0] - 1

    def line_label(self, line: int) -> str:
        """How to name a line of :attr:`text` in prose: ``cell 3, line 2``."""
        cell, in_cell = self.cell_position(line)
        return f"cell {cell}, line {in_cell}"

    def relabel(self, message: str) -> str:
        """``message`` with its references to lines of the joined text (``(line 66)``, as the
        rules write them) turned into cell positions (``(cell 5, line 3)``); quoted code
        (between backticks) is left alone."""
        parts = message.split("`")
        for i in range(0, len(parts), 2):
            parts[i] = _LINE_REF.sub(lambda m: self._label_lines(m.group(1)), parts[i])
        return "`".join(parts)

    def _label_lines(self, numbers: str) -> str:
        """``66`` -> ``cell 5, line 3``; ``86, 93, 147`` -> ``cell 9, lines 2, 9; cell 12, line 4``."""
        groups: List[Tuple[int, List[int]]] = []
        for n in re.findall(r"\d+", numbers):
            cell, line = self.cell_position(int(n))
            if groups and groups[-1][0] == cell:
                groups[-1][1].append(line)
            else:
                groups.append((cell, [line]))
        return "; ".join(f"cell {cell}, line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
                         for cell, lines in groups)

    # ------------------------------------------------------------ parsing
    def parse(self):
        try:
            return super().parse()
        except SourceError as exc:
            m = re.match(r"syntax error at (\d+):(\d+): (.*)", str(exc))
            if not m:
                raise
            cell, line = self.cell_position(int(m.group(1)))
            raise SourceError(f"syntax error in cell {cell} at line {line}:{m.group(2)}: {m.group(3)}") from None

    # ------------------------------------------------------------ writing back
    def cell_sources(self, text: str) -> List[Tuple[int, str]]:
        """Split a (fixed) joined ``text`` back into ``(cell index, source)`` for every code cell,
        with the masked IPython lines restored.  Raises :class:`SourceError` when the text no
        longer has this notebook's cell separators or an edit touched a masked line."""
        chunks = self._chunks(text)
        out = []
        for cell, chunk in zip(self._cells, chunks):
            out.append((cell.index, self._restore(cell, chunk)))
        return out

    def _chunks(self, text: str) -> List[str]:
        lines = _split_lines(text)
        expected = [_MARKER.format(c.index + 1) for c in self._cells[1:]]
        chunks: List[str] = []
        current: List[str] = []
        want = 0
        for ln in lines:
            if want < len(expected) and ln.rstrip("\r\n") == expected[want]:
                chunks.append("".join(current))
                current = []
                want += 1
            else:
                if _MARKER_LINE.match(ln.rstrip("\r\n")):
                    raise SourceError("the fixed text has a cell separator out of place; nothing was written")
                current.append(ln)
        chunks.append("".join(current))
        if want != len(expected) or len(chunks) != max(1, len(self._cells)):
            raise SourceError("a fix removed a cell separator; nothing was written")
        return chunks

    def _restore(self, cell: _Cell, chunk: str) -> str:
        if chunk == cell.masked:
            return cell.source
        new = chunk
        if cell.magic_lines:
            old_lines = _split_lines(cell.masked)
            new_lines = _split_lines(chunk)
            original = _split_lines(cell.source)
            matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
            mapping: Dict[int, int] = {}
            for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
                if tag == "equal":
                    for k in range(i1, i2):
                        mapping[k] = j1 + (k - i1)
            for k in cell.magic_lines:
                if k not in mapping:
                    raise SourceError(f"a fix would change IPython syntax in cell {cell.index + 1} "
                                      f"(line {k + 1}); nothing was written")
            for k in cell.magic_lines:
                j = mapping[k]
                # keep the original line, but with the line ending the fixed text has there
                new_lines[j] = original[k].rstrip("\r\n") + _ending(new_lines[j])
            new = "".join(new_lines)
        # the joined text ends every cell with a newline; a cell stored without one gets none back
        if not cell.source.endswith(("\n", "\r")) and new.endswith("\n"):
            new = new[:-1]
        return new

    def with_text(self, text: str) -> "NotebookSource":
        """A :class:`NotebookSource` for a fixed ``text`` of this notebook (same cells, same file),
        so findings in it map to cells; :meth:`write_fixed` of the result writes that text."""
        sources = dict(self.cell_sources(text))
        chunks = self._chunks(text)
        cells: List[_Cell] = []
        line = 1
        for pos, (cell, chunk) in enumerate(zip(self._cells, chunks)):
            if pos:
                line += 1
            n = len(_split_lines(chunk))
            magic = tuple(_mask_cell(sources[cell.index])[1])
            cells.append(_Cell(cell.index, sources[cell.index], chunk, magic, line, n))
            line += n
        nb = NotebookSource(self.path, text, self.encoding, self.raw)
        nb._document = self._document
        nb._data = self._data
        nb._cell_total = self._cell_total
        nb._set_cells(cells)
        nb._base = getattr(self, "_base", self)
        return nb

    def encode(self, text: str) -> bytes:
        """The whole notebook file (bytes) with the cells of ``text``; see :meth:`write_fixed`."""
        base: NotebookSource = getattr(self, "_base", self)
        if text == base.text:
            return base.raw if base.raw is not None else base._document.encode("utf-8")
        sources = dict(base.cell_sources(text))
        changed = {i: s for i, s in sources.items() if s != base._original_source(i)}
        document = base._document
        if changed:
            try:
                document = _replace_sources(document, changed)
            except (ValueError, IndexError) as exc:
                raise SourceError(f"cannot locate the cell sources in the notebook JSON ({exc}); "
                                  "nothing was written") from None
            base._check_result(document, changed)
        data = document.encode("utf-8")
        if base.raw is not None and base.raw.startswith(b"\xef\xbb\xbf"):
            data = b"\xef\xbb\xbf" + data
        return data

    def _original_source(self, index: int) -> str:
        for c in self._cells:
            if c.index == index:
                return c.source
        raise KeyError(index)

    def _check_result(self, document: str, changed: Dict[int, str]) -> None:
        import nbformat

        try:
            new = json.loads(document)
        except json.JSONDecodeError as exc:  # pragma: no cover - a bug in _replace_sources
            raise SourceError(f"internal error: the rewritten notebook is not JSON ({exc.msg}); "
                              "nothing was written") from None
        expected = dict(self._data)          # the notebook as read (never mutated)
        expected["cells"] = list(expected["cells"])
        for i, src in changed.items():
            expected["cells"][i] = dict(expected["cells"][i], source=src)
        norm_new = _normalise_sources(new)
        if norm_new != _normalise_sources(expected):
            raise SourceError("internal error: the rewritten notebook differs beyond the fixed cells; "
                              "nothing was written")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nbformat.validate(nbformat.reader.reads(document))
        except nbformat.ValidationError as exc:
            raise SourceError(f"the fixed notebook would not be valid ({_one_line(exc)}); nothing was written") \
                from None

    def write_fixed(self, text: str) -> None:
        """Write the notebook with the cells of the fixed ``text`` back to :attr:`path`, atomically.

        Only the ``"source"`` values of changed cells differ from the file as it was read;
        raises :class:`SourceError` (one line) when an edit touched a masked IPython line, the
        file changed on disk since it was read, or the file cannot be written.
        """
        from .fixes.applier import write_atomic

        base: NotebookSource = getattr(self, "_base", self)
        data = self.encode(text)   # raises before anything is touched
        try:
            with open(self.path, "rb") as fh:
                current = fh.read()
        except OSError:
            current = None
        if base.raw is not None and current is not None and current != base.raw:
            raise SourceError("the notebook changed on disk since it was read; fixes were not written")
        write_atomic(self.path, _Encoded(data, self.encoding), text)


class _Encoded:
    """Hands ``write_atomic`` bytes already encoded."""

    def __init__(self, data: bytes, encoding: str):
        self.data = data
        self.encoding = encoding

    def encode(self, text: str) -> bytes:
        return self.data


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


# ----------------------------------------------------------------- JSON surgery
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
        s = self.s
        self.expect(i, "{")
        i = self.ws(i + 1)
        if s[i] == "}":
            return
        while True:
            end = _string_end(s, i)
            key = json.loads(s[i:end])
            i = self.ws(end)
            self.expect(i, ":")
            start = self.ws(i + 1)
            end = self.skip(start)
            yield key, start, end
            i = self.ws(end)
            if s[i] == "}":
                return
            self.expect(i, ",")
            i = self.ws(i + 1)

    def items(self, i: int):
        s = self.s
        self.expect(i, "[")
        i = self.ws(i + 1)
        if s[i] == "]":
            return
        while True:
            end = self.skip(i)
            yield i, end
            i = self.ws(end)
            if s[i] == "]":
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
