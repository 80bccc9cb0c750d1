"""The one engine every front end calls: source text in, findings out."""
from __future__ import annotations

import ast
import gc
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from .analysis.source import SourceError, SourceFile

if TYPE_CHECKING:   # the model, the rules and the fixer are imported when a file is linted
    from .analysis import SemanticModel
    from .checkers import Finding, Rule, Settings
    from .fixes.applier import FixReport


@dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    error: Optional[str] = None          # one line: why the file could not be checked
    source: Optional[SourceFile] = None
    fixed: int = 0
    fix_report: Optional[object] = None
    # set by lint_and_fix when fixes changed the text: the fixed source and its findings
    fixed_source: Optional[SourceFile] = None
    fixed_findings: Optional[List[Finding]] = None
    internal: bool = False               # ``error`` is a jaxlint bug (exit code 3), not bad input
    # checked without this process reading the file: no findings, answered from the results cache
    # or by a --jobs worker (``source`` is None: there is nothing to show from it)
    cached: bool = False

    def accept_fixes(self) -> None:
        """The fixed text was written: report the findings that remain in it."""
        if self.fixed_source is not None:
            self.source, self.findings = self.fixed_source, list(self.fixed_findings or [])
            self.fixed = self.fix_report.total if self.fix_report is not None else 0


class InternalError(Exception):
    """A rule or the analysis crashed on this file: a jaxlint bug.  The message names the
    rule (or the step of the analysis); ``findings`` holds what the other rules found.
    The command line exits with code 3 for it (docs/guarantees.md)."""

    def __init__(self, message: str, findings: Optional[List[Finding]] = None):
        super().__init__(message)
        self.findings = list(findings or [])


class AnalysisLimit(SourceError):
    """The file is valid Python but beyond what the analysis can follow (nested past
    Python's recursion limit: a 1,000-branch ``elif`` chain, ``.T`` 400 times).  Bad
    input, like a syntax error (exit code 2); ``findings`` holds what the other rules
    found."""

    def __init__(self, message: str, findings: Optional[List[Finding]] = None):
        super().__init__(message)
        self.findings = list(findings or [])


def too_deep(where: str) -> str:
    """The one-line message of an :class:`AnalysisLimit` (``where``: a rule, a step)."""
    return f"nested too deeply for jaxlint's analysis (Python's recursion limit was reached in {where}); " \
           f"not checked"


def crash_message(exc: BaseException, where: str) -> str:
    """One line for an unexpected exception: its type, message and the innermost frame."""
    tb = traceback.extract_tb(exc.__traceback__)
    frame = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    text = " ".join(str(exc).split())[:200]
    return f"internal error in {where}: {type(exc).__name__}: {text}{frame} — please report this jaxlint bug"


def lint_source(source: SourceFile, rules: Optional[Sequence[Rule]] = None,
                settings: Optional[Settings] = None, tree: Optional[ast.Module] = None,
                apply_noqa: bool = True, model: Optional[SemanticModel] = None) -> List[Finding]:
    """Run ``rules`` (default: all enabled by default) over one parsed file.

    ``model``: the file's semantic model when the caller built it already
    (with the project's cross-module knowledge, :mod:`jaxlint.analysis.project`).

    Raises :class:`SourceError` for a file that does not parse.  A rule that
    crashes does not stop the others: it is reported as a finding-free
    :class:`InternalError` line by the caller.
    """
    if rules is None:
        from .checkers import all_rules
        rules = [r for r in all_rules() if r.default_enabled]
    # The cyclic garbage collector would repeatedly traverse the (acyclic)
    # syntax tree while the model allocates; pause it for this file and let it
    # collect the model's few cycles afterwards.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _lint(source, rules, settings, tree, apply_noqa, model)
    finally:
        if was_enabled:
            gc.enable()


