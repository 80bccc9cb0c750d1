"""The notebook as a :class:`~jaxlint.analysis.SourceFile`: joined code cells, positions in
cells, and the way back to the ``.ipynb`` for fixes (see :mod:`jaxlint.notebook`)."""
from __future__ import annotations

import difflib
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..analysis.source import SourceError, SourceFile
from .jsonedit import _normalise_sources, _replace_sources
from .masking import _ending, _mask_cell, _split_lines
from ..analysis.source import read_bytes
from .reading import _one_line, parse_notebook

_MARKER = "# %% [jaxlint cell {}]"
_MARKER_LINE = re.compile(r"^# %% \[jaxlint cell (\d+)\]$")
_LINE_REF = re.compile(r"(?<![\w:])lines? (\d+(?:, \d+)*)\b")
_CELL_BEFORE = re.compile(r"\bcell \d+, $")


def load_source(path: str) -> "NotebookSource":
    """Read and mask the notebook at ``path``; raises :class:`SourceError` with one line."""
    return source_from_bytes(path, read_bytes(path))


def source_from_bytes(path: str, raw: bytes) -> "NotebookSource":
    """A :class:`NotebookSource` for the notebook bytes ``raw`` (stdin, an editor buffer)."""
    document, data, cell_total, cells = parse_notebook(raw)
    return NotebookSource._build(path, raw, document, data, cell_total, cells)


@dataclass(frozen=True)
class _Cell:
    index: int            # 0-based index into the notebook's cells (all kinds)
    source: str           # the cell's original source
    masked: str           # its masked text
    magic_lines: Tuple[int, ...]   # 0-based indexes of masked lines within the cell
    first_line: int       # 1-based line of its first line in the joined text
    line_count: int


class NotebookSource(SourceFile):
    """The code cells of one notebook as a :class:`SourceFile` (see :mod:`jaxlint.notebook`).

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

    def cell_location(self, offset: int) -> Tuple[int, int, int]:
        """``(cell, line_in_cell, col)`` of a character offset of :attr:`text` (cell and line as
        :meth:`cell_position`, col 0-based), for the ends of fix edits.  An offset on a cell
        separator (where a fix appends to the cell before it, e.g. an import after the last one)
        is the end of the cell before: the line after its last line, column 0."""
        line, col = self.position(offset)
        if self._cells and 0 <= line - 1 < len(self._line_cells) and self._line_cells[line - 1] < 0:
            before = [c for c in self._cells if c.first_line <= line]   # (an empty cell has no lines)
            if before:
                return before[-1].index + 1, before[-1].line_count + 1, 0
        cell, in_cell = self.cell_position(line)
        return cell, in_cell, col

    def line_label(self, line: int) -> str:
        """How to name a line of :attr:`text` in prose: ``cell 3, line 2``."""
        cell, in_cell = self.cell_position(line)
        return f"cell {cell}, line {in_cell}"

    def relabel(self, message: str) -> str:
        """``message`` with its references to lines of the joined text (``(line 66)``, as the
        rules write them) turned into cell positions (``(cell 5, line 3)``); quoted code
        (between backticks) is left alone.  Idempotent: a reference already written as a cell
        position (``cell 5, line 3``) stays as it is."""
        parts = message.split("`")
        for i in range(0, len(parts), 2):
            part = parts[i]
            parts[i] = _LINE_REF.sub(lambda m: m.group(0) if _CELL_BEFORE.search(part, 0, m.start())
                                     else self._label_lines(m.group(1)), part)
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
        """The syntax tree of the code cells.  A cell that does not parse is left out (its
        lines blanked, so every other line keeps its number) and named by
        :attr:`partial_error`, as Jupyter runs the other cells; only a notebook none of
        whose cells parses raises :class:`SourceError`."""
        text = self.text
        skipped: List[str] = []
        blanked: set = set()
        while True:
            try:
                tree = SourceFile(self.path, text).parse()
                break
            except SourceError as exc:
                m = re.match(r"syntax error at (\d+):(\d+): (.*)", str(exc))
                if not m:
                    raise
                pos, line = self._cell_at(int(m.group(1)))
                cell = self._cells[pos].index + 1 if pos >= 0 else 1
                msg = f"syntax error in cell {cell} at line {line}:{m.group(2)}: {m.group(3)}"
                if pos < 0 or pos in blanked or len(blanked) + 1 >= len(self._cells):
                    raise SourceError(skipped[0] if skipped else msg) from None   # nothing left to check
                blanked.add(pos)
                skipped.append(msg)
                text = self._blank(text, self._cells[pos])
        self._partial = "; ".join(skipped) + (" (that cell was not checked; the other cells were)"
                                              if len(skipped) == 1 else
                                              " (those cells were not checked; the other cells were)") \
            if skipped else None
        return tree

    @staticmethod
    def _blank(text: str, cell: "_Cell") -> str:
        lines = _split_lines(text)
        for i in range(cell.first_line - 1, min(len(lines), cell.first_line - 1 + cell.line_count)):
            lines[i] = _ending(lines[i]) or "\n"
        return "".join(lines)

    @property
    def partial_error(self) -> Optional[str]:
        """Which cells did not parse and were left out (None: every code cell was checked)."""
        if not hasattr(self, "_partial"):
            try:
                self.parse()
            except SourceError:
                return None
        return self._partial

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
            if _valid(self._data):   # (a notebook read leniently stays as valid as it was)
                raise SourceError(f"the fixed notebook would not be valid ({_one_line(exc)}); nothing was written") \
                    from None

    def write_fixed(self, text: str) -> None:
        """Write the notebook with the cells of the fixed ``text`` back to :attr:`path`, atomically.

        Only the ``"source"`` values of changed cells differ from the file as it was read;
        raises :class:`SourceError` (one line) when an edit touched a masked IPython line, the
        file changed on disk since it was read, or the file cannot be written.
        """
        from ..fixes.applier import write_atomic

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


def _valid(data) -> bool:
    """Does the notebook as read validate against its nbformat schema?"""
    import nbformat
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(nbformat.from_dict(data))
        return True
    except Exception:
        return False
