"""The GitHub Action (action.yml): a composite action whose lint steps run as written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert set(action["inputs"]) == {"args", "python-version", "version", "sarif", "sarif-file"}
    for step in steps:      # inputs reach shell scripts only through env (no ${{ }} in scripts)
        assert "${{" not in step.get("run", "")


def _run_step(action, name, cwd, env_values):
    step = _step(action, name)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(env_values)
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, env=env, capture_output=True, text=True)


def test_run_step_annotates_and_fails_on_findings(action, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    proc = _run_step(action, "Run jaxlint", tmp_path, {"JAXLINT_ARGS": "src/ --select JAX101"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("::warning file=src/train.py,line=6,col=5,")
    (tmp_path / "src" / "train.py").write_text("x = 1\n")
    assert _run_step(action, "Run jaxlint", tmp_path, {"JAXLINT_ARGS": "src/"}).returncode == 0


def test_sarif_step_writes_the_file_and_never_fails(action, tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    proc = _run_step(action, "Write SARIF", tmp_path, {"JAXLINT_ARGS": ".", "JAXLINT_SARIF": "out/jaxlint.sarif"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out" / "jaxlint.sarif").read_text())
    assert doc["version"] == "2.1.0" and doc["runs"][0]["results"][0]["ruleId"] == "JAX101"