def _lint(source: SourceFile, rules: Sequence[Rule], settings: Optional[Settings],
          tree: Optional[ast.Module], apply_noqa: bool, model: Optional[SemanticModel]) -> List[Finding]:
    from .analysis import SemanticModel
    from .checkers import Context, Finding
    if model is None:
        if tree is None:
            tree = source.parse()
        try:
            model = SemanticModel(tree, source)
        except RecursionError:
            raise AnalysisLimit(too_deep("the semantic model")) from None
        except Exception as exc:
            raise InternalError(crash_message(exc, "the semantic model")) from None
    ctx = Context(model, source, settings)
    out: List[Finding] = []
    seen = set()
    errors = []
    deep = []
    for rule in rules:
        try:
            for f in rule.check(ctx):
                key = (f.code, f.line, f.col, f.end_line, f.end_col)
                if key in seen:
                    continue
                seen.add(key)
                out.append(f)
        except RecursionError:
            deep.append(rule.code)
        except Exception as exc:  # a rule bug must not take the run down
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
            errors.append(f"{rule.code}: internal error {type(exc).__name__}: {exc} ({where})")
    out = _one_finding_per_pitfall(out, rules)
    if apply_noqa:
        out = [f for f in out if not source.is_suppressed(f.line, f.code)]
    out.sort(key=Finding.sort_key)
    relabel = getattr(source, "relabel", None)
    if relabel is not None:     # a notebook: "(line 66)" of the joined cells -> "(cell 5, line 3)"
        for f in out:
            f.message = relabel(f.message)
    if errors:
        raise InternalError("; ".join(errors) + " — please report this jaxlint bug", out)
    if deep:
        raise AnalysisLimit(f"nested too deeply for jaxlint's analysis: {', '.join(deep)} could not check it "
                            f"(Python's recursion limit was reached); the other rules did", out)
    return out


def _one_finding_per_pitfall(found: List[Finding], rules: Sequence[Rule]) -> List[Finding]:
    """``found`` without the findings another reported finding supersedes: one pitfall, one
    finding (``Rule.supersedes`` names the codes a rule's finding replaces when both are about
    the same ``Finding.subject``).  Before ``noqa``: a suppressed finding still covers its pitfall."""
    over = {r.code: r.supersedes for r in rules if r.supersedes}
    if not over:
        return found
    covered = {(code, f.subject) for f in found if f.subject is not None for code in over.get(f.code, ())}
    if not covered:
        return found
    return [f for f in found if f.subject is None or (f.code, f.subject) not in covered]


def lint_path(path: str, rules: Optional[Sequence[Rule]] = None,
              settings: Optional[Settings] = None) -> FileResult:
    try:
        source = SourceFile.from_path(path)
        findings = lint_source(source, rules, settings)
        return FileResult(path, findings, source=source, error=source.partial_error)
    except SourceError as exc:
        return FileResult(path, getattr(exc, "findings", []), error=str(exc))
    except InternalError as exc:
        return FileResult(path, exc.findings, error=str(exc), internal=True)


def with_text(source: SourceFile, text: str) -> SourceFile:
    """``source`` with new text, keeping its kind (a notebook stays a notebook) and encoding."""
    make = getattr(source, "with_text", None)
    if make is not None:
        return make(text)
    return SourceFile(source.path, text, source.encoding)


def lint_and_fix(source: SourceFile, lint: Callable[[SourceFile], List[Finding]], *,
                 fix: bool = False, unsafe: bool = False) -> FileResult:
    """Lint ``source``; with ``fix``, apply the allowed fixes until stable and re-lint the result.

    ``lint`` is the per-file lint function (rules, settings and noqa already bound).
    Returns a :class:`FileResult` for the original text; when fixes changed it,
    ``fix_report``, ``fixed_source`` and ``fixed_findings`` describe the fixed
    text.  Nothing is written: the caller decides (file, notebook, stdout or a
    diff) and calls :meth:`FileResult.accept_fixes` once it has written.
    Raises :class:`SourceError`/:class:`InternalError` like :func:`lint_source`.
    """
    findings = lint(source)
    res = FileResult(source.path, findings, source=source, error=source.partial_error)
    if not fix or not any(f.fix is not None for f in findings):
        return res
    from .fixes.applier import fix_text
    report: FixReport = fix_text(source, lint, unsafe=unsafe)
    res.fix_report = report
    if report.text != source.text:
        res.fixed_source = with_text(source, report.text)
        res.fixed_findings = lint(res.fixed_source)
    return res
