"""pylint front end: ``pylint --load-plugins=jaxlint.pylint_plugin``.

Message ids and symbols are generated from the rule registry, so
``--disable=print-under-trace`` (or ``--disable=W9101``) works.  pylint
message ids are a letter and four digits whose first two digits name the
checker; jaxlint uses checker id ``91`` and encodes ``JAXfNN`` (family ``f``,
number ``NN`` < 20) as ``W91`` + ``(f-1)*20 + NN``: JAX101 -> W9101,
JAX201 -> W9121, JAX301 -> W9141, JAX401 -> W9161, JAX501 -> W9181.
The message text ends with the jaxlint code, e.g. ``... (JAX101)``.
``# noqa: JAX101`` comments are honoured as in the CLI.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pylint.checkers import BaseRawFileChecker

from .analysis import SourceError, SourceFile
from .checkers import REGISTRY, all_rules
from .config import Config, ConfigError, find_config, load_config
from .engine import InternalError, lint_source

if TYPE_CHECKING:  # pragma: no cover
    from astroid import nodes
    from pylint.lint import PyLinter


def pylint_msgid(code: str) -> str:
    family, number = int(code[3]), int(code[4:6])
    if not 1 <= family <= 5 or number >= 20:
        raise ValueError(f"{code} does not fit jaxlint's pylint message-id scheme")
    return f"W91{(family - 1) * 20 + number:02d}"


class JaxlintPylintChecker(BaseRawFileChecker):
    name = "jaxlint"
    msgs = {
        pylint_msgid(r.code): ("%s", r.symbol, f"{r.summary} ({r.code}; see `jaxlint rule {r.code}`)")
        for r in all_rules()
    }

    def __init__(self, linter: "PyLinter") -> None:
        super().__init__(linter)
        self._configs = {}

    def _config(self, path: str) -> Config:
        directory = os.path.dirname(os.path.abspath(path))
        cfg = self._configs.get(directory)
        if cfg is None:
            try:
                cfg = load_config(find_config([directory]))
            except ConfigError:
                cfg = Config(root=directory)
            self._configs[directory] = cfg
        return cfg

    def process_module(self, node: "nodes.Module") -> None:
        path = node.file or node.name
        with node.stream() as stream:
            raw = stream.read()
        try:
            source = SourceFile.from_bytes(path, raw)
            cfg = self._config(path)
            rules = cfg.rules_for(path)
            findings = lint_source(source, rules, cfg.settings)
        except (SourceError, InternalError):
            return  # pylint reports syntax errors itself
        for f in findings:
            self.add_message(
                pylint_msgid(f.code),
                line=f.line,
                col_offset=f.col,
                end_lineno=f.end_line,
                end_col_offset=f.end_col,
                args=(f"{f.message} ({f.code})",),
                confidence=None,
            )


def register(linter: "PyLinter") -> None:
    linter.register_checker(JaxlintPylintChecker(linter))
