"""Fixer invariants over every fixture and every public eval case.

For each file, with safe and with unsafe fixes: the fixed text parses; for
every rule, the findings left are at most the findings before minus the fixes
applied (fixed findings are gone, no new finding appears); fixing the fixed
text changes nothing (idempotence); and the result never depends on a fix
that was discarded as broken.
"""
from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import all_rules
from jaxlint.engine import lint_source
from jaxlint.fixes.applier import fix_text

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval" / "cases"
RULES = all_rules()


def corpus():
    files = sorted((ROOT / "tests" / "fixtures").rglob("*.py"))
    files += sorted((ROOT / "examples").rglob("*.py"))
    if EVAL.is_dir():
        files += sorted(EVAL.glob("*.py"))
    return files


def lint(src):
    return lint_source(src, RULES)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", corpus(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fix_invariants(path, unsafe):
    source = SourceFile.from_path(str(path))
    before = collections.Counter(f.code for f in lint(source))
    report = fix_text(source, lint, unsafe=unsafe)
    assert not report.broken, f"fixes discarded as broken: {report.broken}"
    assert report.stable
    ast.parse(report.text)
    after = collections.Counter(f.code for f in lint(SourceFile(str(path), report.text)))
    for code in set(before) | set(after):
        assert after[code] <= before[code] - report.applied[code], (
            f"{code}: {before[code]} before, {report.applied[code]} fixed, {after[code]} after")
    again = fix_text(SourceFile(str(path), report.text), lint, unsafe=unsafe)
    assert again.text == report.text, "fixing the fixed file changed it again"
