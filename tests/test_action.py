"""The GitHub Action (action.yml): a composite action whose lint step runs as written."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jaxlint.github_action import ActionError, annotations, split_args

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
BAD = "import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n"


@pytest.fixture(scope="module")
def action():
    return yaml.safe_load((ROOT / "action.yml").read_text())


def _step(action, name):
    return next(s for s in action["runs"]["steps"] if s.get("name") == name)


def test_action_is_composite_with_setup_install_run_and_sarif(action):
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    install = _step(action, "Install jaxlint")
    assert "jaxlint-static" in install["run"] and "github.action_path" in install["env"]["JAXLINT_ACTION_PATH"]
    upload = _step(action, "Upload SARIF to code scanning")
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert "inputs.sarif == 'true'" in upload["if"]
    assert upload["with"]["sarif_file"] == "${{ steps.lint.outputs.sarif-file }}"
    assert set(action["inputs"]) == {"args", "python-version", "version", "sarif", "sarif-file", "working-directory"}
    for step in steps:      # inputs reach shell scripts only through env (no ${{ }} in scripts)
        assert "${{" not in step.get("run", "")


def test_actions_are_pinned_by_commit(action):
    """A tag can be moved to other code; a security linter (zizmor, scorecard) flags tag pins."""
    text = (ROOT / "action.yml").read_text()
    for step in action["runs"]["steps"]:
        if "uses" in step:
            ref = step["uses"].rsplit("@", 1)[1]
            assert re.fullmatch(r"[0-9a-f]{40}", ref), step["uses"]
            # the release it is, for people and for Dependabot
            assert re.search(re.escape(step["uses"]) + r" # v\d+\.\d+\.\d+\n", text), step["uses"]


def test_lint_is_one_jaxlint_run(action):
    """The annotations and the SARIF file come from one run: the step calls jaxlint once."""
    lint = _step(action, "Run jaxlint")
    assert lint["id"] == "lint" and lint["working-directory"] == "${{ inputs.working-directory }}"
    assert lint["run"].count("github_action.py") == 1 and "jaxlint check" not in lint["run"]
    assert [s["name"] for s in action["runs"]["steps"]].count("Run jaxlint") == 1
    assert not any("Write SARIF" == s.get("name") for s in action["runs"]["steps"])


def _run_lint(action, cwd, env_values):
    step = _step(action, "Run jaxlint")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update({"JAXLINT_ACTION_PATH": str(ROOT), "JAXLINT_ARGS": ".", "JAXLINT_SARIF_WANTED": "false",
                "JAXLINT_SARIF_FILE": "jaxlint.sarif"})
    env.pop("GITHUB_WORKSPACE", None)
    env.pop("GITHUB_OUTPUT", None)
    env.update(env_values)
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, env=env, capture_output=True, text=True)


def test_run_step_annotates_and_fails_on_findings(action, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": "src/ --select JAX101"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("::warning file=src/train.py,line=6,col=5,")
    assert not list(tmp_path.glob("*.sarif"))       # sarif: "false" writes none
    (tmp_path / "src" / "train.py").write_text("x = 1\n")
    assert _run_lint(action, tmp_path, {"JAXLINT_ARGS": "src/"}).returncode == 0


def test_annotations_are_what_format_github_prints(action, tmp_path):
    """Printed from the SARIF report, they are the very lines `--format github` prints: findings,
    notebook cells, and a file that could not be checked."""
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "train.py").write_text(BAD + "\n\ndef g(x):\n    y = x\n    return y\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "nb.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": "import jax\n\n@jax.jit\ndef f(x):\n    print(x)\n    return x\n"}],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}))
    direct = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "github", "."],
                            cwd=tmp_path, capture_output=True, text=True)
    assert direct.returncode == 2
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": "--no-cache .", "JAXLINT_SARIF_WANTED": "true",
                                        "GITHUB_WORKSPACE": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(direct.stdout.splitlines())
    assert "::error file=broken.py,title=jaxlint::syntax error" in proc.stdout
    assert "title=JAX101 print-under-trace (cell 1)" in proc.stdout


def test_sarif_and_annotations_from_one_run_and_paths_with_spaces(action, tmp_path):
    src = tmp_path / "my src"
    src.mkdir()
    (src / "train.py").write_text(BAD)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "train.py").write_text(BAD)
    output = tmp_path / "github_output"
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": '"my src/" --select JAX101', "JAXLINT_SARIF_WANTED": "true",
                                        "JAXLINT_SARIF_FILE": "out/jaxlint.sarif", "GITHUB_OUTPUT": str(output),
                                        "GITHUB_WORKSPACE": str(tmp_path)})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("::warning file=my src/train.py,line=6,col=5,")
    assert "other/" not in proc.stdout            # one argument, not two
    doc = json.loads((tmp_path / "out" / "jaxlint.sarif").read_text())
    assert doc["version"] == "2.1.0"
    [result] = doc["runs"][0]["results"]
    assert result["ruleId"] == "JAX101"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "my src/train.py",
                                                                              "uriBaseId": "%SRCROOT%"}
    assert output.read_text() == f"sarif-file={tmp_path / 'out' / 'jaxlint.sarif'}\n"


def test_working_directory_keeps_paths_relative_to_the_repository(action, tmp_path):
    sub = tmp_path / "services" / "model"
    (sub / "src").mkdir(parents=True)
    (sub / "pyproject.toml").write_text('[tool.jaxlint]\nignore = ["JAX401"]\n')
    (sub / "src" / "train.py").write_text(BAD)
    proc = _run_lint(action, sub, {"JAXLINT_ARGS": "src", "JAXLINT_SARIF_WANTED": "true",
                                   "GITHUB_WORKSPACE": str(tmp_path)})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("::warning file=services/model/src/train.py,line=6,")
    doc = json.loads((sub / "jaxlint.sarif").read_text())
    loc = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc["uri"] == "services/model/src/train.py"
    assert doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_bad_args_are_one_line_errors(action, tmp_path):
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": '"unclosed'})
    assert proc.returncode == 2 and "No closing quotation" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": "--format json ."})
    assert proc.returncode == 2 and "--format is set by the action" in proc.stderr
    proc = _run_lint(action, tmp_path, {"JAXLINT_ARGS": "--select NOPE ."})
    assert proc.returncode == 2 and "NOPE" in proc.stderr and proc.stdout == ""


def test_split_args_is_a_shell_split_without_expansion():
    assert split_args('src/ "my dir/" --select JAX1') == ["src/", "my dir/", "--select", "JAX1"]
    assert split_args("a\\ b $HOME *.py $(rm -rf x)") == ["a b", "$HOME", "*.py", "$(rm", "-rf", "x)"]
    assert split_args("") == []
    with pytest.raises(ActionError):
        split_args("-o out.json")


def test_annotations_of_a_confirmed_finding():
    doc = {"runs": [{"tool": {"driver": {"rules": [{"id": "JAX101", "name": "print-under-trace"}]}},
                     "originalUriBaseIds": {"%SRCROOT%": {"uri": "file:///repo/"}},
                     "results": [{"ruleId": "JAX101", "message": {"text": "`print` of x"},
                                  "locations": [{"physicalLocation": {
                                      "artifactLocation": {"uri": "a,b.py", "uriBaseId": "%SRCROOT%"},
                                      "region": {"startLine": 2, "startColumn": 3, "endLine": 2, "endColumn": 9}}}],
                                  "properties": {"confirmation": {"status": "confirmed", "evidence": "printed 1%"}}}],
                     "invocations": [{"toolExecutionNotifications": []}]}]}
    assert list(annotations(doc, "/repo")) == [
        "::warning file=a%2Cb.py,line=2,col=3,endLine=2,endColumn=9,title=JAX101 print-under-trace"
        "::JAX101 `print` of x [confirmed: printed 1%25]"]
