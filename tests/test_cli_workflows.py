"""The command line as JAX teams use it: bare `jaxlint`, stdin fix-on-save, links, legacy
adoption (--add-noqa, baselines, unused noqa) and CI conveniences."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxlint.cli import main

from test_cli import BAD, CLEAN, run  # the CLI tests' sources and runner

FIXED_PRINT = "jax.debug.print('y {y}', y=y)"




class _Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)


class _Stdout(io.TextIOWrapper):
    pass


def _stdin_run(monkeypatch, data: bytes, args):
    """Run main() with bytes on stdin; return (code, stdout bytes, stderr text)."""
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    out_bytes = io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = main(args)
    out.flush()
    return code, out_bytes.getvalue(), err.getvalue()


# ------------------------------------------------------------------ bare jaxlint
def test_bare_jaxlint_means_check(project, capsys):
    assert run(["bad.py"], capsys)[0] == 1
    assert run(["clean.py"], capsys)[0] == 0
    code, out, _ = run(["--color", "never"], capsys)           # no arguments: check .
    assert code == 1 and "bad.py:8:5: JAX101" in out
    code, _, _ = run(["--fix"], capsys)
    assert FIXED_PRINT in (project / "bad.py").read_text()
    assert run(["rules", "--format", "json"], capsys)[0] == 0   # subcommands still work


def test_bare_jaxlint_from_the_shell(project):
    proc = subprocess.run([sys.executable, "-m", "jaxlint", ".", "--select", "JAX101", "-q"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout.startswith("bad.py:8:5: JAX101"), proc.stdout + proc.stderr


def test_paths_have_no_dot_slash_prefix(project, capsys):
    code, out, _ = run([".", "--diff"], capsys)
    assert out.startswith("--- a/bad.py\n+++ b/bad.py\n")
    _, out, _ = run(["check", ".", "--format", "json"], capsys)
    assert {d["path"] for d in json.loads(out)} == {"bad.py"}


# ------------------------------------------------------------------ stdin for editors
def test_stdin_fix_writes_only_the_fixed_source_to_stdout(project, monkeypatch):
    code, out, err = _stdin_run(monkeypatch, BAD.encode(), ["check", "-", "--fix", "--stdin-filename", "m.py"])
    assert out.decode() == BAD.replace('print("y", y)', FIXED_PRINT)
    assert "JAX201" in err and "Fixed 1 finding" in err
    assert code == 1


def test_stdin_fix_echoes_clean_and_unparsable_input_unchanged(project, monkeypatch):
    code, out, _ = _stdin_run(monkeypatch, CLEAN.encode(), ["-", "--fix"])
    assert out == CLEAN.encode() and code == 0
    broken = b"def f(:\n    pass\r\n"
    code, out, err = _stdin_run(monkeypatch, broken, ["-", "--fix", "--stdin-filename", "x.py"])
    assert out == broken and code == 2 and "x.py: error: syntax error" in err


# ------------------------------------------------------------------ honest summaries
def test_summary_says_how_many_files_were_checked(project, capsys):
    code, out, _ = run(["clean.py", "--color", "never"], capsys)
    assert code == 0 and "All checks passed (1 file checked)." in out
    (project / "empty").mkdir()
    code, out, _ = run(["empty", "--color", "never"], capsys)
    assert "No files were checked." in out and "passed" not in out
    code, out, err = run(["empty", "--format", "json"], capsys)
    assert json.loads(out) == [] and "no files were checked" in err
    code, out, err = run(["missing.py", "--color", "never"], capsys)
    assert code == 2 and "passed" not in out and "missing.py: error" in err
    code, out, _ = run(["bad.py", "clean.py", "--color", "never"], capsys)
    assert "Found 2 findings in 1 file (2 files checked)." in out
    assert "Of these, 1 fixable with --fix." in out


def test_long_messages_are_not_wrapped(project):
    env = dict(os.environ, COLUMNS="40")
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "bad.py", "--color", "always"],
                          capture_output=True, text=True, env=env)
    head = [line for line in proc.stdout.splitlines() if "JAX101" in line and "bad.py" in line]
    assert head and "not the value" in head[0], proc.stdout


# ------------------------------------------------------------------ --fix on links
@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_fix_writes_through_symlinks(project, capsys):
    shared = project / "vendor"
    shared.mkdir()
    (shared / "real.py").write_text(BAD)
    os.symlink(shared / "real.py", project / "linked.py")
    run(["linked.py", "--fix"], capsys)
    assert os.path.islink(project / "linked.py")
    assert FIXED_PRINT in (shared / "real.py").read_text()


def test_fix_keeps_hard_links_shared(project, capsys):
    os.link(project / "bad.py", project / "alias.py")
    run(["bad.py", "--fix"], capsys)
    assert os.stat(project / "bad.py").st_ino == os.stat(project / "alias.py").st_ino
    assert FIXED_PRINT in (project / "alias.py").read_text()


# ------------------------------------------------------------------ legacy adoption
def test_add_noqa_suppresses_every_finding_and_keeps_comments(project, capsys):
    src = BAD.replace('print("y", y)', 'print("y", y)  # debug output').replace(
        "if y.sum() > 0:", "if y.sum() > 0:  # noqa: E501")
    src += textwrap.dedent('''\


        @jax.jit
        def g(x):
            print("""multi
            line""", x)
            return x
    ''')
    (project / "bad.py").write_text(src)
    code, out, err = run(["bad.py", "--add-noqa"], capsys)
    text = (project / "bad.py").read_text()
    assert code == 0 and "Added 2 noqa directives to 1 file" in out
    assert 'print("y", y)  # debug output  # noqa: JAX101' in text
    assert "if y.sum() > 0:  # noqa: E501,JAX201" in text
    assert 'print("""multi\n' in text and "bad.py:16: cannot add" in err     # the line continues a string
    code, out, _ = run(["bad.py", "-q"], capsys)
    assert out.strip().splitlines() == [l for l in out.strip().splitlines() if ":16:" in l]
    assert run(["bad.py", "--add-noqa"], capsys)[1].startswith("Added 0 noqa directives")


