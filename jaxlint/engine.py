"""The one engine every front end calls: source text in, findings out."""
from __future__ import annotations

import ast
import gc
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional, Sequence

from .analysis import SemanticModel, SourceError, SourceFile
from .checkers import Context, Finding, Rule, Settings, all_rules


@dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    error: Optional[str] = None          # one line: why the file could not be checked
    source: Optional[SourceFile] = None
    fixed: int = 0
    fix_report: Optional[object] = None


class InternalError(Exception):
    pass


def lint_source(source: SourceFile, rules: Optional[Sequence[Rule]] = None,
                settings: Optional[Settings] = None, tree: Optional[ast.Module] = None,
                apply_noqa: bool = True) -> List[Finding]:
    """Run ``rules`` (default: all enabled by default) over one parsed file.

    Raises :class:`SourceError` for a file that does not parse.  A rule that
    crashes does not stop the others: it is reported as a finding-free
    :class:`InternalError` line by the caller.
    """
    if rules is None:
        rules = [r for r in all_rules() if r.default_enabled]
    # The cyclic garbage collector would repeatedly traverse the (acyclic)
    # syntax tree while the model allocates; pause it for this file and let it
    # collect the model's few cycles afterwards.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _lint(source, rules, settings, tree, apply_noqa)
    finally:
        if was_enabled:
            gc.enable()


def _lint(source: SourceFile, rules: Sequence[Rule], settings: Optional[Settings],
          tree: Optional[ast.Module], apply_noqa: bool) -> List[Finding]:
    if tree is None:
        tree = source.parse()
    model = SemanticModel(tree, source)
    ctx = Context(model, source, settings)
    out: List[Finding] = []
    seen = set()
    errors = []
    for rule in rules:
        try:
            for f in rule.check(ctx):
                key = (f.code, f.line, f.col, f.end_line, f.end_col)
                if key in seen:
                    continue
                seen.add(key)
                if apply_noqa and source.is_suppressed(f.line, f.code):
                    continue
                out.append(f)
        except RecursionError:
            errors.append(f"{rule.code}: expression nested too deeply")
        except Exception as exc:  # a rule bug must not take the run down
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
            errors.append(f"{rule.code}: internal error {type(exc).__name__}: {exc} ({where})")
    out.sort(key=Finding.sort_key)
    if errors:
        raise InternalError("; ".join(errors) + " — please report this jaxlint bug")
    return out


def lint_path(path: str, rules: Optional[Sequence[Rule]] = None,
              settings: Optional[Settings] = None) -> FileResult:
    try:
        source = SourceFile.from_path(path)
        findings = lint_source(source, rules, settings)
        return FileResult(path, findings, source=source)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    except InternalError as exc:
        return FileResult(path, error=str(exc))
