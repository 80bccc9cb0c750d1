"""The fix applier: overlaps, broken fixes, convergence, atomic writes."""
from __future__ import annotations

import os
import stat

import pytest

from jaxlint.analysis import SourceError, SourceFile
from jaxlint.checkers import Finding
from jaxlint.fixes.applier import MAX_PASSES, fix_text, write_atomic
from jaxlint.fixes.edits import SAFE, UNSAFE, Edit, Fix, apply_edits


def finding(code, start, end, content, applicability=SAFE, line=1):
    return Finding(code, "sym", "f.py", line, 0, line, 1, "msg",
                   fix=Fix("title", (Edit(start, end, content),), applicability))


def test_apply_edits_in_any_order_and_rejects_overlap():
    assert apply_edits("abcdef", [Edit(4, 5, "E"), Edit(0, 1, "A")]) == "AbcdEf"
    with pytest.raises(ValueError):
        apply_edits("abcdef", [Edit(0, 3, "x"), Edit(2, 4, "y")])


def test_overlapping_fixes_apply_first_then_relint():
    src = SourceFile("f.py", "x = 1\n")
    calls = []

    def lint(s):
        calls.append(s.text)
        out = []
        if "x = 1" in s.text:
            out.append(finding("JAX900", 0, 5, "x = 2"))
            out.append(finding("JAX901", 4, 5, "3"))   # overlaps the first: deferred
        elif "x = 2" in s.text:
            out.append(finding("JAX901", 4, 5, "3"))
        return out

    report = fix_text(src, lint)
    assert report.text == "x = 3\n"
    assert report.applied == {"JAX900": 1, "JAX901": 1}
    assert report.passes == 2 and report.stable


def test_unsafe_fixes_need_opt_in():
    src = SourceFile("f.py", "x = 1\n")
    lint = lambda s: [finding("JAX900", 4, 5, "2", UNSAFE)] if "1" in s.text else []  # noqa: E731
    assert fix_text(src, lint).text == "x = 1\n"
    assert fix_text(src, lint, unsafe=True).text == "x = 2\n"


def test_fix_that_does_not_parse_is_dropped_and_reported():
    src = SourceFile("f.py", "x = 1\ny = 2\n")

    def lint(s):
        out = []
        if "x = 1" in s.text:
            out.append(finding("JAX900", 0, 5, "x = (", line=1))      # broken
        if "y = 2" in s.text:
            out.append(finding("JAX901", 6, 11, "y = 3", line=2))     # fine
        return out

    report = fix_text(src, lint)
    assert report.text == "x = 1\ny = 3\n"
    assert report.broken == [("JAX900", 1, "the fixed code does not parse")]
    assert report.applied == {"JAX901": 1}


def test_fixes_that_never_settle_are_reported_unstable():
    src = SourceFile("f.py", "x = 0\n")

    def lint(s):
        n = int(s.text.split("=")[1])
        return [finding("JAX900", 4, 4 + len(str(n)), str(n + 1))]

    report = fix_text(src, lint)
    assert not report.stable and report.passes == MAX_PASSES


def test_write_atomic_keeps_mode_and_encoding(tmp_path):
    p = tmp_path / "m.py"
    p.write_bytes("# -*- coding: latin-1 -*-\nx = 'é'\r\n".encode("latin-1"))
    os.chmod(p, 0o750)
    src = SourceFile.from_path(str(p))
    assert src.encoding == "iso-8859-1"
    write_atomic(str(p), src, src.text.replace("x =", "y ="))
    assert p.read_bytes() == "# -*- coding: latin-1 -*-\ny = 'é'\r\n".encode("latin-1")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o750
    assert sorted(os.listdir(tmp_path)) == ["m.py"]


def test_write_atomic_vanished_and_read_only(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    src = SourceFile.from_path(str(p))
    p.unlink()
    with pytest.raises(SourceError, match="vanished"):
        write_atomic(str(p), src, "x = 2\n")
    assert not p.exists()
    p.write_text("x = 1\n")
    os.chmod(p, 0o444)
    with pytest.raises(SourceError, match="read-only"):
        write_atomic(str(p), src, "x = 2\n")
    assert p.read_text() == "x = 1\n"


def test_write_atomic_unencodable_text_is_an_error(tmp_path):
    p = tmp_path / "m.py"
    p.write_bytes(b"# coding: ascii\nx = 1\n")
    src = SourceFile.from_path(str(p))
    with pytest.raises(SourceError, match="cannot be encoded"):
        write_atomic(str(p), src, "# coding: ascii\nx = 'é'\n")
    assert p.read_bytes() == b"# coding: ascii\nx = 1\n"
