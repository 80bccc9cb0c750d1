"""pylint front end: ``pylint --load-plugins=jaxlint.pylint_plugin``.

Message ids and symbols are generated from the rule registry, so
``--disable=print-under-trace`` (or ``--disable=W9101``) works.  pylint
message ids are a letter and four digits whose first two digits name the
checker, one checker id per checker class.  Families 1-5 share checker id
``91`` and encode ``JAXfNN`` (family ``f``, number ``NN`` < 20) as
``W91`` + ``(f-1)*20 + NN``: JAX101 -> W9101, JAX201 -> W9121, JAX301 -> W9141,
JAX401 -> W9161, JAX501 -> W9181.  Family ``f`` >= 6 gets its own checker id
``9(f-4)`` and keeps its two digits: JAX601 -> W9201, JAX611 -> W9211, JAX7NN -> W93NN.
The message text ends with the jaxlint code, e.g. ``... (JAX101)``.
``# noqa: JAX101`` comments are honoured as in the CLI.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from pylint.checkers import BaseRawFileChecker

from .analysis import SourceError, SourceFile
from .checkers import all_rules
from .config import config_for_dir
from .engine import AnalysisLimit, InternalError, crash_message
from .workspace import plugin_workspace

if TYPE_CHECKING:  # pragma: no cover
    from astroid import nodes
    from pylint.lint import PyLinter


def pylint_msgid(code: str) -> str:
    family, number = int(code[3]), int(code[4:6])
    if 1 <= family <= 5 and number < 20:
        return f"W91{(family - 1) * 20 + number:02d}"
    if 6 <= family <= 9:
        return f"W9{family - 4}{number:02d}"
    raise ValueError(f"{code} does not fit jaxlint's pylint message-id scheme")


def _checker_id(code: str) -> str:
    return pylint_msgid(code)[1:3]


class _Findings:
    """The engine runs once per module however many jaxlint checkers pylint runs."""

    def __init__(self) -> None:
        self._last = (None, None, [])
        self.failure: Optional[str] = None     # why the last module could not be checked

    def of(self, node: "nodes.Module") -> list:
        path = node.file or node.name
        with node.stream() as stream:
            raw = stream.read()
        if self._last[0] == path and self._last[1] == raw:
            return self._last[2]
        self.failure = None
        try:
            source = SourceFile.from_bytes(path, raw)
            cfg = config_for_dir(os.path.dirname(os.path.abspath(path)))
            # the file's project is indexed once per process: cross-module findings match `jaxlint check .`
            lint = plugin_workspace(cfg.traced_functions, cfg.exclude).lint_function(
                path, cfg.rules_for(path), cfg.settings)
            findings = lint(source)
        except Exception as exc:
            findings = []
            # pylint reports syntax errors itself; anything else (nested past the recursion limit,
            # a jaxlint bug) is one line, never a traceback, and pylint fails (astroid-error)
            if isinstance(exc, AnalysisLimit) or not isinstance(exc, SourceError):
                self.failure = str(exc) if isinstance(exc, (SourceError, InternalError)) \
                    else crash_message(exc, "jaxlint")
        self._last = (path, raw, findings)
        return findings


_FINDINGS = _Findings()


class _JaxlintChecker(BaseRawFileChecker):
    name = "jaxlint"
    checker_id = "91"
    msgs: dict = {}

    def process_module(self, node: "nodes.Module") -> None:
        found = _FINDINGS.of(node)
        if _FINDINGS.failure is not None and self.checker_id == "91":
            self.add_message("astroid-error", line=1, args=(node.file or node.name,
                                                            f"jaxlint could not check it: {_FINDINGS.failure}"))
        for f in found:
            if _checker_id(f.code) != self.checker_id:
                continue
            self.add_message(
                pylint_msgid(f.code),
                line=f.line,
                col_offset=f.col,
                end_lineno=f.end_line,
                end_col_offset=f.end_col,
                args=(f"{f.message} ({f.code})",),
                confidence=None,
            )


def _messages(checker_id: str) -> dict:
    return {
        pylint_msgid(r.code): ("%s", r.symbol, f"{r.summary} ({r.code}; see `jaxlint rule {r.code}`)")
        for r in all_rules() if _checker_id(r.code) == checker_id
    }


class JaxlintPylintChecker(_JaxlintChecker):
    """Families 1-5 (checker id 91)."""
    checker_id = "91"
    msgs = _messages("91")


CHECKERS = [JaxlintPylintChecker] + [
    type(f"JaxlintPylintChecker{cid}", (_JaxlintChecker,), {"checker_id": cid, "msgs": _messages(cid),
                                                            "__doc__": f"jaxlint rules with checker id {cid}"})
    for cid in sorted({_checker_id(r.code) for r in all_rules()} - {"91"})
]


def register(linter: "PyLinter") -> None:
    for checker in CHECKERS:
        linter.register_checker(checker(linter))
