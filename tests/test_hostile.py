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
import signal
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



# A suite started in the background of a non-interactive shell (``nohup ... &``) ignores SIGINT,
# and every child inherits the ignored signal: the interrupt these tests send never arrives.
# (Resetting it in the child needs a ``preexec_fn``, i.e. a fork of a process JAX runs threads in.)
_SIGINT_IGNORED = pytest.mark.skipif(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
                                     reason="SIGINT is ignored in this process (started in the background)")

def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def deep_module(kind: str = "reassign") -> str:
    """Valid Python nested past the recursion limit of the analysis (the issue's repros)."""
    head = "import jax\n\n\n@jax.jit\ndef f(x):\n"
    if kind == "reassign":
        return head + "    y = x\n" + "    y = y + 1\n" * 250 + "    print(y)\n    return y\n"
    # (400 terms or attributes no longer exceed it: the model's walks of a function are iterative)
    if kind == "sum":
        return head + "    y = " + " + ".join(["x"] * 800) + "\n    print(y)\n    return y\n"
    if kind == "transpose":
        return head + "    y = x" + ".T" * 800 + "\n    print(y)\n    return y\n"
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


# ------------------------------------------------------------------ helpers
def wait_for(predicate, timeout: float = 120.0, what: str = "a condition"):
    """Poll ``predicate`` until it returns a true value (no fixed sleeps), or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a container's PID 1 may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def cli(args, cwd, timeout: float = 300, env=None, **kw):
    """jaxlint in a subprocess (for hangs and signals: a regression fails, never hangs the suite)."""
    return subprocess.run([sys.executable, "-m", "jaxlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


needs_jax = pytest.mark.skipif(__import__("importlib").util.find_spec("jax") is None,
                               reason="runtime confirmation needs JAX")
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc to see processes")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def flagged(body: str = "") -> str:
    """A module with a JAX101 finding whose top-level code runs ``body`` when imported."""
    return "import jax\n" + textwrap.dedent(body) + "\n\n@jax.jit\ndef f(x: jax.Array):\n    print(x)\n    return x\n"


# ------------------------------------------------------------------ Ctrl-C with --jobs
@needs_proc
@_SIGINT_IGNORED
def test_ctrl_c_during_jobs_is_one_line(repo):
    """Ctrl-C reaches the whole foreground group: the forked --jobs workers leave it to the parent."""
    import signal
    unit = "@jax.jit\ndef f{i}(x):\n    y = jnp.sin(x) + {i}\n    if y.sum() > 0:\n        print(y)\n    return y\n\n"
    for m in range(12):
        (repo / f"gen{m}.py").write_text("import jax\nimport jax.numpy as jnp\n\n" +
                                         "".join(unit.format(i=i) for i in range(400)))
    proc = subprocess.Popen([sys.executable, "-m", "jaxlint", "check", ".", "--no-cache", "--jobs", "2", "-q"],
                            cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        def workers():
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
                    return fh.read().split()
            except OSError:
                return None
        wait_for(lambda: workers() or proc.poll() is not None, 120, "the --jobs workers to start")
        if proc.poll() is not None:
            pytest.skip("the run ended before its workers could be interrupted")
        os.killpg(proc.pid, signal.SIGINT)      # what a terminal's Ctrl-C does
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert one_line_errors(err) == ["jaxlint: interrupted"]


# ------------------------------------------------------------------ 3. --confirm workers
SPAWNS = """\
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    pid = os.fork()
    if pid == 0:
        time.sleep(300)
        os._exit(0)
    with open(os.environ["PIDS_FILE"], "a") as fh:
        fh.write(f"{os.getpid()} {child.pid} {pid}\\n")
