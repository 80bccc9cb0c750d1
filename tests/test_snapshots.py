"""Expected-output snapshots beside the rule fixtures.

``tests/test_fixtures.py`` checks *which lines* a rule reports; this checks
*what it says*: for every lint fixture ``tests/fixtures/CODE/NAME.py`` the
file ``NAME.snap`` beside it holds one line per finding::

    LINE:COL-END_LINE:END_COL CONFIDENCE FIX [strict: BASIS] MESSAGE

(1-based columns, as the CLI prints them; FIX is ``safe``, ``unsafe`` or
``-``; the findings of both profiles, the strict profile's marked with why).  A change of message text, span, confidence or fix applicability
shows up as a diff of that file.  Regenerate after an intended change with::

    python -m pytest tests/test_snapshots.py --update-snapshots

and review the diff before committing it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import REGISTRY, Settings
from jaxlint.engine import lint_source

FIXTURES = Path(__file__).parent / "fixtures"


def _fixtures():
    for code in sorted(REGISTRY):
        d = FIXTURES / code
        if d.is_dir():
            for p in sorted(d.glob("*.py")):
                yield pytest.param(code, p, id=f"{code}/{p.name}")


def render(code: str, path: Path) -> str:
    source = SourceFile.from_path(str(path))
    lines = []
    for f in lint_source(source, [REGISTRY[code]], Settings(strict=True)):
        fix = f.fix.applicability if f.fix is not None else "-"
        profile = f"[strict: {f.basis}] " if f.profile == "strict" else ""
        lines.append(f"{f.line}:{f.col + 1}-{f.end_line}:{f.end_col + 1} {f.confidence} {fix} {profile}{f.message}")
    return "".join(line + "\n" for line in lines)


@pytest.mark.parametrize("code,path", list(_fixtures()))
def test_snapshot(code, path, request):
    snap = path.with_suffix(".snap")
    got = render(code, path)
    if request.config.getoption("--update-snapshots"):
        if not snap.exists() or snap.read_text(encoding="utf-8") != got:
            snap.write_text(got, encoding="utf-8")
        return
    assert snap.exists(), (f"{snap.relative_to(FIXTURES.parent)} is missing: run "
                           "`python -m pytest tests/test_snapshots.py --update-snapshots` and review it")
    want = snap.read_text(encoding="utf-8")
    assert got == want, (f"{code} output changed for {path.name}; if intended, run "
                         "`python -m pytest tests/test_snapshots.py --update-snapshots` and review the diff")


def test_no_orphan_snapshots():
    """A snapshot whose fixture was renamed or deleted would never be checked."""
    orphans = [str(s.relative_to(FIXTURES)) for s in FIXTURES.glob("*/*.snap")
               if not s.with_suffix(".py").exists()]
    assert not orphans, f"snapshots without a fixture: {orphans}"
