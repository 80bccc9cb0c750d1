"""Runtime confirmation: trace and compile flagged code with JAX.

``jaxlint check --confirm`` turns static findings into evidence.  Each
finding gains a ``confirmation``: ``confirmed`` (with evidence),
``not-confirmed`` (the flagged code traced and compiled cleanly for the
inputs used) or ``unreached`` (with the reason).  ``jaxlint confirm --
<command>`` runs the user's own command with instrumentation that records
the abstract signature of every call into a jitted function and confirms
with those (harness mode).

This package never imports JAX in the linter process: the work happens in
``jaxlint.confirm.worker`` subprocesses (one per module, with a timeout) and,
in harness mode, inside the user's command.  See docs/confirmation.md.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .plan import plan_file
from . import rules as _rules
from .rules import supported
from .specs import ConfirmConfig, SpecError, load_confirm_config

STATUSES = ("confirmed", "not-confirmed", "unreached")


@dataclass
class ConfirmOptions:
    timeout: Optional[float] = None          # seconds per module; None: config, else 60
    device: Optional[str] = None             # cpu | gpu | tpu; None: JAX's default backend
    progress: bool = False                   # rich progress bar on stderr
    command: Optional[List[str]] = None      # harness mode: the command to run
    command_timeout: Optional[float] = None  # seconds for the command; None: config, else 1800
    max_workers: Optional[int] = None


@dataclass
class ConfirmSummary:
    device: Optional[dict] = None            # device_kind, backend, platform, jax, import_jax_s
    counts: Dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    modules: int = 0
    command_rc: Optional[int] = None
    tests: Optional[str] = None              # a test folder of the checked project (plain --confirm)

    def device_text(self) -> str:
        d = self.device
        if not d:
            return "no device (JAX did not start)"
        return f"{d.get('device_kind')} ({d.get('backend')} backend, jax {d.get('jax')})"

    def line(self) -> str:
        parts = [f"{self.counts.get(s, 0)} {s}" for s in STATUSES]
        out = f"Confirmation on {self.device_text()}: " + ", ".join(parts) + f" ({self.wall_s:.1f} s)"
        if self.tests and self.counts.get("unreached"):
            out += (f"; the project has tests ({self.tests}): `jaxlint confirm --pytest` runs them and confirms "
                    f"with the calls they make")
        return out


def warning(timeout: float, command: Optional[Sequence[str]] = None) -> str:
    if command:
        return ("jaxlint: confirm runs your command with JAX instrumentation and then traces the flagged "
                "functions inside it; your code runs as usual.\n")
    return (f"jaxlint: --confirm imports your modules (their top-level code runs) and traces the flagged "
            f"functions with JAX, in one subprocess per module ({timeout:g} s timeout each); a module whose "
            f"findings need it also runs its `if __name__ == \"__main__\":` block for up to "
            f"{main_budget(timeout):g} s ([tool.jaxlint.confirm] run-main = false turns that off).\n")


def _confirmation(result: dict, device: Optional[dict]) -> dict:
    out = {"status": result.get("status", "unreached")}
    if out["status"] == "unreached":
        out["reason"] = result.get("reason", "unknown")
    else:
        out["evidence"] = result.get("evidence", "")
    for k in ("entry", "inputs", "arguments", "basis", "seconds"):
        if result.get(k) is not None:
            out[k] = result[k]
    if device:
        out["device"] = device.get("device_kind")
        out["backend"] = device.get("backend")
    return out


def plan_results(results, ccfg: ConfirmConfig, settings=None):
    """Jobs for the findings of ``results`` (FileResult list) and id -> finding;
    findings that cannot be planned get their confirmation right away."""
    from .models import ModelSource
    jobs, by_id = [], {}
    next_id = 0
    threshold = getattr(settings, "unrolled_loop_threshold", 16)
    models = ModelSource(ccfg.traced_functions, ccfg.exclude)
    for res in results:
        if not res.findings:
            continue
        if res.source is None or res.path in ("-", "<stdin>") or not os.path.isfile(res.path):
            for f in res.findings:
                f.confirmation = {"status": "unreached", "reason": "standard input cannot be imported"}
            continue
        try:
            job, ids = plan_file(res.source, res.findings, ccfg, next_id, models=models)
        except Exception as exc:   # a planning bug must not stop the lint
            for f in res.findings:
                f.confirmation = {"status": "unreached", "reason": f"could not plan: {type(exc).__name__}: {exc}"}
            continue
        job["config"]["unrolled_loop_threshold"] = threshold
        next_id += len(res.findings)
        by_id.update(ids)
        jobs.append(job)
    return jobs, by_id


def confirm_results(results, ccfg: ConfirmConfig, opts: ConfirmOptions, settings=None) -> ConfirmSummary:
    """Attach a ``confirmation`` to every finding of ``results``."""
    from .runner import run_jobs
    t0 = time.perf_counter()
    summary = ConfirmSummary()
    timeout = opts.timeout or ccfg.timeout
    device = opts.device or ccfg.device
    jobs, by_id = plan_results(results, ccfg, settings)
    summary.modules = len(jobs)
    no_jax = None if opts.command else missing_jax()
    if no_jax is not None:
        sys.stderr.write(no_jax + "\n")
        for f in by_id.values():
            f.confirmation = {"status": "unreached", "reason": "JAX is not installed"}
        jobs = []
    progress, task = _progress(opts, len(by_id), "confirming")

    def done(job, outcome):
        if outcome.device and summary.device is None:
            summary.device = outcome.device
        for t in job["targets"]:
            r = outcome.results.get(t["id"], {"status": "unreached", "reason": "no result"})
            by_id[t["id"]].confirmation = _confirmation(r, outcome.device)
        if progress is not None:
            progress.advance(task, len(job["targets"]))

    try:
        if opts.command:
            from .harness import run_harness
            summary.command_rc = run_harness(opts.command, jobs, by_id, ccfg, timeout, device, done,
                                             progress=progress, task=task, command_timeout=opts.command_timeout)
        else:
            run_with_main(jobs, results, timeout, device, done, opts.max_workers, ccfg.memory_limit,
                          run_main=getattr(ccfg, "run_main", True))
    finally:
        if progress is not None:
            progress.stop()
    for res in results:
        for f in res.findings:
            c = getattr(f, "confirmation", None) or {"status": "unreached", "reason": "not confirmed"}
            f.confirmation = c
            summary.counts[c["status"]] = summary.counts.get(c["status"], 0) + 1
    if not opts.command:
        summary.tests = _test_folder(results)
    summary.wall_s = time.perf_counter() - t0
    return summary


RANK = {"confirmed": 2, "not-confirmed": 1, "unreached": 0}


def main_budget(timeout: float) -> float:
    """Seconds a module's `__main__` block may run before it is stopped (the rest of the worker's
    time goes to confirming with what it recorded)."""
    return max(5.0, min(20.0, 0.3 * timeout))


def run_with_main(jobs, results, timeout: float, device, done, max_workers=None, memory_mb=None,
                  run_main: bool = True) -> None:
    """Plain ``--confirm``: each module's worker first; then, for a module with an ``if __name__ ==
    "__main__":`` block and findings not confirmed that way, a second worker that runs the block as
    ``python FILE`` would, with the harness probes (:mod:`jaxlint.confirm.mainrun`).  The stronger
    verdict wins (the run's inputs are the program's own); an unreached finding keeps both reasons."""
    from .mainrun import has_main_block
    from .runner import JobOutcome, run_jobs
    sources = {os.path.abspath(r.path): r.source for r in results if r.findings and r.source is not None}
    first: Dict[int, tuple] = {}

    def keep(job, outcome):
        first[id(job)] = (job, outcome)
    run_jobs(jobs, timeout, device, keep, max_workers, memory_mb=memory_mb)
    mains = []
    for job in jobs:
        outcome = first.get(id(job), (job, None))[1]
        src = sources.get(os.path.abspath(job["path"]))
        text = getattr(src, "text", None) if src is not None else None
        if not run_main or outcome is None or job.get("notebook") or not has_main_block(text or ""):
            continue
        todo = [t for t in job["targets"]
                if (outcome.results.get(t["id"]) or {}).get("status") != "confirmed"]
        if todo:
            mains.append(dict(job, targets=todo, mode="main", main_budget=main_budget(timeout),
                              per_finding=max(5.0, min(30.0, 0.5 * timeout)), origin=id(job)))
    second: Dict[int, JobOutcome] = {}

    def keep_main(job, outcome):
        second[job["origin"]] = outcome
    if mains:
        run_jobs(mains, timeout, device, keep_main, max_workers, memory_mb=memory_mb)
    for job in jobs:
        outcome = first.get(id(job), (job, None))[1] or JobOutcome()
        main = second.get(id(job))
        for tid, r in list((main.results if main is not None else {}).items()):
            old = outcome.results.get(tid)
            if old is None or RANK.get(r.get("status"), 0) > RANK.get(old.get("status"), 0):
                outcome.results[tid] = r
            elif old.get("status") == "unreached" and r.get("reason"):
                old["reason"] = f"{old.get('reason', '')}; running the module's `__main__` block: {r['reason']}"
        if outcome.device is None and main is not None:
            outcome.device = main.device
        done(job, outcome)


def _test_folder(results) -> Optional[str]:
    """A test folder (or test files) of the checked projects, relative to the working directory."""
    from ..analysis.project import find_root
    seen = set()
    for res in results:
        if not res.findings or res.path in ("-", "<stdin>"):
            continue
        root = find_root(os.path.dirname(os.path.abspath(res.path)))
        if root is None or root in seen:
            continue
        seen.add(root)
        for name in ("tests", "test"):
            d = os.path.join(root, name)
            if os.path.isdir(d):
                return os.path.relpath(d) + os.sep
        try:
            if any(n.startswith("test_") and n.endswith(".py") for n in os.listdir(root)):
                return os.path.relpath(root) + os.sep + "test_*.py"
        except OSError:
            continue
    return None


def confirmed_only(results) -> Optional[str]:
    """``--confirmed-only``: keep only the confirmed findings of ``results``.

    Returns a one-line message when the gate checked nothing: there were
    findings and every one stayed ``unreached``, so passing would be vacuous.
    The caller prints it and exits non-zero unless ``--exit-zero``."""
    counts: Dict[str, int] = {}
    for r in results:
        for f in r.findings:
            s = (f.confirmation or {}).get("status", "unreached")
            counts[s] = counts.get(s, 0) + 1
        r.findings = [f for f in r.findings if (f.confirmation or {}).get("status") == "confirmed"]
    total = sum(counts.values())
    if total and counts.get("unreached", 0) == total:
        return (f"jaxlint: --confirmed-only checked nothing: none of the {total} finding{'s' if total != 1 else ''} "
                f"could be exercised at runtime (all unreached; run with --confirm to see why), so an empty "
                f"result would prove nothing (pass --exit-zero to accept that)")
    return None


def missing_jax() -> Optional[str]:
    """The one line to print when JAX cannot be imported by the workers, else None."""
    import importlib.util
    if importlib.util.find_spec("jax") is not None:
        return None
    return (f"jaxlint: runtime confirmation needs JAX, which is not installed for {sys.executable}: "
            f"{os.path.basename(sys.executable)} -m pip install jax")


def _progress(opts: ConfirmOptions, total: int, label: str):
    if not opts.progress or total == 0 or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(file=sys.stderr), transient=True)
    task = progress.add_task(label, total=total)
    progress.start()
    return progress, task


def __getattr__(name: str):
    if name == "STRATEGY":           # code -> strategy name, derived from the rules' declarations
        return _rules.strategy_table()
    raise AttributeError(name)


__all__ = ["STATUSES", "ConfirmConfig", "ConfirmOptions", "ConfirmSummary", "SpecError", "STRATEGY",
           "confirm_results", "confirmed_only", "load_confirm_config", "missing_jax", "plan_results", "supported",
           "warning"]