"""


@needs_jax
@needs_proc
def test_confirm_children_of_a_worker_do_not_outlive_the_run(repo, capsys, monkeypatch):
    pids_file = repo / "pids.txt"
    monkeypatch.setenv("PIDS_FILE", str(pids_file))
    (repo / "spawner.py").write_text(flagged(SPAWNS))
    code, out, err = run(["check", "spawner.py", "--confirm", "--no-cache", "--confirm-timeout", "120"], capsys)
    assert code == 1 and "Traceback" not in err
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3
    wait_for(lambda: not any(alive(p) for p in pids), 30, "the worker's children to be gone")


@needs_jax
@needs_proc
@pytest.mark.parametrize("sig,code", [pytest.param("SIGINT", 130, marks=_SIGINT_IGNORED), ("SIGTERM", 143)])
def test_confirm_interrupted_leaves_no_worker_and_no_folder(repo, sig, code):
    import signal
    tmp = repo / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PIDS_FILE=str(repo / "pids.txt"), TMPDIR=str(tmp))
    (repo / "hang.py").write_text(flagged(SPAWNS + "    while True:\n        time.sleep(0.1)\n"))
    proc = subprocess.Popen([sys.executable, "-m", "jaxlint", "check", "hang.py", "--confirm", "--no-cache",
                             "--confirm-timeout", "300"], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = wait_for(lambda: (repo / "pids.txt").exists() and (repo / "pids.txt").read_text().strip(), 120,
                        "the worker to import the module")
        pids = [int(p) for p in line.split()]
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    wait_for(lambda: not any(alive(p) for p in pids), 30, "the worker and its children to be gone")
    assert not list(tmp.glob("jaxlint-confirm-*")), "the temporary folder was left behind"


@needs_jax
@needs_proc
def test_confirm_workers_die_with_a_killed_jaxlint(repo):
    """SIGKILL cannot be handled: the worker notices its new parent and kills its own group."""
    import signal
    env = dict(os.environ, PIDS_FILE=str(repo / "pids.txt"))
    (repo / "hang.py").write_text(flagged(SPAWNS + "    while True:\n        time.sleep(0.1)\n"))
    proc = subprocess.Popen([sys.executable, "-m", "jaxlint", "check", "hang.py", "--confirm", "--no-cache",
                             "--confirm-timeout", "300"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        line = wait_for(lambda: (repo / "pids.txt").exists() and (repo / "pids.txt").read_text().strip(), 120,
                        "the worker to import the module")
        pids = [int(p) for p in line.split()]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not any(alive(p) for p in pids), 30, "the orphaned worker and its children to be gone")


# ------------------------------------------------------------------ 4. harness timeout, nan
@needs_jax
def test_harness_command_that_hangs_is_stopped_at_its_time_limit(repo):
    (repo / "bad_mod.py").write_text(flagged())
    (repo / "test_hang.py").write_text("import time\n\n\ndef test_hangs():\n    time.sleep(600)\n")
    (repo / "pyproject.toml").write_text("[tool.jaxlint.confirm]\ncommand-timeout = 3\ntimeout = 120\n")
    t = time.monotonic()
    r = cli(["confirm", "bad_mod.py", "--no-cache", "--pytest", "test_hang.py"], repo, timeout=400)
    assert time.monotonic() - t < 300
    assert "ran past 3 s" in r.stderr and "Traceback" not in r.stderr
    assert r.returncode == 1 and "JAX101" in r.stdout


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_timeouts_must_be_finite(repo, capsys, value):
    code, out, err = run(["check", "bad.py", "--confirm-timeout", value], capsys)
    assert code == 2 and "finite" in err and len(one_line_errors(err)) == 1


@pytest.mark.parametrize("key,value", [("timeout", "nan"), ("timeout", "inf"), ("command-timeout", "nan"),
                                       ("memory-limit", "0")])
def test_confirm_config_limits_must_be_real(repo, key, value):
    from jaxlint.confirm import SpecError, load_confirm_config
    (repo / "pyproject.toml").write_text(f"[tool.jaxlint.confirm]\n{key} = {value}\n")
    with pytest.raises(SpecError, match=key):
        load_confirm_config(str(repo / "pyproject.toml"))


# ------------------------------------------------------------------ 5. output and memory caps
@needs_jax
def test_chatty_worker_writes_nothing_to_disk(repo, capsys, monkeypatch):
    from jaxlint.confirm import runner
    real, sizes = runner.run_job, []

    def spy(job, timeout, device, tmpdir, index, memory_mb=None):
        got = real(job, timeout, device, tmpdir, index, memory_mb)
        sizes.append(sum(p.stat().st_size for p in Path(tmpdir).iterdir()))
        return got

    monkeypatch.setattr(runner, "run_job", spy)
    (repo / "chatty.py").write_text(flagged("""\
        import sys
        chunk = "x" * (1 << 20)
        for _ in range(300):
            sys.stderr.write(chunk)
    """))
    code, out, err = run(["check", "chatty.py", "--confirm", "--no-cache", "--confirm-timeout", "120"], capsys)
    assert code == 1 and "Traceback" not in err
    assert sizes and max(sizes) < (1 << 20), sizes     # 300 MiB written, nothing of it on disk


@needs_jax
@needs_proc
def test_worker_past_its_memory_limit_is_stopped(repo, capsys):
    (repo / "pyproject.toml").write_text("[tool.jaxlint.confirm]\nmemory-limit = 700\ntimeout = 120\n")
    (repo / "hog.py").write_text(flagged("""\
        import time
        hog = b"x" * (1200 << 20)
        time.sleep(120)
    """))
    t = time.monotonic()
    code, out, err = run(["check", "hog.py", "--confirm", "--no-cache", "--format", "json"], capsys)
    assert time.monotonic() - t < 100
    (finding,) = json.loads(out)
    assert finding["confirmation"]["status"] == "unreached"
    assert "MiB of memory (the limit is 700 MiB" in finding["confirmation"]["reason"]


# ------------------------------------------------------------------ 6. the cache
def _findings(repo, capsys, *extra):
    code, out, err = run(["check", ".", "--format", "json", "--jobs", "1", *extra], capsys)
    assert "Traceback" not in err
    return code, sorted((d["path"], d["code"], d["line"]) for d in json.loads(out))


def _tables(repo):
    from jaxlint import __version__
    return repo / ".jaxlint_cache" / __version__


@pytest.fixture
def user_key(monkeypatch):
    """This run's cache key (the secret a cache this installation wrote is signed with)."""
    from jaxlint import cache
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "the user's own key")
    monkeypatch.setattr(cache, "_KEY", [])
    return cache


