"""Reading a notebook: bytes -> JSON -> a validated nbformat 4 notebook, its kernel language
and its code cells.  Every failure is a one-line :class:`SourceError` (no path prefix)."""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional, Tuple

from ..analysis.source import SourceError

SUFFIX = ".ipynb"
PYTHON_LANGUAGES = ("python", "python3", "ipython", "ipython3")


class NotPythonNotebook(SourceError):
    """A notebook whose kernel language is not Python: nothing in it can be linted."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


def parse_notebook(raw: bytes) -> Tuple[str, Dict[str, Any], int, List[Tuple[int, str]]]:
    """``(document, data, cell_total, code_cells)`` of the notebook bytes ``raw``: the JSON text
    (BOM removed), the JSON value as read, how many cells it has (all kinds) and
    ``(index into the cells, source)`` of every code cell.  Raises :class:`NotPythonNotebook`
    for a notebook whose kernel language is not Python."""
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
    if language is not None and language.lower() not in PYTHON_LANGUAGES:
        raise NotPythonNotebook(f"not a Python notebook (kernel language {language!r})")
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") == "code":
            src = cell.get("source", "")
            if isinstance(src, list):  # defensive: nbformat rejoins lists on read
                src = "".join(src)
            cells.append((index, src))
    return document, data, len(nb.cells), cells


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
    nb = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # nbformat warns about missing cell ids and the like
            nb = nbformat.versions[major].to_notebook_json(data, minor=minor)
            nbformat.validate(nb)
            if major != 4:
                nb = nbformat.convert(nb, 4)
    except nbformat.ValidationError as exc:
        # Jupyter opens notebooks with extra or misplaced properties (a 'metadata' key where
        # the schema has none): what jaxlint reads -- the code cells' sources -- is intact
        if major == 4 and _cells_readable(nb):
            return nb
        raise SourceError(f"not a valid nbformat {major} notebook: {_one_line(exc)}") from None
    except Exception as exc:  # the converters raise assorted errors on malformed input
        raise SourceError(f"not a valid nbformat {major} notebook: {type(exc).__name__}: "
                          f"{_first_line(str(exc))}") from None
    return nb


def _cells_readable(nb) -> bool:
    """Every cell has a string ``cell_type`` and a string (or list of strings) ``source``."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return False
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            return False
        src = cell.get("source", "")
        if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(x, str) for x in src))):
            return False
    return True


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

