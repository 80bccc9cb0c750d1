"""No valid Python crashes the engine.

Every file of the running interpreter's standard library (full of unusual
syntax: match statements, async generators, walrus, decorators of any shape,
star expressions, nested scopes) is linted with all rules after an
``import jax`` line is prepended, so the whole semantic model and every rule
run.  A crash becomes an ``InternalError`` in the engine, which fails here.
"""
from __future__ import annotations

import os
import sysconfig

from jaxlint.analysis import SourceError, SourceFile
from jaxlint.checkers import all_rules
from jaxlint.engine import InternalError, lint_source


def test_standard_library_with_jax_imported_never_crashes():
    root = sysconfig.get_paths()["stdlib"]
    rules = all_rules()
    checked, crashes = 0, []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "__pycache__")]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            try:
                text = SourceFile.from_path(path).text
            except SourceError:
                continue
            source = SourceFile(path, "import jax\nimport jax.numpy as jnp\n" + text)
            try:
                lint_source(source, rules)
                checked += 1
            except SourceError:
                continue   # test files with deliberate syntax errors
            except InternalError as exc:
                crashes.append(f"{path}: {exc}")
    assert checked > 500
    assert not crashes, "\n".join(crashes[:10])
