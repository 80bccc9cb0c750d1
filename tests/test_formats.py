"""The report formats CI systems read, each checked against its consumer or its documented schema:
GitLab code quality (the documented JSON fields), JUnit XML (parsed by junitparser, a JUnit
consumer, and by the structure of the JUnit schema), pylint's parseable text (pylint's own line
format, and pylint's output for the same finding) and the one-line `concise` format."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from jaxlint.cli import main
from jaxlint.reporting import FORMATS, PYLINT_LINE

BAD = "import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n"
# a finding with a safe fix (JAX101) and one on line 3 of a notebook's second code cell
NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": "import jax\n"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "@jax.jit\ndef f(x):\n    print(x)\n    return x\n"},
    ],
    "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.py").write_text(BAD)
    (tmp_path / "src" / "ok.py").write_text("x = 1\n")
    (tmp_path / "src" / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "src" / "nb.ipynb").write_text(json.dumps(NOTEBOOK))
    return tmp_path


def report(fmt, *args):
    out = io.StringIO()
    old = sys.stdout
    sys.stdout = out
    try:
        rc = main(["check", "--no-cache", "--no-progress", "--format", fmt, *args])
    finally:
        sys.stdout = old
    return rc, out.getvalue()


def test_every_format_is_offered():
    assert set(FORMATS) >= {"text", "concise", "json", "github", "sarif", "gitlab", "junit", "pylint"}


# ------------------------------------------------------------------ GitLab code quality
# The fields GitLab reads from a code quality report (docs.gitlab.com: "Code Quality", "Code Quality
# report format"): an array of objects with description, check_name, fingerprint, severity (one of
# five) and location.path with location.lines.begin; type "issue" and categories as in the Code
# Climate spec GitLab's format is a subset of.
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "type": {"const": "issue"},
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "categories": {"type": "array", "items": {"enum": [
                "Bug Risk", "Clarity", "Compatibility", "Complexity", "Duplication", "Performance",
                "Security", "Style"]}},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "not": {"pattern": "^(/|\\./|\\.\\./)"}},
                    "lines": {"type": "object", "required": ["begin"],
                              "properties": {"begin": {"type": "integer", "minimum": 1},
                                             "end": {"type": "integer", "minimum": 1}}},
                },
            },
        },
    },
}


def test_gitlab_code_quality_report_matches_the_documented_fields(tree, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    rc, out = report("gitlab", "src")
    assert rc == 2     # broken.py could not be checked
    issues = json.loads(out)
    jsonschema.validate(issues, GITLAB_SCHEMA)
    by_path = {(i["location"]["path"], i["check_name"]) for i in issues}
    assert by_path == {("src/bad.py", "JAX101 print-under-trace"), ("src/nb.ipynb", "JAX101 print-under-trace"),
                       ("src/broken.py", "jaxlint/file-not-checked")}
    bad = next(i for i in issues if i["location"]["path"] == "src/bad.py")
    assert bad["location"]["lines"] == {"begin": 6, "end": 6} and bad["severity"] == "major"
    assert bad["description"].startswith("JAX101 `print` of traced value `x`")
    nb = next(i for i in issues if i["location"]["path"] == "src/nb.ipynb")
    assert nb["location"]["lines"]["begin"] == 3 and nb["description"].endswith("(cell 2)")
    assert len({i["fingerprint"] for i in issues}) == len(issues)

    # fingerprints survive moving code and a run from another directory; paths follow CI_PROJECT_DIR
    (tree / "src" / "bad.py").write_text("# a comment\n\n" + BAD + BAD.replace("def step", "def step2"))
    monkeypatch.chdir(tree / "src")
    monkeypatch.setenv("CI_PROJECT_DIR", str(tree))
    _, out2 = report("gitlab", ".")
    again = json.loads(out2)
    jsonschema.validate(again, GITLAB_SCHEMA)
    moved = [i for i in again if i["location"]["path"] == "src/bad.py"]
    assert [i["location"]["lines"]["begin"] for i in moved] == [8, 15]
    assert moved[0]["fingerprint"] == bad["fingerprint"]      # same line text: the same issue
    assert moved[1]["fingerprint"] != bad["fingerprint"]      # the same text again: a new issue
    assert {i["fingerprint"] for i in again} >= {i["fingerprint"] for i in issues}


def test_gitlab_report_of_a_clean_tree_is_an_empty_array(tree):
    rc, out = report("gitlab", "src/ok.py")
    assert rc == 0 and json.loads(out) == []


# ------------------------------------------------------------------ JUnit XML
def _check_junit_structure(root):
    """The structure of the JUnit schema (the Ant/Jenkins `junit-10.xsd` and Maven Surefire):
    <testsuites> of <testsuite name tests failures errors>, each of <testcase name classname> with at
    most one <failure message type> or <error message type>; counts add up; integers where the
    schema says xs:int."""
    assert root.tag == "testsuites"
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        cases = list(suite)
        assert all(c.tag == "testcase" and c.get("name") and c.get("classname") for c in cases)
        counts = {"tests": len(cases),
                  "failures": sum(1 for c in cases if c.find("failure") is not None),
                  "errors": sum(1 for c in cases if c.find("error") is not None)}
        for key, n in counts.items():
            assert suite.get(key) == str(n), (key, suite.attrib)
            totals[key] += n
        for c in cases:
            outcomes = [e for e in c if e.tag in ("failure", "error", "skipped")]
            assert len(outcomes) <= 1
            for e in outcomes:
                assert e.get("message") and e.get("type")
            if c.get("line") is not None:
                assert int(c.get("line")) >= 1
    for key, n in totals.items():
        assert root.get(key) == str(n)


def test_junit_xml_is_read_by_a_junit_consumer(tree, tmp_path):
    junitparser = pytest.importorskip("junitparser")
    path = tree / "out" / "jaxlint.xml"
    rc, _ = report("junit", "--output-file", str(path), "src")
    assert rc == 2
    text = path.read_text(encoding="utf-8")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    _check_junit_structure(ET.fromstring(text.encode("utf-8")))

    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"src/bad.py", "src/ok.py", "src/broken.py", "src/nb.ipynb"}
    assert (xml.tests, xml.failures, xml.errors) == (4, 2, 1)
    [case] = list(suites["src/bad.py"])
    [failure] = case.result
    assert isinstance(failure, junitparser.Failure) and failure.type == "JAX101"
    assert failure.message.startswith("JAX101 `print` of traced value `x`")
    assert case.name == "JAX101 print-under-trace at src/bad.py:6:5" and case.classname == "src/bad.py"
    assert "    print(x)" in failure.text
    [ok] = list(suites["src/ok.py"])
    assert ok.is_passed
    [broken] = list(suites["src/broken.py"])
    assert isinstance(broken.result[0], junitparser.Error) and "syntax error" in broken.result[0].message
    [cell] = list(suites["src/nb.ipynb"])
    assert cell.name == "JAX101 print-under-trace at src/nb.ipynb:cell 2:line 3:5"


def test_junit_xml_holds_text_xml_cannot(tmp_path, monkeypatch):
    """A control character in a flagged line (legal Python) is replaced, never written raw."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(BAD.replace("print(x)", "print(x, '\x0b')"))
    rc, out = report("junit", "m.py")
    assert rc == 1
    root = ET.fromstring(out.encode("utf-8"))
    _check_junit_structure(root)
    assert "\ufffd" in root.find("testsuite/testcase/failure").text