def test_committed_cache_cannot_hide_findings(repo, capsys, user_key, monkeypatch):
    expected = _findings(repo, capsys, "--no-cache")
    assert expected[0] == 1
    # a cache written elsewhere (another key), every findings entry emptied and signed again
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "the attacker's key")
    monkeypatch.setattr(user_key, "_KEY", [])
    assert _findings(repo, capsys) == expected
    c = user_key.Cache(str(repo))
    for entry in c._table("findings").values():
        entry["v"] = []
    c._dirty = True
    c.flush()
    assert _findings(repo, capsys)[0] == 0          # the attacker's own installation trusts it
    monkeypatch.setenv("JAXLINT_CACHE_KEY", "the user's own key")
    monkeypatch.setattr(user_key, "_KEY", [])
    assert _findings(repo, capsys) == expected      # the user's does not
    # and the same, edited by hand in place (without the key)
    text = (_tables(repo) / "findings.json").read_bytes()
    head, _, body = text.partition(b"\n")
    table = json.loads(body)
    for entry in table.values():
        entry["v"] = []
    (_tables(repo) / "findings.json").write_bytes(head + b"\n" + json.dumps(table).encode())
    assert _findings(repo, capsys) == expected


@pytest.mark.parametrize("shape", [
    {"index": "x", "outgoing": {"a": 1}, "exports": [1], "findings": {"x": 1}},
    {"index": {"functions": [1]}, "outgoing": [[1, 2]], "exports": {"f": 1}, "findings": [1, "x"]},
    {"index": {"functions": {}, "classes": {}, "aliases": {}}, "outgoing": [["q", [[0, "k"]], 1, 2, 3, [], []]],
     "exports": {}, "findings": [{"code": 1}]},
])
def test_cache_entries_of_the_wrong_shape_are_misses(repo, capsys, user_key, shape):
    expected = _findings(repo, capsys, "--no-cache")
    _findings(repo, capsys)
    c = user_key.Cache(str(repo))
    for kind, value in shape.items():     # signed with the user's key: only the shape is wrong
        for entry in c._table(kind).values():
            entry["v"] = value
    c._dirty = True
    c.flush()
    for _ in range(2):
        assert _findings(repo, capsys) == expected


