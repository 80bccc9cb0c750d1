"""What a hostile or unlucky repository can contain never stops jaxlint, hangs it, or hides
a finding (issue 20; the guarantees are in docs/guarantees.md).

Each test is the repro of one item, run through the command line (in-process where it
can be, a subprocess for signals): a deep module, a crash inside jaxlint, corrupted and
committed caches, non-regular files, ``--fix`` races, runaway confirmation workers.  The
tests run as root here and in CI: permission cases are made with monkeypatched calls
(which work as root), and the few real-permission variants skip as root with a reason.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jaxlint.cli import main

BAD = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp


    @jax.jit
    def step(x):
        y = jnp.sin(x)
        print("y", y)
        return y
""")
CLEAN = "import jax\n\n\ndef g(x):\n    return x\n"
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def deep_module(kind: str = "reassign") -> str:
    """Valid Python nested past the recursion limit of the analysis (the issue's repros)."""
    head = "import jax\n\n\n@jax.jit\ndef f(x):\n"
    if kind == "reassign":
        return head + "    y = x\n" + "    y = y + 1\n" * 250 + "    print(y)\n    return y\n"
    if kind == "sum":
        return head + "    y = " + " + ".join(["x"] * 400) + "\n    print(y)\n    return y\n"
    if kind == "transpose":
        return head + "    y = x" + ".T" * 400 + "\n    print(y)\n    return y\n"
    if kind == "index":
        return head + "    y = x" + "[0]" * 500 + "\n    print(y)\n    return y\n"
    if kind == "elif":
        body = "    if x == 0:\n        y = 0\n" + "".join(f"    elif x == {i}:\n        y = {i}\n" for i in range(1, 1000))
        return head + body + "    print(y)\n    return y\n"
    raise ValueError(kind)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A project (a .git marker) holding bad.py (a print under jit) and clean.py, as cwd."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def one_line_errors(err: str):
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.strip()]


# ------------------------------------------------------------------ 1. one deep file
@pytest.mark.parametrize("kind", ["reassign", "sum", "transpose", "index", "elif"])
def test_deep_module_is_one_error_and_the_rest_is_checked(repo, capsys, kind):
    (repo / "deep.py").write_text(deep_module(kind))
    code, out, err = run(["check", ".", "--no-cache", "--jobs", "1", "-q"], capsys)
    assert code == 2
    lines = one_line_errors(err)
    assert len(lines) == 1 and lines[0].startswith("deep.py: error: nested too deeply"), err
    assert "bad.py:8:5: JAX101" in out


def test_deep_module_does_not_stop_a_different_file(repo, capsys):
    (repo / "deep.py").write_text(deep_module())
    code, out, err = run(["check", "clean.py", "--no-cache"], capsys)
    assert (code, err) == (0, "") and "1 file checked" in out
    code, out, err = run(["check", "bad.py", "--no-cache", "-q"], capsys)
    assert code == 1 and err == "" and "JAX101" in out


def test_deep_module_with_jobs(repo, capsys):
    (repo / "deep.py").write_text(deep_module())
    for i in range(6):      # enough modules for the forked workers to be used
        (repo / f"m{i}.py").write_text(CLEAN)
    code, out, err = run(["check", ".", "--no-cache", "--jobs", "2", "-q"], capsys)
    assert code == 2 and "bad.py:8:5: JAX101" in out
    lines = one_line_errors(err)
    assert len(lines) == 1 and lines[0].startswith("deep.py: error: nested too deeply")


def test_deep_module_through_flake8_and_pylint(repo):
    (repo / "deep.py").write_text(deep_module())
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "JAX", "-j", "1", "deep.py", "bad.py"],
                          capture_output=True, text=True, cwd=repo, timeout=300)
    assert "Traceback" not in proc.stderr and proc.returncode == 1
    assert "deep.py:1:1: JAX900 jaxlint could not check this file: nested too deeply" in proc.stdout
    assert "bad.py:8:5: JAX101" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "pylint", "--load-plugins=jaxlint.pylint_plugin", "--disable=all",
                           "--enable=print-under-trace", "deep.py", "bad.py"],
                          capture_output=True, text=True, cwd=repo, timeout=300)
    assert "Traceback" not in proc.stderr and proc.returncode != 0
    assert "jaxlint could not check it: nested too deeply" in proc.stdout
    assert "print-under-trace" in proc.stdout


# ------------------------------------------------------------------ 2. internal errors
def test_a_crashing_rule_exits_3_naming_file_and_rule(repo, capsys, monkeypatch):
    from jaxlint.checkers import REGISTRY

    def boom(self, ctx, m):
        raise KeyError("boom")
        yield  # pragma: no cover

    monkeypatch.setattr(type(REGISTRY["JAX201"]), "findings", boom)
    code, out, err = run(["check", "bad.py", "clean.py", "--no-cache", "-q"], capsys)
    assert code == 3
    lines = one_line_errors(err)
    assert len(lines) == 2 and all("JAX201: internal error KeyError" in ln for ln in lines)
    assert {ln.split(":")[0] for ln in lines} == {"bad.py", "clean.py"}
    assert "bad.py:8:5: JAX101" in out        # the other rules' findings are still shown


def test_a_crash_in_the_project_analysis_exits_3_for_that_module(repo, capsys, monkeypatch):
    from jaxlint.analysis import project as P
    real = P.Project._outgoing_of

    def outgoing(self, m):
        if m.path.endswith("bad.py"):
            raise TypeError("unexpected")
        return real(self, m)

    monkeypatch.setattr(P.Project, "_outgoing_of", outgoing)
    (repo / "other.py").write_text(BAD)
    code, out, err = run(["check", ".", "--no-cache", "--jobs", "1", "-q"], capsys)
    assert code == 3
    lines = one_line_errors(err)
    assert len(lines) == 1 and lines[0].startswith("bad.py: error: internal error in the project analysis")
    assert "TypeError" in lines[0] and "other.py:8:5: JAX101" in out


def test_an_uncaught_crash_is_one_line_and_exit_3(repo, capsys, monkeypatch):
    import jaxlint.cli as cli

    def broken(*a, **k):
        raise AttributeError("no such thing")

    monkeypatch.setattr(cli, "_report", broken)
    code, out, err = run(["check", "bad.py", "--no-cache"], capsys)
    assert code == 3
    lines = one_line_errors(err)
    assert len(lines) == 1 and "internal error" in lines[0] and "AttributeError" in lines[0]
