"""pre-commit: the hooks in .pre-commit-hooks.yaml, run by a real `pre-commit try-repo`.

The shipped hooks use `language: python`, for which pre-commit pip-installs this
checkout and its dependencies into a fresh environment: that needs a package index.
So that the suite runs offline, `test_try_repo_hooks` runs `pre-commit try-repo` on a
copy of this repository whose manifest says `language: system` (same ids, entries and
file types), with the `jaxlint` of the running environment on PATH.
`test_try_repo_installs_from_checkout` runs the manifest as shipped; it needs network
access to an index and runs only with JAXLINT_NETWORK_TESTS=1.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
BAD_PRINT = "import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n"
BAD_IF = "import jax\n\n\n@jax.jit\ndef f(x):\n    if x > 0:\n        return x\n    return -x\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ, **GIT_ENV, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _git(cwd: Path, env: dict, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _project(tmp_path: Path, env: dict) -> Path:
    proj = tmp_path / "project"
    (proj / "gen").mkdir(parents=True)
    (proj / "pyproject.toml").write_text('[tool.jaxlint]\nexclude = ["gen/"]\n')
    (proj / "step.py").write_text(BAD_PRINT)
    (proj / "gen" / "generated.py").write_text(BAD_IF)        # excluded: must stay unchecked
    _git(proj, env, "init", "-q")
    _git(proj, env, "add", ".")
    return proj


def _try_repo(repo: Path, hook: str, proj: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(repo), hook, "--all-files",
                           "--color", "never"], cwd=proj, env=env, capture_output=True, text=True, timeout=600)


def test_manifest_declares_check_and_fix_hooks():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"jaxlint", "jaxlint-fix"}
    for h in hooks.values():
        assert h["entry"].startswith("jaxlint ") and "--force-exclude" in h["entry"]
        assert set(h["types_or"]) == {"python", "jupyter"}
    assert "--fix" in hooks["jaxlint-fix"]["entry"] and "--fix" not in hooks["jaxlint"]["entry"]


def test_try_repo_hooks(tmp_path):
    env = _env(tmp_path)
    hooks_repo = tmp_path / "hooks"
    hooks_repo.mkdir()
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    for h in manifest:
        assert h["language"] == "python"
        h["language"] = "system"
    (hooks_repo / ".pre-commit-hooks.yaml").write_text(yaml.safe_dump(manifest))
    _git(hooks_repo, env, "init", "-q")
    _git(hooks_repo, env, "add", ".")
    _git(hooks_repo, env, "commit", "-qm", "hooks")
    proj = _project(tmp_path, env)

    check = _try_repo(hooks_repo, "jaxlint", proj, env)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "step.py:6:5: JAX101" in check.stdout
    assert "generated.py" not in check.stdout                 # --force-exclude keeps gen/ out
    assert (proj / "step.py").read_text() == BAD_PRINT         # the check hook writes nothing

    fix = _try_repo(hooks_repo, "jaxlint-fix", proj, env)
    assert fix.returncode == 1, fix.stdout + fix.stderr      # it changed a file: the commit stops
    assert "jax.debug.print" in (proj / "step.py").read_text()
    assert (proj / "gen" / "generated.py").read_text() == BAD_IF
    _git(proj, env, "add", ".")
    again = _try_repo(hooks_repo, "jaxlint-fix", proj, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _try_repo(hooks_repo, "jaxlint", proj, env).returncode == 0


@pytest.mark.skipif(os.environ.get("JAXLINT_NETWORK_TESTS") != "1",
                    reason="installs the hook environment with pip from a package index "
                           "(set JAXLINT_NETWORK_TESTS=1 where one is reachable)")
def test_try_repo_installs_from_checkout(tmp_path):
    env = _env(tmp_path)
    proj = _project(tmp_path, env)
    proc = _try_repo(ROOT, "jaxlint", proj, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "step.py:6:5: JAX101" in proc.stdout and "generated.py" not in proc.stdout