def test_deeply_nested_cache_table_is_empty(repo, capsys, user_key):
    expected = _findings(repo, capsys, "--no-cache")
    _findings(repo, capsys)
    body = b"[" * 100000 + b"]" * 100000
    for kind in ("index", "findings"):
        (_tables(repo) / f"{kind}.json").write_bytes(
            user_key.HEADER + user_key._mac(user_key.secret_key(), kind, body) + b"\n" + body)
    for _ in range(2):
        assert _findings(repo, capsys) == expected


def test_cache_gitignore_is_written_atomically_and_repaired(repo, capsys, user_key, monkeypatch):
    import errno
    real = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(user_key.os, "fdopen", lambda fd, *a, **k: Full(real(fd, *a, **k)))
    assert _findings(repo, capsys)[0] == 1          # a full disk: the lint goes on
    ignore = repo / ".jaxlint_cache" / ".gitignore"
    assert not ignore.exists() or ignore.read_text().strip()       # never left empty
    assert not list((repo / ".jaxlint_cache").rglob("*.tmp"))
    monkeypatch.setattr(user_key.os, "fdopen", real)
    ignore.parent.mkdir(exist_ok=True)
    ignore.write_text("")                           # what an older jaxlint left on a full disk
    _findings(repo, capsys)
    assert ignore.read_text().splitlines()[-1] == "*"


@needs_fifo
def test_fifo_in_the_cache_folder_never_blocks(repo, capsys, user_key):
    expected = _findings(repo, capsys, "--no-cache")
    _findings(repo, capsys)
    table = _tables(repo) / "findings.json"
    table.unlink()
    os.mkfifo(table)
    (_tables(repo) / "index.json").unlink()
    os.symlink("/dev/zero", _tables(repo) / "index.json")
    r = cli(["check", ".", "--format", "json", "--jobs", "1"], repo, timeout=120,
            env=dict(os.environ, JAXLINT_CACHE_KEY="the user's own key"))
    assert "Traceback" not in r.stderr
    assert sorted((d["path"], d["code"], d["line"]) for d in json.loads(r.stdout)) == expected[1]


