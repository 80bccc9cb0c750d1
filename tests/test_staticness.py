"""JAX's staticness rules are data (``jaxlint/analysis/staticness.py``): every row is shown by a
fixture line tagged ``# ok: [tag] ...`` that stays silent, and every tag names a row."""
from __future__ import annotations

import re
from pathlib import Path

from jaxlint.analysis.staticness import STATIC_RULES, STATIC_TAGS

FIXTURES = Path(__file__).parent / "fixtures"
TAG = re.compile(r"#\s*ok:\s*\[([a-z_]+)\]")


def _tags():
    found = {}
    for p in FIXTURES.rglob("*.py"):
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            m = TAG.search(line)
            if m:
                found.setdefault(m.group(1), []).append(f"{p.relative_to(FIXTURES)}:{i}")
    return found


def test_every_static_rule_has_a_fixture():
    found = _tags()
    missing = [r.tag for r in STATIC_RULES if r.tag not in found]
    assert not missing, f"staticness rows without a `# ok: [tag]` fixture line: {missing}"


def test_every_fixture_tag_names_a_rule():
    unknown = {t: w for t, w in _tags().items() if t not in STATIC_TAGS}
    assert not unknown, f"fixture tags naming no staticness row: {unknown}"


def test_rows_are_unique_and_documented():
    assert len(STATIC_TAGS) == len(STATIC_RULES)
    for r in STATIC_RULES:
        assert r.what and r.where, r.tag
