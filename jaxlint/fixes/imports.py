"""Import handling for fixes: reuse the module's alias, add an import only when missing."""
from __future__ import annotations

import ast
from typing import List, Tuple

from ..analysis import SemanticModel, SourceFile
from .edits import Edit


def module_alias(model: SemanticModel, source: SourceFile, module: str,
                 preferred: str) -> Tuple[str, List[Edit]]:
    """The local spelling of ``module`` (``jax.numpy`` -> ``jnp``), adding an import if needed.

    Returns ``(spelling, edits)``; ``edits`` is empty when the module is
    already reachable.  A new import is ``import jax`` or
    ``import jax.numpy as jnp`` placed after the last top-level import.
    """
    local = model.imports.local_name_for(module)
    if local is not None:
        return local, []
    if preferred in model.module.locals:
        # the preferred name is taken by something else: spell the module out
        preferred = module
    if preferred == module:
        stmt = f"import {module}"
    else:
        stmt = f"import {module} as {preferred}"
    at = _import_offset(model, source)
    nl = source.newline()
    text = stmt + nl
    if at == len(source.text) and source.text and not source.text.endswith(("\n", "\r")):
        text = nl + stmt + nl
    return preferred, [Edit.insert(at, text)]


def _import_offset(model: SemanticModel, source: SourceFile) -> int:
    body = model.tree.body
    last = None
    for i, node in enumerate(body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node
        elif i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            last = node   # module docstring
        elif last is not None:
            break
    if last is None:
        return 0
    line = last.end_lineno + 1
    if line > source.line_count:
        # file ends without a newline after the import
        return len(source.text)
    return source.offset(line, 0)
