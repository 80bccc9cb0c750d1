"""Parent side: run one worker subprocess per module, with a timeout and a memory limit.

No JAX here.  Results come back through a JSON-lines file that the worker
appends to, so a worker killed on timeout or dead from a crash still keeps
the verdicts it wrote; the findings it did not reach become ``unreached``
with the phase it was in.  Each worker runs in its own session; its process
group is killed on every way out of :func:`run_job` (a clean exit too: children
a module started die with it), and on Ctrl-C or SIGTERM :func:`run_jobs` kills
every running group before the temporary folder goes.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Set

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


def read_events(path: str, limit: Optional[int] = None) -> List[dict]:
    """The JSON events of a worker's (or the harness's) event file; at most ``limit`` bytes
    are read (the file is written next to code that could fill it)."""
    out = []
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return out
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return out
        chunks, left = [], limit if limit is not None else 1 << 62
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return out
    finally:
        os.close(fd)
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(ev, dict):
            out.append(ev)
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


# What a worker may take (docs/guarantees.md).  Its output is never written to disk: stderr
# goes through a pipe of which only the last TAIL_BYTES are kept (stdout is discarded), and
# at most MAX_EVENTS_BYTES of its event file are read.
TAIL_BYTES = 64 << 10
MAX_EVENTS_BYTES = 64 << 20
POLL_S = 0.1                # how often a running worker's clock and memory are looked at
GRACE_S = 2.0               # SIGINT/SIGTERM to a harness command, then SIGKILL


class Limits:
    """The limits of one confirmation run: ``timeout`` seconds and ``memory_mb`` MiB of
    resident memory per worker (its children included)."""

    def __init__(self, timeout: float, memory_mb: Optional[int] = None):
        self.timeout = timeout
        self.memory_mb = memory_mb


class _Live:
    """The process groups started and not yet reaped, and whether the run was cancelled
    (Ctrl-C, SIGTERM): every exit path kills them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.procs: Set[subprocess.Popen] = set()
        self.cancelled = threading.Event()

    def add(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.procs.add(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.procs.discard(proc)

    def kill_all(self) -> None:
        self.cancelled.set()
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            kill_group(proc)


LIVE = _Live()


class _Tail(threading.Thread):
    """Drains a pipe, keeping its last ``TAIL_BYTES`` (memory and disk stay bounded however
    much a module writes)."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.data = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while True:
                chunk = self.stream.read1(1 << 16) if hasattr(self.stream, "read1") else self.stream.read(1 << 16)
                if not chunk:
                    break
                self.total += len(chunk)
                self.data += chunk
                if len(self.data) > 2 * TAIL_BYTES:
                    del self.data[:-TAIL_BYTES]
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        return bytes(self.data[-TAIL_BYTES:]).decode("utf-8", "replace")


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in group ``pgid`` (Linux ``/proc``; 0 elsewhere)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            # after the command name: state ppid pgrp ...; rss is field 24 (index 21 here)
            if int(fields[2]) == pgid:
                total += int(fields[21]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total / (1 << 20)


def run_job(job: dict, timeout: float, device: Optional[str], tmpdir: str, index: int,
            memory_mb: Optional[int] = None) -> JobOutcome:
    # the workers of one run share a compilation cache: a program compiled again (confirmation
    # clears JAX's in-memory caches so that traced Python bodies run again) is read back, not rebuilt
    job = dict(job, device=device, xla_cache=os.path.join(tmpdir, "xla-cache"))
    job_path = os.path.join(tmpdir, f"job-{index}.json")
    out_path = os.path.join(tmpdir, f"out-{index}.jsonl")
    with open(job_path, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    outcome = JobOutcome()
    t0 = time.perf_counter()
    stopped: Optional[str] = None       # why the parent stopped the worker
    rc = None
    tail = None
    if LIVE.cancelled.is_set():
        stopped = "the run was interrupted before this module's worker started"
    else:
        proc = subprocess.Popen([sys.executable, "-m", "jaxlint.confirm.worker", job_path, out_path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=worker_env(device, replicas=_needs_replicas(job)),
                                start_new_session=True)
        LIVE.add(proc)
        tail = _Tail(proc.stderr)
        tail.start()
        try:
            stopped, rc = _watch(proc, Limits(timeout, memory_mb))
        finally:
            # always: the worker's group goes (children it started, a fork at import), the pipe
            # is drained and closed, and the worker is reaped -- on a clean exit, an error,
            # Ctrl-C or SIGTERM alike
            kill_group(proc)
            rc = proc.wait() if rc is None else rc
            LIVE.discard(proc)
            tail.join(5)
            proc.stderr.close()
    outcome.wall = time.perf_counter() - t0
    phase = "starting"
    for ev in read_events(out_path, MAX_EVENTS_BYTES):
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
        if stopped is not None and stopped.startswith("timed out") and tail is not None:
            from .reasons import timed_out
            why = timed_out(phase, timeout)
        elif stopped is not None:
            why = stopped if tail is None else f"{stopped} while {phase}"
        elif rc and rc < 0:
            why = f"the worker was killed by {_signal_name(rc)} while {phase}"
        elif rc:
            why = f"the worker crashed (exit code {rc}) while {phase}{_last_line(tail.text() if tail else '')}"
        else:
            why = f"the worker stopped early while {phase} (os._exit or a hard exit in user code?)"
        for t in missing:
            outcome.results[t["id"]] = {"id": t["id"], "status": "unreached", "reason": why}
    return outcome


def _watch(proc: subprocess.Popen, limits: Limits):
    """Wait for ``proc`` within ``limits``; (why it was stopped or None, its exit code or None)."""
    deadline = time.monotonic() + limits.timeout
    polls = 0
    while True:
        try:
            return None, proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if LIVE.cancelled.is_set():
            return "the run was interrupted", None
        if time.monotonic() >= deadline:
            return f"timed out after {limits.timeout:g} s", None
        polls += 1
        if limits.memory_mb and polls % 5 == 0:
            rss = group_rss_mb(proc.pid)
            if rss > limits.memory_mb:
                return (f"stopped at {rss:.0f} MiB of memory (the limit is {limits.memory_mb} MiB: "
                        f"[tool.jaxlint.confirm] memory-limit)"), None


def _needs_replicas(job: dict) -> bool:
    return any((t.get("confirm") or {}).get("strategy") == "pmap-sync" for t in job.get("targets", ()))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    from .text import clip
    return f": {clip(lines[-1], 200)}" if lines else ""


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal ``proc``'s process group (it was started in its own session: it and every
    child it started that did not leave the session)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, AttributeError, OSError):
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
            except (ProcessLookupError, OSError):
                pass


def run_jobs(jobs: Sequence[dict], timeout: float, device: Optional[str],
             on_done: Callable[[dict, JobOutcome], None], max_workers: Optional[int] = None,
             memory_mb: Optional[int] = None) -> List[JobOutcome]:
    """Run every job; the first alone (it tells which backend JAX picked),
    the rest in parallel when that backend is the CPU.  On Ctrl-C or SIGTERM every
    worker's process group is killed and the temporary folder removed before the
    interrupt goes on."""
    outcomes: List[Optional[JobOutcome]] = [None] * len(jobs)
    if not jobs:
        return []
    LIVE.cancelled.clear()
    try:
        with tempfile.TemporaryDirectory(prefix="jaxlint-confirm-") as tmp:
            first = run_job(jobs[0], timeout, device, tmp, 0, memory_mb)
            outcomes[0] = first
            on_done(jobs[0], first)
            backend = (first.device or {}).get("backend")
            if max_workers is None:
                max_workers = min(4, os.cpu_count() or 1) if (backend == "cpu" or device == "cpu") else 1
            rest = list(range(1, len(jobs)))
            if max_workers <= 1:
                for i in rest:
                    outcomes[i] = run_job(jobs[i], timeout, device, tmp, i, memory_mb)
                    on_done(jobs[i], outcomes[i])
            else:
                ex = cf.ThreadPoolExecutor(max_workers=max_workers)
                try:
                    futs = {ex.submit(run_job, jobs[i], timeout, device, tmp, i, memory_mb): i for i in rest}
                    for fut in cf.as_completed(futs):
                        i = futs[fut]
                        outcomes[i] = fut.result()
                        on_done(jobs[i], outcomes[i])
                except BaseException:
                    LIVE.kill_all()     # the threads see it, stop their workers and return
                    ex.shutdown(wait=True, cancel_futures=True)
                    raise
                ex.shutdown(wait=True)
    except BaseException:
        LIVE.kill_all()
        raise
    return [o for o in outcomes if o is not None]
