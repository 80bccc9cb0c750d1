"""Property-based tests: odd but valid layouts never make the fixer lose or break code.

Each generated module wraps fixable statements (JAX101 prints, JAX301 item
assignments) in random layout features: comments inside brackets, line
continuations, semicolons, nested f-strings, CRLF endings, a BOM, tabs and
non-ASCII identifiers/strings on the same line before the edit.  Properties:
the result parses; every byte outside the edited statements is unchanged;
fixing again changes nothing.
"""
from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxlint.analysis import SourceFile
from jaxlint.checkers import all_rules
from jaxlint.engine import lint_source
from jaxlint.fixes.applier import fix_text

RULES = all_rules()

names = st.sampled_from(["x", "buf", "ünï", "état", "数据", "x_1"])
strings = st.sampled_from(["loss", "ünïcødé ✓", "brace {x}", "percent %", "tab\\t", "quote'"])
comments = st.sampled_from(["", "  # note", "  # ✓ ünï", "  # noqa-ish: not really"])

PRINT_FORMS = [
    lambda n, s: f'print("{s}", {n})',
    lambda n, s: f'print(f"{s} {{{n}:.2f}}")',
    lambda n, s: f'print(f"{s} {{{n}!r}} {{jnp.sum({n})}}")',
    lambda n, s: f'print(\n        "{s}",  # inside the brackets\n        {n},\n    )',
    lambda n, s: f'print("{s}", \\\n        {n})',
    lambda n, s: f'print(f"{{{n}:{{8}}}}")',               # nested field in the spec: no fix, must survive
    lambda n, s: f'print(f"outer {{f\'{{{n}}}\'}}")',          # nested f-string
]
UPDATE_FORMS = [
    lambda n: f"{n}[0] = 1.0",
    lambda n: f"{n}[1:3] += 2.0",
    lambda n: f"{n}[\n        0,  # row\n    ] = 3.0",
    lambda n: f"{n}[0] = \\\n        4.0",
    lambda n: f"a = 1; {n}[0] = 5.0; b = 2",
    lambda n: f"{n}[0] //= 2",                               # no fix, must survive
]


@st.composite
def modules(draw):
    n = draw(names)
    lines = ["import jax", "import jax.numpy as jnp", "", "",
             "@jax.jit", f"def step({n}):"]
    lines.append(f'    label = "{draw(strings)}"{draw(comments)}')
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            lines.append("    " + draw(st.sampled_from(PRINT_FORMS))(n, draw(strings)) + draw(comments))
        else:
            lines.append("    " + draw(st.sampled_from(UPDATE_FORMS))(n) + draw(comments))
    lines.append(f"    return {n}")
    lines.append("")
    text = "\n".join(lines)
    if draw(st.booleans()):
        text = text.replace("    ", "\t")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = text.replace("\n", newline)
    bom = draw(st.booleans())
    return text, bom


def lint(src):
    return lint_source(src, RULES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_fixer_properties(case):
    text, bom = case
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    try:
        ast.parse(text)
    except SyntaxError:
        return  # a layout combination that is not valid Python (e.g. tabs mixed into continuation lines)
    source = SourceFile.from_bytes("gen.py", raw)
    findings = lint(source)
    report = fix_text(source, lint, unsafe=True)
    assert not report.broken, report.broken
    ast.parse(report.text)
    # bytes outside the edited statements are untouched
    spans = sorted((e for f in findings if f.fix for e in f.fix.edits), key=lambda e: (e.start, e.end))
    if spans:
        first, last = spans[0].start, max(e.end for e in spans)
        assert report.text[:first] == source.text[:first]
        tail = len(source.text) - last
        assert report.text[len(report.text) - tail:] == source.text[last:]
    else:
        assert report.text == source.text
    # line endings and the BOM survive the round trip through the file encoding
    out = source.encode(report.text)
    assert out.startswith(b"\xef\xbb\xbf") == bom
    if "\r\n" in text:
        assert b"\n" not in out.replace(b"\r\n", b"")
    again = fix_text(SourceFile("gen.py", report.text), lint, unsafe=True)
    assert again.text == report.text
