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
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence

from .runner import JobOutcome, read_events, run_jobs, worker_env

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


def run_command(command: Sequence[str], env: Dict[str, str]) -> int:
    fd = _stream()
    try:
        if fd is not None:
            sys.stderr.flush()
            return subprocess.call(list(command), env=env, stdout=fd, stderr=fd, stdin=subprocess.DEVNULL)
        proc = subprocess.run(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
        sys.stderr.write(proc.stdout.decode("utf-8", "replace"))
        return proc.returncode
    except FileNotFoundError:
        sys.stderr.write(f"jaxlint: command not found: {command[0]}\n")
        return 127


def merge(outcomes: Dict[int, dict], rec: dict) -> None:
    old = outcomes.get(rec["id"])
    if old is None or RANK.get(rec.get("status"), 0) > RANK.get(old.get("status"), 0):
        outcomes[rec["id"]] = rec


def run_harness(command: Sequence[str], jobs: List[dict], by_id: Dict[int, object], ccfg, timeout: float,
                device: Optional[str], done: Callable[[dict, JobOutcome], None], progress=None,
                task=None) -> int:
    with tempfile.TemporaryDirectory(prefix="jaxlint-harness-") as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w", encoding="utf-8") as fh:
            json.dump({"jobs": jobs, "out_dir": tmp, "timeout": timeout}, fh)
        if progress is not None:
            progress.update(task, description="running the command")
        rc = run_command(command, harness_env(plan_path, device))
        results: Dict[int, dict] = {}
        device_info = None
        observed_jax = False
        for name in sorted(os.listdir(tmp)):
            if not (name.startswith("result-") and name.endswith(".jsonl")):
                continue
            for ev in read_events(os.path.join(tmp, name)):
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
        run_jobs(retry, timeout, device, retried)
    for job in jobs:
        done(job, outcome)
    return rc
