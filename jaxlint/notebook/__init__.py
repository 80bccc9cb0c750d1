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

from .masking import PYTHON_BODY_CELL_MAGICS, _mask_cell  # noqa: F401 (tests and callers use them)
from .reading import SUFFIX, NotPythonNotebook, is_notebook  # noqa: F401
from .source import NotebookSource, load_source, source_from_bytes

__all__ = ["NotebookSource", "NotPythonNotebook", "is_notebook", "load_source", "source_from_bytes"]
