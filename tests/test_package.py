"""The package as it is released: metadata whose links work from the package index's page, a
changelog, snippets that name a version that exists, and a source distribution that builds and
tests on its own."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import jaxlint

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_project_urls_are_absolute_and_complete():
    urls = PROJECT["urls"]
    assert set(urls) >= {"Homepage", "Documentation", "Issues", "Changelog"}
    for name, url in urls.items():
        assert re.match(r"https://github\.com/jaxlint/jaxlint(/|$)", url), (name, url)
    assert urls["Changelog"].endswith("/CHANGELOG.md")


def test_readme_links_work_from_the_package_index():
    """PyPI renders README.md without the repository around it: links must be absolute."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert links
    relative = [link for link in links if not re.match(r"(https?://|#)", link)]
    assert relative == [], relative


def test_changelog_has_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(jaxlint.__version__)}\b", text, re.M)


def test_snippets_name_this_release_and_say_when_it_exists():
    tag = f"v{jaxlint.__version__}"
    for rel in ("README.md", "docs/integrations.md"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        pins = [p for p in re.findall(r"(?:rev: |uses: jaxlint/jaxlint@)(\S+)", text)
                if not p.startswith("<")]          # `@<commit>` in prose is a placeholder
        assert pins and set(pins) == {tag}, (rel, pins)
        assert "when the release is cut" in text, rel
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert f"rev: {tag}" in hooks


def test_readme_documents_the_name_clash():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m pip uninstall jaxlint" in readme and "jaxlint --version" in readme


def _git_files():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          cwd=ROOT, capture_output=True)
    if proc.returncode != 0:
        return None
    return {f for f in proc.stdout.decode().split("\0") if f and (ROOT / f).is_file()}


def test_sdist_builds_and_tests_on_its_own(tmp_path):
    """`python -m build --sdist`, then the unpacked sdist holds every file of the tree that is
    not git-ignored (tests, fixtures, snapshots, conftest.py, docs, examples, the CI script) and
    its own tests pass against its own copy of jaxlint."""
    pytest.importorskip("build")
    try:
        from importlib.metadata import version
        isolated = int(version("setuptools").split(".")[0]) < 77
    except Exception:
        isolated = True
    before = _git_files()        # (files others add or remove meanwhile are not held against it)
    cmd = [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist")]
    if not isolated:           # the build requirements are here already: no download
        cmd.append("--no-isolation")
    proc = subprocess.run(cmd + [str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [sdist] = list((tmp_path / "dist").glob("jaxlint_static-*.tar.gz"))
    assert sdist.name == f"jaxlint_static-{jaxlint.__version__}.tar.gz"
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", **safe)
    [unpacked] = list((tmp_path / "src").iterdir())
    shipped = {str(p.relative_to(unpacked)).replace(os.sep, "/") for p in unpacked.rglob("*") if p.is_file()}

    for needed in ("tests/conftest.py", "tests/test_snapshots.py", "README.md", "CHANGELOG.md", "LICENSE",
                   "docs/integrations.md", "docs/rules.md", "examples/train_mlp.py", ".ci/run", "action.yml",
                   ".pre-commit-hooks.yaml", "jaxlint/github_action.py"):
        assert needed in shipped, needed
    assert any(f.startswith("tests/fixtures/") and f.endswith(".snap") for f in shipped)
    assert not any("/.jaxlint_cache/" in f or f.endswith(".pyc") for f in shipped)
    after = _git_files()
    if before is not None and after is not None:
        missing = sorted(f for f in (before & after) - shipped if f != ".gitignore" and not f.startswith(".github/"))
        assert missing == [], missing[:20]

    # the sdist's own tests, against the sdist's own jaxlint
    env = dict(os.environ, PYTHONPATH=str(unpacked), PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run([sys.executable, "-c", "import jaxlint; print(jaxlint.__file__)"], cwd=unpacked,
                           env=env, capture_output=True, text=True)
    assert where.stdout.strip().startswith(str(unpacked)), where.stdout + where.stderr
    # (the fixtures and their snapshots, the README with the CI script, the docs' snippets)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                          "tests/test_snapshots.py", "tests/test_formats.py",
                          "tests/test_docs.py::test_readme_test_command_is_what_ci_runs",
                          "tests/test_docs.py::test_integrations_doc_shows_editor_precommit_and_github_setups",
                          "tests/test_docs.py::test_yaml_snippets_in_docs_parse"],
                         cwd=unpacked, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