def test_baseline_reports_only_new_findings(project, capsys):
    code, out, _ = run(["bad.py", "--write-baseline", "--baseline", "base.json"], capsys)
    assert code == 0 and "Wrote 2 findings to base.json" in out
    doc = json.loads((project / "base.json").read_text())
    assert {e["code"] for e in doc["findings"]} == {"JAX101", "JAX201"}
    code, out, _ = run(["bad.py", "--baseline", "base.json", "--color", "never"], capsys)
    assert code == 0 and "2 findings in the baseline not shown" in out and "No findings to show" in out
    # code moved down still matches; a new finding does not
    (project / "bad.py").write_text("# a new comment\n" + BAD.replace("    return y\n", '    print("z", y)\n    return y\n'))
    code, out, _ = run(["bad.py", "--baseline", "base.json", "-q"], capsys)
    assert code == 1 and out.strip().splitlines() == ["bad.py:12:5: JAX101 " + out.split("JAX101 ", 1)[1].strip()]
    code, _, err = run(["bad.py", "--baseline", "nope.json"], capsys)
    assert code == 2 and "nope.json: no such baseline file" in err


def test_write_baseline_default_name(project, capsys):
    assert run(["bad.py", "--write-baseline"], capsys)[0] == 0
    assert (project / "jaxlint-baseline.json").exists()


def test_report_unused_noqa(project, capsys):
    src = CLEAN.replace("return jnp.where(x > 0, x, -x)",
                        "return jnp.where(x > 0, x, -x)  # noqa: JAX101, E501")
    src += "\n\n@jax.jit\ndef h(x):\n    print(x)  # noqa: JAX101\n    return x  # noqa\n"
    (project / "m.py").write_text(src)
    code, out, _ = run(["m.py", "--report-unused-noqa", "-q"], capsys)
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) == 1, out
    assert lines[0].startswith("m.py:7:") and "JAX000 unused `noqa` directive: no JAX101 finding" in lines[0]
    assert run(["m.py", "-q"], capsys)[0] == 0            # only with the option


# ------------------------------------------------------------------ CI conveniences
def test_output_file_and_statistics(project, capsys):
    code, out, _ = run(["bad.py", "--format", "json", "--output-file", "reports/out.json"], capsys)
    assert code == 1 and out == ""
    assert {d["code"] for d in json.loads((project / "reports" / "out.json").read_text())} == {"JAX101", "JAX201"}
    code, out, _ = run(["bad.py", "--statistics"], capsys)
    assert code == 1
    assert out.splitlines() == ["    1  JAX101  print-under-trace [*]", "    1  JAX201  python-control-flow-on-traced-value"]
    _, out, _ = run(["bad.py", "--statistics", "--format", "json"], capsys)
    assert json.loads(out)[0] == {"code": "JAX101", "symbol": "print-under-trace", "count": 1, "fixable": 1}


def test_exit_non_zero_on_fix(project, capsys):
    (project / "p.py").write_text("import jax\n\n\n@jax.jit\ndef f(x):\n    print(x)\n    return x\n")
    assert run(["p.py", "--fix"], capsys)[0] == 0
    (project / "p.py").write_text("import jax\n\n\n@jax.jit\ndef f(x):\n    print(x)\n    return x\n")
    assert run(["p.py", "--fix", "--exit-non-zero-on-fix"], capsys)[0] == 1
    assert run(["p.py", "--fix", "--exit-non-zero-on-fix"], capsys)[0] == 0     # nothing left to fix


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t"))


