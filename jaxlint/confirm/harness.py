"""Harness mode, parent side: ``jaxlint confirm [PATHS] -- COMMAND ...``.

The command runs with ``jaxlint/confirm/_site`` first on ``PYTHONPATH``; its
``sitecustomize`` installs :mod:`jaxlint.confirm.instrument` in every Python
process the command starts.  That instrumentation records the abstract
signature of each real call into a jitted function of a flagged module and,
when the process exits, confirms the findings with those signatures and
writes ``result-<pid>.jsonl`` files here.  Findings whose functions the
command never called are then confirmed the ordinary way (declared specs,
annotations) in worker subprocesses.
"""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence

from .runner import GRACE_S, MAX_EVENTS_BYTES, JobOutcome, _Tail, kill_group, read_events, run_jobs, worker_env

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")
RANK = {"confirmed": 2, "not-confirmed": 1, "unreached": 0}


def pytest_command(args: Sequence[str] = ()) -> List[str]:
    """``jaxlint confirm --pytest [ARGS]``: the project's own test suite as the harness command,
    on this interpreter (pytest-xdist workers are instrumented like any Python process)."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]


def harness_env(plan_path: str, device: Optional[str]) -> Dict[str, str]:
    env = worker_env(device)
    old = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = SITE_DIR + (os.pathsep + old if old else "")
    env["JAXLINT_CONFIRM_PLAN"] = plan_path
    return env


def _stream():
    """A file descriptor for the command's output: our stderr, so that
    jaxlint's stdout stays machine-readable."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, io.UnsupportedOperation, ValueError):
        return None


# the exit code reported for a command stopped at its time limit (as timeout(1) does)
TIMED_OUT = 124


def run_command(command: Sequence[str], env: Dict[str, str], timeout: Optional[float] = None) -> int:
    """Run the harness command in its own session, its output on our stderr.  Past ``timeout``
    seconds (a hanging test) its whole process group is stopped (SIGTERM, then SIGKILL) and
    the result is :data:`TIMED_OUT`; on Ctrl-C or SIGTERM it is stopped the same way (Ctrl-C
    reaches it as SIGINT first) before the interrupt goes on."""
    fd = _stream()
    out = fd if fd is not None else subprocess.PIPE
    if fd is not None:
        sys.stderr.flush()
    try:
        proc = subprocess.Popen(list(command), env=env, stdout=out, stderr=out if fd is not None
                                else subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    except FileNotFoundError:
        sys.stderr.write(f"jaxlint: command not found: {command[0]}\n")
        return 127
    except OSError as exc:
        sys.stderr.write(f"jaxlint: cannot run {command[0]}: {exc.strerror or exc}\n")
        return 126
    tail = None
    if fd is None:      # no file descriptor to share (tests): keep the output's tail and show it
        tail = _Tail(proc.stdout)
        tail.start()
    try:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGTERM)
            sys.stderr.write(f"jaxlint: the command ran past {timeout:g} s ([tool.jaxlint.confirm] "
                             f"command-timeout, --command-timeout) and was stopped\n")
            rc = TIMED_OUT
    except BaseException as exc:    # Ctrl-C, SIGTERM: the command's whole group goes too
        _stop(proc, signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM)
        raise
    finally:
        kill_group(proc)        # whatever the command left running in its group
        if tail is not None:
            tail.join(5)
            sys.stderr.write(tail.text())
    return rc


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to the command's group, SIGKILL after a grace period, and reap it."""
    kill_group(proc, sig)
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc)
    proc.wait()


def merge(outcomes: Dict[int, dict], rec: dict) -> None:
    old = outcomes.get(rec["id"])
    if old is None or RANK.get(rec.get("status"), 0) > RANK.get(old.get("status"), 0):
        outcomes[rec["id"]] = rec


def run_harness(command: Sequence[str], jobs: List[dict], by_id: Dict[int, object], ccfg, timeout: float,
                device: Optional[str], done: Callable[[dict, JobOutcome], None], progress=None,
                task=None, command_timeout: Optional[float] = None) -> int:
    command_timeout = command_timeout or getattr(ccfg, "command_timeout", None)
    memory_mb = getattr(ccfg, "memory_limit", None)
    with tempfile.TemporaryDirectory(prefix="jaxlint-harness-") as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w", encoding="utf-8") as fh:
            json.dump({"jobs": jobs, "out_dir": tmp, "timeout": timeout}, fh)
        if progress is not None:
            progress.update(task, description="running the command")
        rc = run_command(command, harness_env(plan_path, device), command_timeout)
        results: Dict[int, dict] = {}
        device_info = None
        observed_jax = False
        for name in sorted(os.listdir(tmp)):
            if not (name.startswith("result-") and name.endswith(".jsonl")):
                continue
            for ev in read_events(os.path.join(tmp, name), MAX_EVENTS_BYTES):
                if ev.get("event") == "device":
                    device_info = device_info or ev
                    observed_jax = True
                elif ev.get("event") == "result":
                    ev.pop("event", None)
                    merge(results, ev)
    cmd = " ".join(command)
    cmd = cmd if len(cmd) <= 60 else cmd[:57] + "..."
    # findings the command never reached: confirm them the ordinary way
    retry: List[dict] = []
    for job in jobs:
        todo = []
        for t in job["targets"]:
            r = results.get(t["id"])
            if r is None or r.get("status") == "unreached":
                why = r.get("reason") if r else (
                    f"the command was stopped at its time limit ({command_timeout:g} s) before it reported"
                    if rc == TIMED_OUT and command_timeout else
                    "no Python process of the command imported JAX (or it exited without running atexit)"
                    if not observed_jax else "no Python process of the command imported this module")
                results[t["id"]] = {"id": t["id"], "status": "unreached", "reason": f"`{cmd}`: {why}"}
                todo.append(t)
        if todo:
            retry.append(dict(job, targets=todo))
    outcome = JobOutcome()
    outcome.device = device_info
    outcome.results = results
    if retry:
        def retried(job, out):
            for t in job["targets"]:
                r = out.results.get(t["id"])
                if r is None:
                    continue
                if r.get("status") != "unreached":
                    r = dict(r)
                    r["inputs"] = (r.get("inputs") or "") + " (the command did not reach it)"
                    results[t["id"]] = r
                elif r.get("reason") and r["reason"] not in results[t["id"]]["reason"]:
                    results[t["id"]]["reason"] += f"; without the command: {r.get('reason')}"
            if out.device and outcome.device is None:
                outcome.device = out.device
        if progress is not None:
            progress.update(task, description="confirming")
        run_jobs(retry, timeout, device, retried, memory_mb=memory_mb)
    for job in jobs:
        done(job, outcome)
    return rc
