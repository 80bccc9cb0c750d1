"""The workspace: per-file lint functions with the project's context and the results cache."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import Finding, all_rules
from jaxlint.engine import lint_source
from jaxlint.workspace import Workspace, lint_files

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
RULES = [r for r in all_rules() if r.default_enabled]


def _copy(tmp_path, name="trainer"):
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest)
    return dest


def _run(project, **kw):
    ws = Workspace(**kw)
    files = sorted(str(p) for p in project.rglob("*.py"))
    return ws, {p: [f.to_dict() for f in found] for p, found in lint_files(files, RULES, workspace=ws)}


def test_one_file_sees_the_whole_project(tmp_path):
    """Checking only utils.py still reports what train.py's jitted step makes of it."""
    project = _copy(tmp_path)
    utils = project / "src" / "trainer" / "utils.py"
    ws = Workspace(use_cache=False)
    found = ws.lint_function(str(utils), RULES)(SourceFile.from_path(str(utils)))
    assert {"JAX101", "JAX201", "JAX203"} <= {f.code for f in found}
    assert not (project / ".jaxlint_cache").exists()


def test_warm_run_comes_from_the_cache(tmp_path):
    project = _copy(tmp_path)
    ws1, cold = _run(project)
    ws2, warm = _run(project)
    assert warm == cold and any(cold.values())
    cache = next(iter(ws2.caches.values()))
    assert cache.hits and not cache.misses
    assert all(m.tree is None for p in ws2.projects.values() for m in p.modules)


def test_edit_in_the_caller_invalidates_the_unchanged_helper(tmp_path):
    """utils.py is unchanged, but train.py no longer calls log_stats under jit:
    utils.py's cached findings must not be reused."""
    project = _copy(tmp_path)
    _, before = _run(project)
    utils = str(project / "src" / "trainer" / "utils.py")
    assert any(f["code"] == "JAX101" for f in before[utils])
    train = project / "src" / "trainer" / "train.py"
    train.write_text(train.read_text().replace("    utils.log_stats(loss, 0)\n", ""))
    _, after = _run(project)
    assert not any(f["code"] == "JAX101" for f in after[utils])


def test_cached_findings_keep_their_fixes():
    src = SourceFile.from_path(str(PROJECTS / "scripts" / "common.py"))
    for f in lint_source(src, RULES):
        assert Finding.from_dict(f.to_dict(src)) == f


def _cli(args, cwd):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "jaxlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_cli_on_one_file_reports_cross_module_findings(tmp_path):
    project = _copy(tmp_path)
    r = _cli(["check", "--no-cache", "--format", "json", "src/trainer/utils.py"], project)
    import json
    codes = sorted(f["code"] for f in json.loads(r.stdout))
    assert codes == ["JAX101", "JAX201", "JAX203"], r.stdout + r.stderr
    assert not (project / ".jaxlint_cache").exists()   # --no-cache writes nothing
    r2 = _cli(["check", "--format", "json", "src/trainer/utils.py"], project)
    assert sorted(f["code"] for f in json.loads(r2.stdout)) == codes
    assert (project / ".jaxlint_cache" / ".gitignore").exists()


def test_plugins_on_one_file_report_cross_module_findings(tmp_path):
    import subprocess
    import sys
    project = _copy(tmp_path)
    r = subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX", "src/trainer/utils.py"],
                       cwd=project, capture_output=True, text=True, timeout=120)
    assert {line.split()[1] for line in r.stdout.splitlines()} == {"JAX101", "JAX201", "JAX203"}, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin", "--disable=all",
                        "--enable=jaxlint", "src/trainer/utils.py"], cwd=project, capture_output=True, text=True,
                       timeout=120)
    assert "log_stats" in r.stdout and "clip_grads" in r.stdout and "to_host" in r.stdout, r.stdout + r.stderr


def test_a_notebook_traces_project_helpers(tmp_path):
    """A jitted function in a notebook that calls a project helper makes the helper traced."""
    nbformat = pytest.importorskip("nbformat")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'nbproj'\n")
    (tmp_path / "helpers.py").write_text("def log_loss(loss):\n    print(loss)\n    return loss\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import jax\nimport helpers"),
                nbformat.v4.new_code_cell("%matplotlib inline\n@jax.jit\ndef step(x):\n"
                                          "    return helpers.log_loss(x * 2)")]
    nbformat.write(nb, str(tmp_path / "explore.ipynb"))
    helpers = str(tmp_path / "helpers.py")
    found = Workspace(use_cache=False).lint_function(helpers, RULES)(SourceFile.from_path(helpers))
    assert [f.code for f in found] == ["JAX101"]
    assert "explore.ipynb" in found[0].message


def test_jobs_give_the_same_findings(tmp_path):
    """--jobs: worker processes forked after the analysis find exactly what one process finds
    (run in a fresh interpreter: this one has JAX loaded, and prefetch never forks such a process)."""
    import subprocess
    import sys
    project = _copy(tmp_path)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from jaxlint.checkers import all_rules\n"
        "from jaxlint.workspace import Workspace, lint_files\n"
        "rules = [r for r in all_rules() if r.default_enabled]\n"
        "files = sorted(str(p) for p in Path(sys.argv[1]).rglob('*.py'))\n"
        "out = {}\n"
        "for jobs in (1, 2):\n"
        "    ws = Workspace(use_cache=False)\n"
        "    out[jobs] = {p: [f.to_dict() for f in found] for p, found in lint_files(files, rules, workspace=ws, jobs=jobs)}\n"
        "print(json.dumps([out[1] == out[2], sum(map(len, out[1].values())), 'jax' in sys.modules]))\n")
    r = subprocess.run([sys.executable, "-c", script, str(project)], capture_output=True, text=True, timeout=120)
    same, count, jax_loaded = json.loads(r.stdout)
    assert same and count == 5 and not jax_loaded, r.stderr


def test_cli_jobs_match_one_process(tmp_path):
    project = _copy(tmp_path)
    one = _cli(["check", "--no-cache", "--format", "json", "--exit-zero", "-j", "1", "."], project)
    two = _cli(["check", "--no-cache", "--format", "json", "--exit-zero", "-j", "2", "."], project)
    assert one.returncode == two.returncode == 0, two.stderr
    assert one.stdout == two.stdout and one.stdout.count('"code"') == 5
