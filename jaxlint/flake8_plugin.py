"""flake8 front end: ``flake8 --select JAX`` reports what ``jaxlint check`` reports.

A thin adapter over :func:`jaxlint.engine.lint_source`: the rule set and
options come from ``[tool.jaxlint]`` (found from the checked file, as the CLI
does); flake8's own ``--select``/``--extend-ignore`` and ``# noqa`` apply on top.
A file jaxlint could not check is reported as ``JAX900`` on its line 1 (flake8
then fails) with the one-line reason, never a traceback.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Iterator, List, Tuple

from . import __version__
from .analysis import SourceError, SourceFile
from .config import config_for_dir
from .engine import InternalError, crash_message
from .workspace import plugin_workspace


# reported (line 1) for a file jaxlint could not check: nested past the recursion limit, a bug
NOT_CHECKED_CODE = "JAX900"


class JaxlintChecker:
    name = "jaxlint"
    version = __version__

    def __init__(self, tree: ast.AST, lines: List[str], filename: str = "stdin"):
        self.tree = tree
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        directory = os.path.dirname(os.path.abspath(self.filename)) if self.filename not in ("stdin", "-") \
            else os.getcwd()
        cfg = config_for_dir(directory)
        path = self.filename if self.filename not in ("stdin", "-") else None
        rules = cfg.rules_for(path)
        source = SourceFile(self.filename, "".join(self.lines))
        # the file's project is indexed once per process: cross-module findings match `jaxlint check .`
        lint = plugin_workspace(cfg.traced_functions, cfg.exclude).lint_function(
            path, rules, cfg.settings, apply_noqa=False)
        try:
            findings = lint(source)
        except Exception as exc:
            # the file was not checked: say so as a finding (flake8 then fails), never a traceback
            why = str(exc) if isinstance(exc, (SourceError, InternalError)) else crash_message(exc, "jaxlint")
            if isinstance(exc, InternalError) or not isinstance(exc, SourceError):
                sys.stderr.write(f"{self.filename}: jaxlint: {why}\n")
            yield 1, 0, f"{NOT_CHECKED_CODE} jaxlint could not check this file: {why}", type(self)
            return
        for f in findings:
            yield f.line, f.col, f"{f.code} {f.message}", type(self)
