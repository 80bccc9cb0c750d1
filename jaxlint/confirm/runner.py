"""Parent side: run one worker subprocess per module, with a timeout.

No JAX here.  Results come back through a JSON-lines file that the worker
appends to, so a worker killed on timeout or dead from a crash still keeps
the verdicts it wrote; the findings it did not reach become ``unreached``
with the phase it was in.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


HOST_DEVICES = 4     # CPU devices a worker gets when it confirms a pmap finding (JAX601)


def worker_env(device: Optional[str], replicas: bool = False) -> Dict[str, str]:
    env = dict(os.environ)
    if replicas and device in (None, "cpu") and "xla_force_host_platform_device_count" not in env.get(
            "XLA_FLAGS", ""):
        # must be set before the worker imports JAX: pmap then has devices to replicate over
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_force_host_platform_device_count={HOST_DEVICES}").strip()
    # the worker runs on this interpreter: make sure it finds this jaxlint, last
    env["PYTHONPATH"] = (env["PYTHONPATH"] + os.pathsep if env.get("PYTHONPATH") else "") + PACKAGE_PARENT
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # several workers may share one GPU
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    elif device in ("gpu", "tpu"):
        env.pop("JAX_PLATFORMS", None)     # let JAX pick the accelerator; the worker checks it got one
    return env


def read_events(path: str) -> List[dict]:
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except (ValueError, AttributeError):
        return f"signal {-rc}"


class JobOutcome:
    def __init__(self):
        self.results: Dict[int, dict] = {}
        self.device: Optional[dict] = None
        self.wall = 0.0
        self.import_module_s: Optional[float] = None


def run_job(job: dict, timeout: float, device: Optional[str], tmpdir: str, index: int) -> JobOutcome:
    job = dict(job, device=device)
    job_path = os.path.join(tmpdir, f"job-{index}.json")
    out_path = os.path.join(tmpdir, f"out-{index}.jsonl")
    err_path = os.path.join(tmpdir, f"err-{index}.txt")
    with open(job_path, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    outcome = JobOutcome()
    t0 = time.perf_counter()
    timed_out = False
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "jaxlint.confirm.worker", job_path, out_path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                env=worker_env(device, replicas=_needs_replicas(job)),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            rc = proc.wait()
    outcome.wall = time.perf_counter() - t0
    phase = "starting"
    for ev in read_events(out_path):
        kind = ev.get("event")
        if kind == "phase":
            phase = ev.get("phase", phase)
        elif kind == "device":
            outcome.device = ev
        elif kind == "imported":
            outcome.import_module_s = ev.get("seconds")
        elif kind == "result" and isinstance(ev.get("id"), int):
            ev.pop("event", None)
            outcome.results[ev["id"]] = ev
    missing = [t for t in job["targets"] if t["id"] not in outcome.results]
    if missing:
        if timed_out:
            why = f"timed out after {timeout:g} s while {phase}"
        elif rc and rc < 0:
            why = f"the worker was killed by {_signal_name(rc)} while {phase}"
        elif rc:
            why = f"the worker crashed (exit code {rc}) while {phase}{_stderr_tail(err_path)}"
        else:
            why = f"the worker stopped early while {phase} (os._exit or a hard exit in user code?)"
        for t in missing:
            outcome.results[t["id"]] = {"id": t["id"], "status": "unreached", "reason": why}
    return outcome


def _needs_replicas(job: dict) -> bool:
    return any((t.get("confirm") or {}).get("strategy") == "pmap-sync" for t in job.get("targets", ()))


def _stderr_tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read()[-4000:].decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in data.splitlines() if ln.strip()]
    return f": {lines[-1][:200]}" if lines else ""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)     # the worker's own session: it and its children
    except (ProcessLookupError, PermissionError, AttributeError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def run_jobs(jobs: Sequence[dict], timeout: float, device: Optional[str],
             on_done: Callable[[dict, JobOutcome], None], max_workers: Optional[int] = None) -> List[JobOutcome]:
    """Run every job; the first alone (it tells which backend JAX picked),
    the rest in parallel when that backend is the CPU."""
    outcomes: List[Optional[JobOutcome]] = [None] * len(jobs)
    if not jobs:
        return []
    with tempfile.TemporaryDirectory(prefix="jaxlint-confirm-") as tmp:
        first = run_job(jobs[0], timeout, device, tmp, 0)
        outcomes[0] = first
        on_done(jobs[0], first)
        backend = (first.device or {}).get("backend")
        if max_workers is None:
            max_workers = min(4, os.cpu_count() or 1) if (backend == "cpu" or device == "cpu") else 1
        rest = list(range(1, len(jobs)))
        if max_workers <= 1:
            for i in rest:
                outcomes[i] = run_job(jobs[i], timeout, device, tmp, i)
                on_done(jobs[i], outcomes[i])
        else:
            with cf.ThreadPoolExecutor(max_workers=max_workers) as ex:
                futs = {ex.submit(run_job, jobs[i], timeout, device, tmp, i): i for i in rest}
                for fut in cf.as_completed(futs):
                    i = futs[fut]
                    outcomes[i] = fut.result()
                    on_done(jobs[i], outcomes[i])
    return [o for o in outcomes if o is not None]
