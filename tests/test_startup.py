"""Start-up and warm runs (issue 23): what a command imports, and a warm `jaxlint check`
answered by the results cache without the analysis, exactly as a cold run would answer.

A warm run is answered from the cache's record of the project (``manifest``: every project
file's ``os.stat`` before the run that recorded it read it, and the findings key each checked
file used) when every file still has that ``stat`` (a file modified within two seconds of it is
hashed again); anything else -- a file edited, added or removed, another configuration, another
jaxlint, an entry that fails the cache's signature -- lints as before.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jaxlint import cache as cache_mod
from jaxlint.cli import main

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
REPO = Path(__file__).parent.parent


def _run(args, capsys):
    if "-j" not in args:        # (in one process: --jobs workers make the lint functions elsewhere)
        args = args + ["-j", "1"]
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _python(code: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "this user's key")
    monkeypatch.setattr(cache_mod, "_KEY", [])


@pytest.fixture
def project(tmp_path, key):
    dest = tmp_path / "trainer"
    shutil.copytree(PROJECTS / "trainer", dest)
    old = time.time() - 60      # older than the two seconds that make a file's times untrusted
    for p in dest.rglob("*.py"):
        os.utime(p, (old, old))
    return dest


def _answered(monkeypatch):
    """Record whether each run was answered by the cache alone (no lint function was made)."""
    import jaxlint.workspace as W
    made = []
    real = W.Workspace.lint_function

    def lint_function(self, *a, **k):
        made.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(W.Workspace, "lint_function", lint_function)
    return made


# ------------------------------------------------------------------ imports
MODULES = ("sorted(m for m in sys.modules if m.startswith(('jaxlint.analysis.model', 'jaxlint.checkers.', "
           "'jaxlint.confirm', 'rich', 'jax.', 'nbformat')) or m == 'jax')")


def test_importing_the_command_line_imports_nothing_else():
    r = _python(f"import sys, jaxlint.cli; print({MODULES}); "
                "print(sorted(m for m in sys.modules if m.startswith('jaxlint')))")
    assert r.returncode == 0, r.stderr
    heavy, ours = (json.loads(line.replace("'", '"')) for line in r.stdout.splitlines())
    assert heavy == []
    assert set(ours) <= {"jaxlint", "jaxlint.cli", "jaxlint.about"}, ours


def test_version_imports_neither_the_model_nor_the_rules():
    r = _python(f"import sys; from jaxlint.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
                f"    pass\nprint({MODULES}, file=sys.stderr)")
    assert "jaxlint 0" in r.stdout and r.stderr.strip() == "[]", r.stderr


def test_warm_run_without_findings_imports_no_rule(tmp_path):
    """Nor the model, once ``jaxlint.analysis`` imports its modules when they are used (reading a
    file needs ``analysis/source.py`` alone; until then the package imports the model)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'clean'\n")
    (tmp_path / "ok.py").write_text("import jax\n\n\n@jax.jit\ndef f(x):\n    return x + 1\n")
    code = ("import sys; from jaxlint.cli import main; rc = main(['check', '.', '--format', 'concise']); "
            f"print({MODULES}, file=sys.stderr); sys.exit(rc)")
    first = _python(code, cwd=tmp_path)
    assert first.returncode == 0 and "jaxlint.checkers.base" in first.stderr   # cold: it linted
    warm = _python(code, cwd=tmp_path)
    assert warm.returncode == 0 and warm.stdout == first.stdout and "1 file checked" in warm.stdout
    imported = json.loads(warm.stderr.strip().splitlines()[-1].replace("'", '"'))
    import jaxlint.analysis
    lazy = "__getattr__" in vars(jaxlint.analysis)
    assert [m for m in imported if lazy or m != "jaxlint.analysis.model"] == [], imported


def test_rule_catalogue_is_the_registry():
    """Checking a configuration reads the rules' codes and symbols from their module names
    (without importing them): the same as the registry."""
    from jaxlint.checkers import REGISTRY
    from jaxlint.config import _catalogue_from_files
    files = _catalogue_from_files(str(REPO / "jaxlint" / "checkers"))
    assert files == {code: rule.symbol for code, rule in REGISTRY.items()}


