"""One harness for every rule's fixtures (derived from the rule registry).

Layout, per rule code::

    tests/fixtures/JAX201/*.py            lint fixtures: each offending line ends with
                                          ``# expect: JAX201`` (the default profile) or
                                          ``# expect-strict: JAX201`` (reported only with
                                          ``--strict``); every other line must stay silent in
                                          both profiles (negative lookalikes live beside them)
    tests/fixtures/JAX201/fix/NAME.py     a fix fixture (before)
    tests/fixtures/JAX201/fix/NAME.fixed.py         expected result of ``--fix``
    tests/fixtures/JAX201/fix/NAME.unsafe-fixed.py  expected result of ``--fix --unsafe-fixes``

The harness fails on any missing or extra finding, on a rule without
positive or negative fixtures, on a rule that declares a fix without a fix
fixture, and on a fix fixture whose rule produces no fix.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import REGISTRY, Settings, all_rules
from jaxlint.engine import lint_source
from jaxlint.fixes.applier import fix_text

FIXTURES = Path(__file__).parent / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*((?:JAX\d{3}[\s,]*)+)")
EXPECT_STRICT = re.compile(r"#\s*expect-strict:\s*((?:JAX\d{3}[\s,]*)+)")
STRICT = Settings(strict=True)


def _lint_fixtures():
    for code in sorted(REGISTRY):
        d = FIXTURES / code
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.py")):
            yield pytest.param(code, p, id=f"{code}/{p.name}")


def _fix_fixtures():
    for code in sorted(REGISTRY):
        d = FIXTURES / code / "fix"
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.py")):
            if p.name.endswith((".fixed.py", ".unsafe-fixed.py")):
                continue
            yield pytest.param(code, p, id=f"{code}/fix/{p.name}")


def expected_lines(text: str, code: str, pattern=EXPECT):
    out = set()
    for i, line in enumerate(text.splitlines(), 1):
        m = pattern.search(line)
        if m and code in re.split(r"[\s,]+", m.group(1)):
            out.add(i)
    return out


@pytest.mark.parametrize("code,path", list(_lint_fixtures()))
def test_lint_fixture(code, path):
    """The default profile reports the ``expect`` lines; ``--strict`` adds the
    ``expect-strict`` ones, each marked as the strict profile's."""
    source = SourceFile.from_path(str(path))
    rule = REGISTRY[code]
    default = sorted(expected_lines(source.text, code))
    strict_only = expected_lines(source.text, code, EXPECT_STRICT)
    for settings, want in ((None, default), (STRICT, sorted(set(default) | strict_only))):
        findings = lint_source(source, [rule], settings, apply_noqa=True)
        got = sorted(f.line for f in findings)
        missing = sorted(set(want) - set(got))
        extra = [f"{f.line}: {f.message}" for f in findings if f.line not in want]
        profile = "--strict" if settings else "default profile"
        assert not missing and not extra, f"{profile}: missing on lines {missing}; unexpected: {extra}"
        assert len(got) == len(set(got)) or len(got) == len(want), "duplicate findings on one line"
        if settings is not None:
            wrong = [f"{f.line}: {f.profile}" for f in findings if (f.profile == "strict") != (f.line in strict_only)
                     and f.line not in default]
            assert not wrong, f"findings in the wrong profile: {wrong}"


@pytest.mark.parametrize("code,path", list(_fix_fixtures()))
def test_fix_fixture(code, path):
    """Each fix fixture is checked in both applicabilities.  A missing expectation is
    derived: without ``.unsafe-fixed.py``, ``--unsafe-fixes`` must give the ``.fixed.py``
    result (the rule offers nothing more); without ``.fixed.py``, plain ``--fix`` must leave
    the file unchanged (the rule's fix is unsafe)."""
    rule = REGISTRY[code]
    source = SourceFile.from_path(str(path))
    safe_path = path.with_name(path.name[:-3] + ".fixed.py")
    unsafe_path = path.with_name(path.name[:-3] + ".unsafe-fixed.py")
    assert safe_path.exists() or unsafe_path.exists(), \
        f"{path.name} has no .fixed.py or .unsafe-fixed.py expectation"
    safe_expected = SourceFile.from_path(str(safe_path)).text if safe_path.exists() else source.text
    unsafe_expected = SourceFile.from_path(str(unsafe_path)).text if unsafe_path.exists() else safe_expected

    def lint(src):   # (both profiles: a strict finding's fix is checked too)
        return lint_source(src, [rule], STRICT)

    for unsafe, expected, explicit in ((False, safe_expected, safe_path.exists()),
                                       (True, unsafe_expected, unsafe_path.exists())):
        report = fix_text(source, lint, unsafe=unsafe)
        if explicit:
            assert report.text != source.text, f"{code} produced no fix for {path.name}"
        assert not report.broken, report.broken
        mode = "--fix --unsafe-fixes" if unsafe else "--fix"
        assert report.text == expected, f"{mode} result differs from its expectation for {path.name}"
        ast.parse(report.text)
        after = lint_source(SourceFile(str(path), report.text), [rule], STRICT)
        fixable = [f for f in after if f.fix is not None and (unsafe or f.fix.applicability == "safe")]
        assert not fixable, f"after fixing, {code} still offers fixes: {[f.message for f in fixable]}"
        # idempotence
        again = fix_text(SourceFile(str(path), report.text), lint, unsafe=unsafe)
        assert again.text == report.text


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_rule_has_fixtures(rule):
    d = FIXTURES / rule.code
    files = sorted(d.glob("*.py")) if d.is_dir() else []
    assert files, f"{rule.code} has no fixtures in {d}"
    texts = [f.read_text(encoding="utf-8") for f in files]
    positives = sum(len(expected_lines(t, rule.code)) for t in texts)
    assert positives >= 2, f"{rule.code} needs at least two positive fixture lines"
    # negative lookalikes: lines marked `# ok:` document why a lookalike stays silent
    negatives = sum(t.count("# ok") for t in texts)
    assert negatives >= 2, f"{rule.code} needs negative lookalikes marked with `# ok: <why>`"
    if rule.fix_applicability:
        fix_dir = d / "fix"
        befores = [p for p in fix_dir.glob("*.py") if not p.name.endswith(("fixed.py",))] if fix_dir.is_dir() else []
        assert befores, f"{rule.code} declares a {rule.fix_applicability} fix but has no fix fixture"


def test_every_fixture_directory_names_a_rule():
    for d in FIXTURES.iterdir():
        if d.name == "projects":   # multi-module projects: tests/test_projects.py
            continue
        if d.is_dir() and not d.name.startswith(("_", ".")):
            assert d.name in REGISTRY, f"fixture directory {d.name} names no registered rule"


def test_all_rules_together_never_crash_on_fixtures():
    rules = all_rules()
    for p in sorted(FIXTURES.rglob("*.py")):
        lint_source(SourceFile.from_path(str(p)), rules)
