"""flake8 front end: ``flake8 --select JAX`` reports what ``jaxlint check`` reports.

A thin adapter over :func:`jaxlint.engine.lint_source`: the rule set and
options come from ``[tool.jaxlint]`` (found from the checked file, as the CLI
does); flake8's own ``--select``/``--extend-ignore`` and ``# noqa`` apply on top.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Iterator, List, Tuple

from . import __version__
from .analysis import SourceFile
from .config import config_for_dir
from .engine import InternalError
from .workspace import plugin_workspace


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
        except InternalError as exc:
            sys.stderr.write(f"{self.filename}: jaxlint: {exc}\n")
            return
        for f in findings:
            yield f.line, f.col, f"{f.code} {f.message}", type(self)