# ------------------------------------------------------------------ warm runs
def test_warm_run_answers_as_the_cold_one(project, capsys, monkeypatch):
    os.chdir(project)
    made = _answered(monkeypatch)
    outputs = []
    for args in (["check", ".", "--no-cache"], ["check", "."], ["check", "."], ["check", ".", "--format", "json"],
                 ["check", ".", "--format", "json", "--no-cache"], ["check", ".", "--format", "concise"],
                 ["check", ".", "--format", "concise", "--no-cache"]):
        made.clear()
        outputs.append((_run(args, capsys)[:2], bool(made)))
    (cold, _), (fill, filled), (warm, answered_by_lint) = outputs[:3]
    assert cold[0] == 1 and cold == fill == warm
    assert filled and not answered_by_lint
    assert outputs[3][0] == outputs[4][0] and not outputs[3][1]
    assert outputs[5][0] == outputs[6][0] and not outputs[5][1]
    assert "Found" in cold[1] and "files checked" in cold[1]
    # with --jobs 2: workers lint, this process reads only the files with findings
    shutil.rmtree(project / ".jaxlint_cache")
    assert _run(["check", ".", "-j", "2"], capsys)[:2] == cold == _run(["check", ".", "-j", "2"], capsys)[:2]
    assert _run(["check", ".", "-j", "2", "--no-cache"], capsys)[:2] == cold


def test_warm_run_sees_every_change(project, capsys, monkeypatch):
    os.chdir(project)
    made = _answered(monkeypatch)
    utils = project / "src" / "trainer" / "utils.py"
    before = _run(["check", ".", "--format", "json"], capsys)
    # the same size and modification time, other content: the change time tells
    st = utils.stat()
    text = utils.read_text()
    utils.write_text(text.replace("print(", "prinx("))
    os.utime(utils, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert utils.stat().st_size == st.st_size
    made.clear()
    after = _run(["check", ".", "--format", "json"], capsys)
    assert made and after != before
    assert after == _run(["check", ".", "--format", "json", "--no-cache"], capsys)
    # a new module, then a removed one
    (project / "src" / "trainer" / "extra.py").write_text("import jax\n\n\n@jax.jit\ndef g(x):\n    print(x)\n")
    made.clear()
    added = _run(["check", ".", "--format", "json"], capsys)
    assert made and "extra.py" in added[1]
    (project / "src" / "trainer" / "extra.py").unlink()
    made.clear()
    assert _run(["check", ".", "--format", "json"], capsys) == after and made
    # another configuration
    made.clear()
    selected = _run(["check", ".", "--format", "json", "--select", "JAX101"], capsys)
    assert made and selected != after
    made.clear()
    assert _run(["check", ".", "--format", "json", "--select", "JAX101"], capsys) == selected and not made


def test_one_file_checked_warm(project, capsys, monkeypatch):
    """An editor checks one file at a time: answered from the record of the whole project."""
    os.chdir(project)
    made = _answered(monkeypatch)
    cold = _run(["check", "src/trainer/utils.py", "--no-cache"], capsys)
    _run(["check", "src/trainer/utils.py"], capsys)
    made.clear()
    assert _run(["check", "src/trainer/utils.py"], capsys) == cold and not made
    (project / "src" / "trainer" / "train.py").write_text("")     # another module changed: lint again
    made.clear()
    assert _run(["check", "src/trainer/utils.py"], capsys) != cold and made


def test_recently_modified_file_is_hashed_again(project, capsys, monkeypatch):
    """A file modified within two seconds of its ``stat`` is recorded as such: a later run
    hashes it (a second change in the same clock tick could keep its times)."""
    from jaxlint.config import Config
    from jaxlint.workspace import Workspace, warm_key
    import jaxlint.workspace as W
    monkeypatch.setattr(W, "RECENT_NS", 0)      # (the copied files' change times are recent)
    os.chdir(project)
    utils = project / "src" / "trainer" / "utils.py"
    soon = time.time() + 60
    os.utime(utils, (soon, soon))
    _run(["check", "."], capsys)
    ws = Workspace()
    k = warm_key(Config(root=str(project)))
    c = ws.cache_for(str(project))
    record = c.get("manifest", k)
    assert record["files"]["src/trainer/utils.py"][5] is True
    assert record["files"]["src/trainer/train.py"][5] is False
    paths = [str(p) for p in sorted(project.rglob("*.py"))]
    assert ws.warm_results(paths, k) is not None
    record["files"]["src/trainer/utils.py"][4] = "0" * 40        # what a same-tick change looks like
    c.put("manifest", k, record, "manifest")
    assert Workspace.warm_results(ws, paths, k) is None


def test_no_warm_answer_for_fixes_stdin_or_unused_noqa(project, capsys, monkeypatch):
    os.chdir(project)
    made = _answered(monkeypatch)
    _run(["check", "."], capsys)
    for args in (["check", ".", "--diff"], ["check", ".", "--report-unused-noqa"], ["check", ".", "--no-cache"]):
        made.clear()
        _run(args, capsys)
        assert made, args


def test_a_record_signed_with_another_key_is_not_used(project, capsys, monkeypatch):
    """The cache's signature covers the record too: one written by another installation (here: with
    every file's findings emptied) answers nothing."""
    os.chdir(project)
    expected = _run(["check", ".", "--format", "json", "--no-cache"], capsys)
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "someone else's key")
    monkeypatch.setattr(cache_mod, "_KEY", [])
    _run(["check", ".", "--format", "json"], capsys)
    c = cache_mod.Cache(str(project))
    for entry in c._table("findings").values():
        entry["v"] = []
    c._dirty = True
    c.flush()
    assert _run(["check", ".", "--format", "json"], capsys)[0] == 0     # that installation trusts it
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "this user's key")
    monkeypatch.setattr(cache_mod, "_KEY", [])
    assert _run(["check", ".", "--format", "json"], capsys) == expected


