"""The command line options of issue 21 as a user types them: --version, confirm --help,
--show-settings, --show-files, --watch, and the baseline summary's wording."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

import jaxlint

BAD = "import jax\n\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n"
JAXLINT = [sys.executable, "-m", "jaxlint"]



# A suite started in the background of a non-interactive shell (``nohup ... &``) ignores SIGINT,
# and every child inherits the ignored signal: the interrupt these tests send never arrives.
# (Resetting it in the child needs a ``preexec_fn``, i.e. a fork of a process JAX runs threads in.)
_SIGINT_IGNORED = pytest.mark.skipif(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
                                     reason="SIGINT is ignored in this process (started in the background)")

def run(*args, cwd=None):
    return subprocess.run(JAXLINT + list(args), capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, NO_COLOR="1"))


def test_version_names_the_distribution():
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"jaxlint {jaxlint.__version__} (distribution jaxlint-static ")


def test_confirm_help_lists_every_way_in():
    proc = run("confirm", "--help")
    assert proc.returncode == 0
    usage = proc.stdout.split("options:")[0]
    assert "-- COMMAND" in usage and "--pytest" in usage
    assert "jaxlint confirm src/ -- python train.py --steps 3" in proc.stdout


def test_show_settings_and_show_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\nexclude = ["third_party/"]\n'
                                             'per-file-ignores = { "tests/*" = ["JAX101"] }\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(BAD)
    (tmp_path / "third_party").mkdir()
    (tmp_path / "third_party" / "v.py").write_text(BAD)
    proc = run("--show-settings", "--ignore", "JAX4", "tests/test_a.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Settings for tests/test_a.py\n")
    assert '  ignore                   ["JAX4"]  [command line (--ignore)]' in proc.stdout
    assert "JAX101  print-under-trace" in proc.stdout and "per-file-ignores 'tests/*'" in proc.stdout
    proc = run("--show-settings", "--format", "json", "tests/test_a.py", cwd=tmp_path)
    assert json.loads(proc.stdout)["per-file-ignores"]["matching-this-file"] == ["JAX101"]

    proc = run("--show-files", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tests/test_a.py\n\nSkipped:\n")
    assert "third_party/  exclude `third_party/` in pyproject.toml" in proc.stdout
    assert not (tmp_path / ".jaxlint_cache").exists()       # nothing was checked


def test_watch_without_watchfiles_is_one_line(tmp_path):
    code = ("import sys; sys.modules['watchfiles'] = None\n"
            "from jaxlint.cli import main; sys.exit(main(['--watch', '.']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("jaxlint: error: --watch needs the watchfiles package: "
                           "python -m pip install 'jaxlint-static[watch]'\n")
    proc = run("--watch", "-", cwd=tmp_path)
    assert proc.returncode == 2 and "--watch cannot read standard input" in proc.stderr


@_SIGINT_IGNORED
def test_watch_checks_again_on_save_and_stops_on_ctrl_c(tmp_path):
    pytest.importorskip("watchfiles")
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    proc = subprocess.Popen(JAXLINT + ["--watch", "--format", "concise", "."], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, NO_COLOR="1"))
    lines: "queue.Queue[str]" = queue.Queue()
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [lines.put(line) for line in s], daemon=True).start()
    seen = []

    def wait_for(text, timeout=30, poke=None):
        # (stdout and stderr lines arrive in either order: a line already read counts)
        if any(text in line for line in seen):
            return
        deadline = time.monotonic() + timeout
        n = 0
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if poke is not None:
                    poke(n)
                    n += 1
                continue
            seen.append(line)
            if text in line:
                return
        raise AssertionError(f"{text!r} not seen in {seen}")

    try:
        wait_for("All checks passed (1 file checked).")
        wait_for("watching for changes")
        wait_for("train.py:6:5: JAX101", poke=lambda n: (tmp_path / "train.py").write_text(BAD + "#" * n + "\n"))
        assert any("file changed (train.py); checking again" in line for line in seen)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_baseline_summary_counts_files_in_the_singular(tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    proc = run("--write-baseline", "--baseline", "b.json", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Wrote 1 finding to b.json (1 file checked).\n"
