"""Run a module's ``if __name__ == "__main__":`` block in the worker, with the harness probes.

Plain ``--confirm`` imports a module and traces its functions with inputs it builds; code that only
the module's ``__main__`` block drives (a script's training loop, the state it builds, the classes
it constructs with their arguments) is reached only by running the program.  A worker given a job
with ``"mode": "main"`` runs the file as ``python FILE`` would (``__name__ == "__main__"``,
``sys.argv == [FILE]``, the file's folder first on ``sys.path``), statement by statement, with the
instrumentation of harness mode (:mod:`jaxlint.confirm.instrument`) installed: the program's own
transforms record the abstract signatures of their calls into the module's functions, the error
that ends the run is kept, and every trace is counted.  The run stops at ``budget`` seconds (a
training loop has shown what it shows by then); the findings are then confirmed with what it
recorded, as harness mode does at exit -- evidence from inputs the program itself produced.
"""
from __future__ import annotations

import ast
import os
import re
import signal
import sys
import threading
import time
import types
from typing import Callable, Optional

MAIN_GUARD = re.compile(r"""^if\s+(?:__name__\s*==\s*(['"])__main__\1|(['"])__main__\2\s*==\s*__name__)\s*:""",
                        re.M)


def has_main_block(source: str) -> bool:
    """The module has a top-level ``if __name__ == "__main__":`` block."""
    return bool(MAIN_GUARD.search(source or ""))


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare) or len(stmt.test.ops) != 1 \
            or not isinstance(stmt.test.ops[0], ast.Eq):
        return False
    sides = [stmt.test.left, stmt.test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


class _Stopped(BaseException):
    """Raised in the program when its time is up (not an ``Exception``: the program's own
    ``except Exception`` does not swallow it)."""


def run_main(job: dict, emit: Callable[[dict], None], phase: Callable[[str], None], budget: float,
             per_finding: float) -> None:
    from . import instrument as I
    from .worker import module_source
    path = job["path"]
    real = os.path.realpath(path)
    I.install({"jobs": [job], "out_dir": None, "timeout": per_finding}, at_exit=False)
    for d in reversed(job.get("sys_path") or []):
        if d and d not in sys.path:
            sys.path.insert(0, d)
    here = os.path.dirname(os.path.abspath(path))
    if here not in sys.path:
        sys.path.insert(0, here)
    sys.argv = [path]
    tree = ast.parse(module_source(job), filename=path)
    mod = types.ModuleType("__main__")
    mod.__file__ = path
    # a module of a package runs as `python -m package.module` does: its relative imports work
    mod.__package__ = (job.get("module") or "").rpartition(".")[0] or None
    mod.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = mod
    quals = [q for q, e in job["entries"].items() if not e.get("owner")]
    phase("running the module's `__main__` block")
    t0 = time.perf_counter()
    stopped = None
    ended = None
    reached = False         # the `__main__` block started
    from .runobs import RunObserver
    observer = RunObserver(job, {path, real})
    with _deadline(budget), observer:
        try:
            import __future__
            flags = 0
            for stmt in tree.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                    for a in stmt.names:
                        flags |= getattr(__future__, a.name).compiler_flag
                if _is_main_guard(stmt):        # the module's functions exist now: record their eager calls
                    I._spy_eager(mod, quals)
                    reached = True
                code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", flags=flags,
                               dont_inherit=True)
                exec(code, mod.__dict__)
        except _Stopped:
            stopped = f"stopped after {budget:g} s"
        except SystemExit as exc:
            ended = f"it called sys.exit({exc.code!r})"
        except BaseException as exc:       # the error that ends the program: evidence when its rule predicts it
            I._record_error(real, exc)
            ended = f"it raised {type(exc).__name__}"
            if not reached:
                from .session import ErrorInfo
                ended = f"running the module as `__main__` failed before its `__main__` block: " \
                        f"{ErrorInfo(exc, {path, real}).short()}"
    seconds = round(time.perf_counter() - t0, 3)
    emit({"event": "main-run", "seconds": seconds, "stopped": stopped, "ended": ended})
    if not reached:
        why = ended or stopped or "the `__main__` block did not start"
        for t in job["targets"]:
            emit({"event": "result", "id": t["id"], "status": "unreached", "reason": why, "run": "main"})
        return
    phase("confirming with what the `__main__` block recorded")
    name = "the module's `__main__` block"
    I.confirm_recorded(lambda v: emit({"event": "result", **_named(v, name, stopped)}), {real: mod},
                       run_name=name, observer=observer)


def _named(v: dict, name: str, stopped: Optional[str]) -> dict:
    v = dict(v)
    if v.get("evidence"):
        v["evidence"] = v["evidence"].replace("the run raised", f"running {name} raised", 1)
    if v.get("status") == "unreached" and stopped:
        v["reason"] = f"{v.get('reason', '')} (the block was {stopped})"
    v["run"] = "main"
    return v


class _deadline:
    """SIGALRM raises :class:`_Stopped` in the program after ``seconds`` (main thread only)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.active = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")

    def __enter__(self):
        if self.active:
            def handler(signum, frame):
                raise _Stopped()
            self.old = signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False