# ------------------------------------------------------------------ the tables
def test_tables_keep_the_entries_they_did_not_change(tmp_path, key):
    c = cache_mod.Cache(str(tmp_path))
    for i in range(5):
        c.put("findings", f"{i:040x}", [{"n": i, "text": "é\n\t\u2028"}], f"/p/{i}.py")
    c.flush()
    path = Path(c.dir) / "findings.json"
    first = path.read_bytes()
    head, _, body = first.partition(b"\n")
    assert len(json.loads(body)) == 5      # still one JSON object
    d = cache_mod.Cache(str(tmp_path))
    assert d.get("findings", f"{3:040x}") == [{"n": 3, "text": "é\n\t\u2028"}]
    d.put("findings", "f" * 40, [], "/p/1.py")      # replaces the entry of /p/1.py
    d.flush()
    second = path.read_bytes().partition(b"\n")[2]
    kept = [line for line in body.split(b"\n") if b"/p/1.py" not in line and line.startswith(b'"')]
    assert all(line.rstrip(b",") in second for line in kept)
    e = cache_mod.Cache(str(tmp_path))
    assert e.get("findings", f"{1:040x}") is None and e.get("findings", "f" * 40) == []
    assert e.tags("findings")["/p/1.py"] == "f" * 40
    assert sorted(json.loads(second)) == sorted([f"{i:040x}" for i in (0, 2, 3, 4)] + ["f" * 40])


def test_a_table_in_another_layout_is_read_whole(tmp_path, key):
    c = cache_mod.Cache(str(tmp_path))
    os.makedirs(c.dir)
    body = json.dumps({"k1": {"t": "/a.py", "v": [{"x": 1}]}}).encode()
    (Path(c.dir) / "findings.json").write_bytes(cache_mod.HEADER + cache_mod._mac(c.key, "findings", body)
                                                + b"\n" + body)
    assert c.get("findings", "k1") == [{"x": 1}] and c.tags("findings") == {"/a.py": "k1"}


def test_discovery_is_os_walk_sorted(tmp_path):
    """The folder walk (scandir, one ``stat`` per file) finds what ``os.walk`` with sorted names
    finds, in the same order, with ``.gitignore`` and excludes."""
    from jaxlint.discovery import DEFAULT_EXCLUDE, iter_python_files
    shutil.copytree(PROJECTS, tmp_path / "p")
    (tmp_path / "p" / ".gitignore").write_text("scripts/\n*_skip.py\n")
    (tmp_path / "p" / "rl" / "a_skip.py").write_text("")
    (tmp_path / "p" / "build").mkdir()
    (tmp_path / "p" / "build" / "x.py").write_text("")
    os.symlink(tmp_path / "p" / "rl", tmp_path / "p" / "link_to_rl")
    stats = {}
    found = [p for p, _ in iter_python_files([str(tmp_path / "p")], ["serving/tests"], str(tmp_path / "p"),
                                             stats=stats)]
    expected = []
    for dirpath, dirnames, filenames in os.walk(tmp_path / "p"):
        dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_EXCLUDE and d != "scripts"
                             and not (dirpath.endswith("serving") and d == "tests"))
        expected += [os.path.join(dirpath, f) for f in sorted(filenames)
                     if f.endswith((".py", ".ipynb")) and not f.endswith("_skip.py")]
    assert found == expected and set(stats) == set(found)
    assert all(stats[p].st_size == os.stat(p).st_size for p in found)


