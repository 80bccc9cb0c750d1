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


_JOBS_SCRIPT = """
import json, sys
from pathlib import Path
import jaxlint.workspace as W
from jaxlint.checkers import all_rules
from jaxlint.workspace import Workspace, lint_files
ran = []
real = W.run_jobs
def run_jobs(*args):
    found = real(*args)
    ran.append(found is not None)
    return found
W.run_jobs = run_jobs
built = []   # models this process builds while linting (none when the workers' findings are used)
real_model = W.Project.model_for_source
def model_for_source(self, *args):
    built.append(1)
    return real_model(self, *args)
W.Project.model_for_source = model_for_source
if sys.argv[2:3] == ['fail']:
    import jaxlint.jobs as J
    def broken(*args):
        raise RuntimeError('a worker fails')
    J._HANDLERS['outgoing'] = broken
rules = [r for r in all_rules() if r.default_enabled]
root = sys.argv[1]
files = sorted(str(p) for p in Path(root).rglob('*.py'))
out = {}
for jobs in (1, 2):
    ws = Workspace(use_cache=False, root=root, traced_functions=sys.argv[3:])
    if jobs == 2 and sys.argv[2:3] == ['analysed']:
        ws.project_for(files[0]).analyse()     # the workers inherit the analysis and only lint
    built.clear()
    out[jobs] = {p: [f.to_dict() for f in found] for p, found in lint_files(files, rules, workspace=ws, jobs=jobs)}
print(json.dumps([out[1] == out[2], sum(map(len, out[1].values())), ran, 'jax' in sys.modules, len(built)]))
"""


def _jobs_1_and_2(root, *extra):
    """Lint ``root`` with --jobs 1 and 2 in a fresh interpreter (this one has JAX
    loaded, and jaxlint never forks such a process)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _JOBS_SCRIPT, str(root), *extra], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _chain_project(dest, depth=12):
    """A jitted step whose helpers call each other across ``depth`` modules (deeper than
    the fixpoint's rounds), each with a print and a Python ``if`` on its argument."""
    pkg = dest / "chain"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "step.py").write_text("import jax\nimport jax.numpy as jnp\nfrom chain import m0\n\n\n"
                                 "@jax.jit\ndef train_step(x):\n    return m0.helper(jnp.sin(x))\n")
    for i in range(depth):
        nxt = f"from chain import m{i + 1}\n" if i + 1 < depth else ""
        call = f"m{i + 1}.helper(x * 2)" if i + 1 < depth else "x"
        (pkg / f"m{i}.py").write_text(f"import jax.numpy as jnp\n{nxt}\n\ndef helper(x):\n    print(x)\n"
                                      f"    if x.sum() > 0:\n        x = -x\n    return {call}\n")


@pytest.mark.parametrize("name", ["trainer", "physics", "rl", "scripts", "serving"])
def test_jobs_give_the_same_findings(tmp_path, name):
    """--jobs 2: the workers analyse and lint the project and find exactly what one process finds
    (a project of 2-3 files is not worth two workers: it stays in one process)."""
    project = _copy(tmp_path, name)
    same, count, ran, jax_loaded, built = _jobs_1_and_2(project)
    assert same and count and not jax_loaded
    small = len(list(project.rglob("*.py"))) < 4
    assert ran == ([] if small else [True])     # the workers did the work (no fallback)
    assert small or built == 0                  # and this process used what they found


def test_jobs_give_the_same_findings_on_a_larger_tree(tmp_path):
    """Every fixture project and the examples under one root, with a call chain deeper than
    the fixpoint's rounds: the seeds, their descriptions, the exports and every finding match."""
    root = tmp_path / "all"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'all'\n")
    for p in PROJECTS.iterdir():
        if p.is_dir():
            shutil.copytree(p, root / p.name)
    shutil.copytree(Path(__file__).parent.parent / "examples", root / "examples")
    _chain_project(root)
    (root / "chain" / "listed.py").write_text("def helper(x):\n    if x > 0:\n        return x\n    return -x\n")
    same, count, ran, _, built = _jobs_1_and_2(root, "-", "chain.listed:*")
    assert same and ran == [True] and count > 30 and built == 0


def test_jobs_lint_a_project_analysed_before_they_start(tmp_path):
    same, count, ran, _, built = _jobs_1_and_2(_copy(tmp_path), "analysed")
    assert same and count == 5 and ran == [True] and built == 0


def test_a_failing_worker_falls_back_to_one_process(tmp_path):
    project = _copy(tmp_path)
    same, count, ran, _, built = _jobs_1_and_2(project, "fail")
    assert same and count == 5 and ran == [False] and built > 0


def test_jobs_never_fork_a_process_with_jax(tmp_path, monkeypatch):
    import multiprocessing
    import sys
    import jaxlint.jobs
    monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax") or object())

    def no_fork(*args, **kw):
        raise AssertionError("forked with JAX loaded")
    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    monkeypatch.setattr(jaxlint.jobs.multiprocessing, "get_context", no_fork)
    project = _copy(tmp_path)
    files = sorted(str(p) for p in project.rglob("*.py"))
    found = dict(lint_files(files, RULES, workspace=Workspace(use_cache=False), jobs=2))
    assert sum(len(v) for v in found.values()) == 5


def test_jobs_fill_the_cache_one_process_reads(tmp_path):
    """What the workers store comes back to the parent, which writes the cache: a later
    run in one process answers every file from it, with the same findings."""
    import subprocess
    import sys
    project = _copy(tmp_path)
    script = ("import sys\nfrom pathlib import Path\nfrom jaxlint.checkers import all_rules\n"
              "from jaxlint.workspace import Workspace, lint_files\n"
              "rules = [r for r in all_rules() if r.default_enabled]\n"
              "files = sorted(str(p) for p in Path(sys.argv[1]).rglob('*.py'))\n"
              "print(sum(len(f) for _, f in lint_files(files, rules, workspace=Workspace(), jobs=2)))\n")
    r = subprocess.run([sys.executable, "-c", script, str(project)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "5", r.stderr
    ws, warm = _run(project)
    cache = next(iter(ws.caches.values()))
    assert sum(map(len, warm.values())) == 5 and cache.hits and not cache.misses
    for kind in ("index", "outgoing", "exports", "findings"):
        assert list((project / ".jaxlint_cache").rglob(f"{kind}.json")), kind


def test_cli_jobs_match_one_process(tmp_path):
    project = _copy(tmp_path)
    one = _cli(["check", "--no-cache", "--format", "json", "--exit-zero", "-j", "1", "."], project)
    two = _cli(["check", "--no-cache", "--format", "json", "--exit-zero", "-j", "2", "."], project)
    assert one.returncode == two.returncode == 0, two.stderr
    assert one.stdout == two.stdout and one.stdout.count('"code"') == 5