def test_changed_since(project, capsys):
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "base")
    (project / "new.py").write_text(BAD)                         # untracked
    (project / "clean.py").write_text(CLEAN + "\n\n@jax.jit\ndef g(x):\n    print(x)\n    return x\n")
    code, out, _ = run([".", "--changed-since", "HEAD", "--format", "json"], capsys)
    assert code == 1 and {d["path"] for d in json.loads(out)} == {"new.py", "clean.py"}    # not bad.py
    code, _, err = run([".", "--changed-since", "no-such-ref"], capsys)
    assert code == 2 and "--changed-since no-such-ref" in err


def test_force_exclude(project, capsys):
    (project / "pyproject.toml").write_text('[tool.jaxlint]\nexclude = ["gen/"]\n')
    (project / "gen").mkdir()
    (project / "gen" / "out.py").write_text(BAD)
    assert run(["gen/out.py"], capsys)[0] == 1                   # named explicitly: checked
    code, out, _ = run(["gen/out.py", "--force-exclude", "--color", "never"], capsys)
    assert code == 0 and "No files were checked." in out


# ------------------------------------------------------------------ notebooks through the CLI
def _notebook(path: Path) -> bytes:
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
    nb = new_notebook(cells=[new_markdown_cell("# training"), new_code_cell("import jax\n%matplotlib inline"),
                             new_code_cell("@jax.jit\ndef f(x):\n    print(x)\n    return x")],
                      metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    nbformat.write(nb, str(path))
    return path.read_bytes()


def test_stdin_notebook_fix_prints_the_whole_notebook(project, monkeypatch):
    import nbformat
    raw = _notebook(project / "nb.ipynb")
    code, out, err = _stdin_run(monkeypatch, raw, ["-", "--fix", "--stdin-filename", "nb.ipynb"])
    fixed = nbformat.reads(out.decode(), 4)
    assert code == 0 and "jax.debug.print" in fixed.cells[2].source and "Fixed 1 finding" in err
    assert fixed.cells[1].source == "import jax\n%matplotlib inline"


def test_add_noqa_and_baseline_in_a_notebook(project, capsys):
    import nbformat
    _notebook(project / "nb.ipynb")
    code, out, _ = run(["nb.ipynb", "-q"], capsys)
    assert code == 1 and out.startswith("nb.ipynb:cell 3:line 3:5: JAX101")
    assert run(["nb.ipynb", "--write-baseline"], capsys)[0] == 0
    assert run(["nb.ipynb", "--baseline", "jaxlint-baseline.json"], capsys)[0] == 0
    code, out, _ = run(["nb.ipynb", "--add-noqa"], capsys)
    assert code == 0 and "Added 1 noqa directive to 1 file" in out
    nb = nbformat.read(str(project / "nb.ipynb"), 4)
    assert nb.cells[2].source == "@jax.jit\ndef f(x):\n    print(x)  # noqa: JAX101\n    return x"
    assert run(["nb.ipynb"], capsys)[0] == 0


def test_checking_this_repository_reports_no_test_fixture(monkeypatch, capsys):
    """`jaxlint` at the repository root: its own fixtures are excluded by its pyproject.toml."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    code, out, _ = run(["--format", "json", "--exit-zero", "--no-progress"], capsys)
    paths = {d["path"] for d in json.loads(out)}
    assert code == 0 and paths, "examples/ should still be reported"
    assert not [p for p in paths if p.startswith("tests/")], sorted(paths)


def test_fix_removes_unused_noqa_codes(project, capsys):
    src = textwrap.dedent("""\
        import jax


        @jax.jit
        def h(x):
            print(x)  # noqa: JAX101,JAX201
            y = x  # noqa: JAX201
            z = y  # keep this  # noqa: JAX201
            return z  # noqa: JAX101, E501
    """)
    (project / "m.py").write_text(src)
    code, out, _ = run(["m.py", "--report-unused-noqa", "--fix"], capsys)
    assert code == 0, out
    assert (project / "m.py").read_text() == textwrap.dedent("""\
        import jax


        @jax.jit
        def h(x):
            print(x)  # noqa: JAX101
            y = x
            z = y  # keep this
            return z  # noqa: E501
    """)


def test_baseline_named_in_pyproject(project, capsys):
    (project / "pyproject.toml").write_text('[tool.jaxlint]\nbaseline = "ci/jaxlint-baseline.json"\n')
    (project / "ci").mkdir()
    assert run(["bad.py", "--write-baseline"], capsys)[0] == 0
    assert (project / "ci" / "jaxlint-baseline.json").exists()
    assert run(["bad.py"], capsys)[0] == 0
    assert run(["bad.py", "--no-baseline"], capsys)[0] == 1
    (project / "pyproject.toml").write_text('[tool.jaxlint]\nbaseline = 3\n')
    code, _, err = run(["bad.py"], capsys)
    assert code == 2 and "baseline must be a file name" in err


def test_rules_listing_piped_is_one_unwrapped_line_per_rule(capsys):
    from jaxlint.checkers import all_rules
    code, out, _ = run(["rules"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + len(all_rules())
    for line, rule in zip(lines[1:], all_rules()):
        assert line.startswith(rule.code) and line.endswith(rule.summary)
