"""Watch mode (jaxlint/watch.py): check, then check again on each batch of relevant changes."""
from __future__ import annotations

import io
import os
import sys
import threading
import time
import types

import pytest

from jaxlint import watch as w
from jaxlint.config import ConfigError

BAD = "import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n"


def test_relevant_changes_are_python_notebooks_and_configuration(tmp_path):
    root = str(tmp_path)
    assert w.is_relevant(os.path.join(root, "src", "train.py"), root=root)
    assert w.is_relevant(os.path.join(root, "nb.ipynb"), root=root)
    assert w.is_relevant(os.path.join(root, "pyproject.toml"), root=root)
    assert w.is_relevant(os.path.join(root, "sub", ".gitignore"), root=root)
    for path in ("README.md", ".jaxlint_cache/findings.json", ".jaxlint_cache/x.py", ".git/index",
                 "pkg/__pycache__/m.cpython-311.pyc", "src/.train.py.k2j3.jaxlint", "src/.#train.py",
                 ".venv/lib/site.py", "build/lib/m.py", "third_party/m.py"):
        assert not w.is_relevant(os.path.join(root, path), exclude=["third_party/"], root=root), path


def test_checks_once_then_once_per_relevant_batch():
    runs = []
    out = io.StringIO()
    batches = [
        {(1, "/p/src/train.py"), (2, "/p/src/utils.py")},
        {(2, "/p/.jaxlint_cache/tables.json"), (2, "/p/notes.md")},      # nothing that matters
        {(2, "/p/pyproject.toml")},
    ]
    assert w.watch(["/p"], lambda: runs.append(1) or 1, out=out, changes=batches, clear=False) == 0
    assert len(runs) == 3
    text = out.getvalue()
    assert "2 files changed (" in text and "train.py" in text and "utils.py" in text
    assert "1 file changed (" in text and "pyproject.toml" in text
    assert text.count("watching for changes (Ctrl-C to stop)") == 3
    assert "\x1b[2J" not in text


def test_clears_the_screen_on_a_terminal_and_survives_a_broken_config():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    out = Tty()
    calls = iter([ConfigError("pyproject.toml: invalid TOML: oops"), None])

    def check():
        exc = next(calls)
        if exc is not None:
            raise exc
        return 0
    w.watch(["."], check, out=out, changes=[{(2, os.path.abspath("x.py"))}])
    text = out.getvalue()
    assert text.count("\x1b[2J\x1b[H") == 2
    assert "jaxlint: error: pyproject.toml: invalid TOML: oops" in text


def test_ctrl_c_ends_watching_quietly():
    def batches():
        yield {(2, os.path.abspath("a.py"))}
        raise KeyboardInterrupt
    runs = []
    assert w.watch(["."], lambda: runs.append(1), out=io.StringIO(), changes=batches(), clear=False) == 0
    assert len(runs) == 2


def test_missing_watchfiles_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "watchfiles", None)
    with pytest.raises(w.WatchUnavailable, match=r"--watch needs the watchfiles package: python -m pip install "
                                                  r"'jaxlint-static\[watch\]'"):
        w.watch(["."], lambda: 0, out=io.StringIO())


def test_options_watch_cannot_be_combined_with():
    ok = types.SimpleNamespace(paths=["src"], add_noqa=False, write_baseline=False, confirm=False,
                               confirmed_only=False, fix=True)
    w.validate(ok)
    for change, what in (({"paths": ["-"]}, "standard input"), ({"add_noqa": True}, "--add-noqa"),
                         ({"write_baseline": True}, "--write-baseline"), ({"confirm": True}, "--confirm")):
        bad = types.SimpleNamespace(**{**vars(ok), **change})
        with pytest.raises(ConfigError, match=what.replace("-", r"\-")):
            w.validate(bad)


def test_watch_roots_are_existing_paths(tmp_path):
    (tmp_path / "src").mkdir()
    roots = w.watch_roots([str(tmp_path / "src"), str(tmp_path / "later" / "new.py"), "-"])
    assert roots == [str(tmp_path / "src"), str(tmp_path)]


def test_a_real_edit_is_checked_again(tmp_path, monkeypatch):
    """With the real watcher: saving a module runs the check again, with the project cache."""
    pytest.importorskip("watchfiles")
    from jaxlint.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    stop = threading.Event()
    results = []
    out = io.StringIO()

    def check():
        buf = io.StringIO()
        old, sys.stdout = sys.stdout, buf
        try:
            results.append((main(["check", "--no-progress", "--format", "concise", "."]), buf.getvalue()))
        finally:
            sys.stdout = old
        return results[-1][0]

    thread = threading.Thread(target=w.watch, args=(["."], check),
                              kwargs={"out": out, "root": str(tmp_path), "stop_event": stop, "clear": False},
                              daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not results and time.monotonic() < deadline:
            time.sleep(0.05)
        assert results and results[0][0] == 0
        # the watcher starts once the first run is over: save until a run follows
        n = 0
        while len(results) < 2 and time.monotonic() < deadline:
            (tmp_path / "train.py").write_text(BAD + "#" * n + "\n")
            n += 1
            for _ in range(20):
                if len(results) >= 2:
                    break
                time.sleep(0.05)
        assert len(results) >= 2, out.getvalue()
        assert results[-1][0] == 1 and "train.py:6:5: JAX101" in results[-1][1]
        assert "1 file changed (train.py); checking again" in out.getvalue()
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