def test_after_an_edit_only_the_edited_file_is_linted(project, capsys, monkeypatch):
    """The files that did not change are answered from the cache under what the project knows
    now (not read when they have no findings); the result is the cold one."""
    import jaxlint.cli as C
    os.chdir(project)
    linted = []
    real = C._check_one
    monkeypatch.setattr(C, "_check_one", lambda args, cfg, rules, path, *rest: (linted.append(path),
                                                                                 real(args, cfg, rules, path, *rest)))
    _run(["check", "."], capsys)
    with open(project / "src" / "trainer" / "utils.py", "a") as f:
        f.write("\n# edited\n")
    linted.clear()
    edited = _run(["check", "."], capsys)
    assert linted == ["src/trainer/utils.py"]
    assert edited == _run(["check", ".", "--no-cache"], capsys)
    # a change another module's findings depend on (train.py seeds utils.py): those are linted again
    train = project / "src" / "trainer" / "train.py"
    train.write_text(train.read_text().replace("@jax.jit\ndef train_step", "def train_step"))
    linted.clear()
    changed = _run(["check", "."], capsys)
    assert "src/trainer/train.py" in linted and len(linted) > 1
    assert changed == _run(["check", ".", "--no-cache"], capsys) != edited


def test_plain_text_output_is_what_rich_prints(monkeypatch):
    """Text output into a pipe or a file is written without rich (imported only for a terminal):
    the same characters, whatever the messages and source lines hold."""
    import io
    import random
    from jaxlint import reporting
    from jaxlint.analysis.source import SourceFile
    from jaxlint.engine import FileResult
    from jaxlint.findings import Finding
    from jaxlint.fixes.edits import SAFE, UNSAFE, Edit, Fix
    rng = random.Random(23)
    alphabet = "abc xyz_()[]=.:,'\"\\{}#" + "\t\r\x07\x08\x0b\x0c\x1b\x00" + "éß漢字🙂\u0301\u200b\u2028\u00a0"

    def word(n):
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))

    for trial in range(60):
        results = []
        for k in range(rng.randint(0, 3)):
            lines = [word(30).replace("\n", " ") for _ in range(6)]
            source = SourceFile(f"f{k}.py", "\n".join(lines) + "\n")
            found = []
            for _ in range(rng.randint(0, 4)):
                line = rng.randint(1, 6)
                fix = rng.choice([None, Fix(word(12), (Edit(0, 1, "x"),), rng.choice([SAFE, UNSAFE]))])
                found.append(Finding(rng.choice(["JAX101", "JAX201", "JAX000", "JAX999"]), "sym", source.path, line,
                                     rng.randint(0, 8), line + rng.randint(0, 1), rng.randint(0, 12), word(40),
                                     rng.choice(["certain", "inferred"]), fix,
                                     confirmation=rng.choice([None, {"status": "confirmed", "evidence": word(9)}])))
            results.append(FileResult(source.path, found, source=source))
        kw = dict(quiet=rng.random() < 0.2, color=rng.choice([None, False]), checked=rng.randint(0, 4),
                  fix_summary=rng.choice([None, word(20)]), confirm_summary=rng.choice([None, word(20)]),
                  notes=[word(15) for _ in range(rng.randint(0, 2))])
        plain, rich = io.StringIO(), io.StringIO()
        reporting.render_text(results, plain, **kw)
        monkeypatch.setattr(reporting, "_plain", lambda out, color: False)
        reporting.render_text(results, rich, **kw)
        monkeypatch.undo()
        assert plain.getvalue() == rich.getvalue(), trial