# ------------------------------------------------------------------ pylint
PARSEABLE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): \[(?P<msg_id>[A-Z]+\d+)\((?P<symbol>[a-z0-9-]+)\), "
                       r"(?P<obj>[^\]]*)\] (?P<msg>.+)$")


def test_pylint_format_is_pylints_parseable_format(tree):
    pytest.importorskip("pylint")
    from pylint.reporters.text import ParseableTextReporter
    assert PYLINT_LINE == ParseableTextReporter.line_format

    rc, out = report("pylint", "src")
    assert rc == 2
    lines = out.splitlines()
    matches = [PARSEABLE.match(line) for line in lines]
    assert all(matches), lines
    got = {(m["path"], m["line"], m["msg_id"], m["symbol"]) for m in matches}
    assert got == {("src/bad.py", "6", "JAX101", "print-under-trace"),
                   ("src/nb.ipynb", "3", "JAX101", "print-under-trace"),
                   ("src/broken.py", "1", "E0001", "syntax-error")}
    assert any(m["msg"].endswith("(cell 2)") for m in matches if m["path"] == "src/nb.ipynb")

    # pylint itself, with jaxlint's plugin, reports the same finding on the same line in the same shape
    proc = subprocess.run([sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin",
                           "--output-format=parseable", "--disable=all", "--enable=print-under-trace",
                           "--persistent=n", "src/bad.py"], capture_output=True, text=True, cwd=tree)
    theirs = [PARSEABLE.match(line) for line in proc.stdout.splitlines() if line.startswith("src/")]
    assert len(theirs) == 1 and theirs[0], proc.stdout
    ours = next(m for m in matches if m["path"] == "src/bad.py")
    assert (theirs[0]["path"], theirs[0]["line"], theirs[0]["symbol"]) == (ours["path"], ours["line"], ours["symbol"])
    assert ours["msg"] in theirs[0]["msg"] or theirs[0]["msg"] in ours["msg"]


# ------------------------------------------------------------------ concise
def test_concise_is_one_line_per_finding_and_a_summary(tree):
    rc, out = report("concise", "src")
    assert rc == 2
    lines = out.splitlines()
    assert lines[0] == ("src/bad.py:6:5: JAX101 [*] `print` of traced value `x` inside `step` (jitted with "
                        "`jax.jit`) runs once at trace time and shows a tracer, not the value")
    assert lines[1].startswith("src/nb.ipynb:cell 2:line 3:5: JAX101 [*] `print`")
    assert lines[2:] == ["Found 2 findings in 2 files (3 files checked).", "[*] 2 fixable with --fix."]
    rc, out = report("concise", "src/ok.py")
    assert rc == 0 and out == "All checks passed (1 file checked).\n"


def test_concise_marks_inferred_findings_and_quiet_keeps_only_findings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(
        "import jax\n\nfrom pkg.utils import log_value\n\n\n@jax.jit\ndef step(x):\n    log_value(x)\n    return x\n")
    (tmp_path / "pkg" / "utils.py").write_text("def log_value(v):\n    print(v)\n    return v\n")
    rc, out = report("concise", "pkg")
    assert rc == 1
    first = out.splitlines()[0]
    assert first.startswith("pkg/utils.py:2:5: JAX101") and first.endswith("[inferred]")


@pytest.mark.parametrize("fmt", ["concise", "gitlab", "junit", "pylint"])
def test_new_formats_from_the_command_line(tree, fmt):
    """Through the installed command: the report on stdout, the file errors on stderr, exit 2."""
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", fmt, "src"],
                          capture_output=True, text=True, cwd=tree, env=dict(os.environ, NO_COLOR="1"))
    assert proc.returncode == 2, proc.stderr
    assert "src/broken.py: error: syntax error" in proc.stderr
    assert "src/bad.py" in proc.stdout and "Traceback" not in proc.stderr