def test_cache_folder_that_is_a_link_is_not_written_through(repo, capsys, user_key, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.symlink(elsewhere, repo / ".jaxlint_cache")
    assert _findings(repo, capsys)[0] == 1
    assert list(elsewhere.iterdir()) == []


# ------------------------------------------------------------------ 7. non-regular files
@needs_fifo
def test_fifo_and_device_named_py_are_skipped_with_a_note(repo):
    os.mkfifo(repo / "fifo.py")
    os.symlink("/dev/zero", repo / "zero.py")
    (repo / "sub").mkdir()
    os.mkfifo(repo / "sub" / ".gitignore")
    (repo / "sub" / "more.py").write_text(BAD)
    for jobs in ("1", "2"):
        r = cli(["check", ".", "--no-cache", "--jobs", jobs], repo, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert "fifo.py: skipped: not a regular file (a FIFO)" in r.stderr
        assert "zero.py: skipped: not a regular file (a character device)" in r.stderr
        assert "bad.py:8:5: JAX101" in r.stdout and "sub/more.py:8:5: JAX101" in r.stdout


@needs_fifo
def test_fifo_named_on_the_command_line_is_an_error(repo):
    os.mkfifo(repo / "fifo.py")
    r = cli(["check", "fifo.py", "bad.py", "--no-cache", "-q"], repo, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert one_line_errors(r.stderr) == ["fifo.py: error: not a regular file (a FIFO); not checked"]
    assert "bad.py:8:5: JAX101" in r.stdout


@pytest.mark.parametrize("how", ["flag", "config"])
def test_baseline_or_config_that_is_a_device_is_an_error(repo, how):
    if how == "flag":
        r = cli(["check", ".", "--no-cache", "--baseline", "/dev/zero"], repo, timeout=120)
    else:
        (repo / "pyproject.toml").write_text('[tool.jaxlint]\nbaseline = "/dev/zero"\n')
        r = cli(["check", ".", "--no-cache"], repo, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = one_line_errors(r.stderr)
    assert line.startswith("jaxlint: error: ") and line.endswith("dev/zero: cannot read the baseline: not a "
                                                                  "regular file (a character device)")
    r = cli(["check", ".", "--no-cache", "--config", "/dev/zero"], repo, timeout=120)
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr


def test_writing_a_baseline_never_replaces_a_device(repo, capsys):
    os.symlink("/dev/null", repo / "base.json")
    code, out, err = run(["check", ".", "--no-cache", "--write-baseline", "--baseline", "base.json"], capsys)
    assert code == 2 and "not a regular file" in err and os.path.islink(repo / "base.json")


def test_unlistable_folder_is_an_error(repo, capsys, monkeypatch):
    (repo / "locked").mkdir()
    (repo / "locked" / "m.py").write_text(BAD)
    real = os.scandir

    def scandir(path="."):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for target in (".", "locked"):
        code, out, err = run(["check", target, "--no-cache", "-q"], capsys)
        assert code == 2
        assert any(ln.startswith("locked: error: cannot list folder: Permission denied")
                   for ln in one_line_errors(err)), err


@pytest.mark.skipif(ROOT, reason="root lists any folder: a real permission test needs another user "
                                 "(test_unlistable_folder_is_an_error covers it with a monkeypatched scandir)")
def test_unlistable_folder_is_an_error_for_real(repo, capsys):
    (repo / "locked").mkdir()
    (repo / "locked" / "m.py").write_text(BAD)
    os.chmod(repo / "locked", 0)
    try:
        code, out, err = run(["check", ".", "--no-cache", "-q"], capsys)
    finally:
        os.chmod(repo / "locked", 0o755)
    assert code == 2 and "locked: error: cannot list folder" in err


# ------------------------------------------------------------------ 8. --fix
def test_fix_in_a_read_only_folder_is_one_error_and_the_others_are_fixed(repo, capsys, monkeypatch):
    from jaxlint.fixes import applier
    (repo / "ro").mkdir()
    (repo / "ro" / "m.py").write_text(BAD)
    real = applier.tempfile.mkstemp

    def mkstemp(*a, dir=None, **k):
        if os.path.basename(dir) == "ro":
            raise PermissionError(13, "Permission denied")
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(applier.tempfile, "mkstemp", mkstemp)
    code, out, err = run(["check", ".", "--fix", "--no-cache", "-q"], capsys)
    assert code == 2
    assert one_line_errors(err) == ["ro/m.py: error: cannot create a temporary file in its folder (Permission "
                                    "denied: a read-only folder?); fixes were not written"]
    assert (repo / "ro" / "m.py").read_text() == BAD
    assert "jax.debug.print" in (repo / "bad.py").read_text()


@pytest.mark.skipif(ROOT, reason="root writes into a read-only folder: the monkeypatched test above covers it")
def test_fix_in_a_read_only_folder_for_real(repo, capsys):
    (repo / "ro").mkdir()
    (repo / "ro" / "m.py").write_text(BAD)
    os.chmod(repo / "ro", 0o555)
    try:
        code, out, err = run(["check", ".", "--fix", "--no-cache", "-q"], capsys)
    finally:
        os.chmod(repo / "ro", 0o755)
    assert code == 2 and "ro/m.py: error: cannot create a temporary file" in err
    assert (repo / "ro" / "m.py").read_text() == BAD


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError])
def test_fix_interrupted_at_the_rename_leaves_no_temporary_file(repo, capsys, monkeypatch, exc):
    from jaxlint.fixes import applier

    def replace(src, dst):
        raise exc()

    monkeypatch.setattr(applier.os, "replace", replace)
    code, out, err = run(["check", "bad.py", "--fix", "--no-cache"], capsys)
    assert code == (130 if exc is KeyboardInterrupt else 2)
    assert sorted(p.name for p in repo.iterdir()) == [".git", "bad.py", "clean.py"]
    assert (repo / "bad.py").read_text() == BAD


def test_fix_never_overwrites_an_editor_save(repo, capsys, monkeypatch):
    import jaxlint.cli as cli_mod
    real = cli_mod.lint_and_fix
    saved = BAD.replace("jnp.sin(x)", "jnp.cos(x)  # saved meanwhile")

    def lint_and_fix(source, *a, **k):
        res = real(source, *a, **k)
        (repo / "bad.py").write_text(saved)     # the editor saves between jaxlint's read and write
        return res

    monkeypatch.setattr(cli_mod, "lint_and_fix", lint_and_fix)
    code, out, err = run(["check", "bad.py", "--fix", "--no-cache", "-q"], capsys)
    assert code == 2 and "bad.py: error: the file changed on disk since jaxlint read it" in err
    assert (repo / "bad.py").read_text() == saved


def test_fix_does_not_follow_a_link_out_of_the_tree(repo, capsys, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "target.py"
    outside.write_text(BAD)
    (repo / "tree").mkdir()
    os.symlink(outside, repo / "tree" / "link.py")
    (repo / "tree" / "inside.py").write_text(BAD)
    os.symlink(repo / "tree" / "inside.py", repo / "tree" / "alias.py")
    code, out, err = run(["check", "tree", "--fix", "--no-cache", "-q"], capsys)
    assert code == 2 and outside.read_text() == BAD
    assert one_line_errors(err)[0].startswith(f"tree/link.py: error: a symbolic link to {outside}, outside the "
                                              f"checked folder tree; fixes were not written")
    assert "jax.debug.print" in (repo / "tree" / "inside.py").read_text()    # a link inside the tree is fine
    code, out, err = run(["check", "tree/link.py", "--fix", "--no-cache", "-q"], capsys)
    assert code == 0 and "jax.debug.print" in outside.read_text()       # named by the user: written


# ------------------------------------------------------------------ 10. notebooks
def test_a_cell_that_does_not_parse_does_not_block_the_other_fixes(repo, capsys):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook
    nb = new_notebook(cells=[new_code_cell("import jax"), new_code_cell("def broken(:\n    pass"),
                             new_code_cell("@jax.jit\ndef f(x):\n    print(x)\n    return x")])
    nbformat.write(nb, str(repo / "nb.ipynb"))
    code, out, err = run(["check", "nb.ipynb", "--fix", "--no-cache", "-q"], capsys)
    assert code == 2        # the broken cell is still an error: it was not checked
    assert "jaxlint bug" not in err and "fix discarded" not in err
    assert one_line_errors(err) == ["nb.ipynb: error: syntax error in cell 2 at line 1:5: invalid syntax (that "
                                    "cell was not checked; the other cells were)"]
    cells = nbformat.read(str(repo / "nb.ipynb"), 4).cells
    assert cells[1].source == "def broken(:\n    pass" and "jax.debug.print" in cells[2].source
    code, out, err = run(["check", "nb.ipynb", "--fix", "--no-cache", "-q"], capsys)
    assert nbformat.read(str(repo / "nb.ipynb"), 4).cells == cells      # a second --fix changes nothing
