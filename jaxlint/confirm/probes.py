"""What a confirmation run observes: the error it raised (:class:`ErrorInfo`, its frames
in the module), the lines that ran and the side effects they had (:class:`Probe`:
``print``/logging, clocks, Python and NumPy RNG, tracer leaks) and how arguments changed
(:class:`Observer`).  Imports JAX; used by :mod:`jaxlint.confirm.session`."""
from __future__ import annotations

import builtins
import collections
import functools
import logging
import os
import random as _pyrandom
import sys
import sysconfig
import time
import traceback
from typing import Any, List, Optional, Sequence, Set, Tuple

import jax
import numpy as np

from .text import clip

Tracer = jax.core.Tracer


def describe_value(v) -> str:
    from .session import describe_value as describe   # (session imports this module)
    return describe(v)


def current_trace() -> Tuple[str, ...]:
    """The kinds of the JAX traces running now, innermost first (("EvalTrace",) when eager): a
    ``vmap`` inside a ``jit`` is ("BatchTrace", "DynamicJaxprTrace")."""
    try:
        from jax._src import core
        t = core.trace_ctx.trace
        out = []
        while t is not None and len(out) < 16:
            out.append(type(t).__name__)
            t = getattr(t, "parent_trace", None)
        return tuple(out) or ("EvalTrace",)
    except Exception:       # an internal JAX API: without it, no line counts as traced
        return ("EvalTrace",)


STAGED = frozenset({"DynamicJaxprTrace"})


def _first_line(exc: BaseException, limit: int = 160) -> str:
    s = str(exc).strip().splitlines()
    return clip(s[0] if s else "", limit)


# ------------------------------------------------------------ errors
_LIB_DIRS = tuple({os.path.realpath(p) + os.sep for p in
                   (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("purelib"),
                    sysconfig.get_paths().get("platlib"), os.path.dirname(os.path.dirname(jax.__file__)),
                    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                   if p})


class ErrorInfo:
    def __init__(self, exc: BaseException, paths: Set[str]):
        self.exc = exc
        self.paths = set(paths)
        self.type = type(exc).__name__
        self.mro = {c.__name__ for c in type(exc).__mro__}
        self.message = _first_line(exc)
        self.full_message = str(exc)
        # lines of the target file on the traceback chain, innermost last
        self.lines: List[int] = []
        self.site: Optional[int] = None       # innermost user frame, when it lies in the target file
        self.site_elsewhere: Optional[str] = None
        seen = set()
        e = exc
        chain = []
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            chain.append(e)
            e = e.__cause__ or e.__context__
        for i, e in enumerate(chain):
            frames = traceback.extract_tb(e.__traceback__)
            user = None
            for fr in frames:
                fn = os.path.realpath(fr.filename) if fr.filename and not fr.filename.startswith("<") else fr.filename
                if fn in paths:
                    self.lines.append(fr.lineno)
                    user = ("target", fr.lineno)
                elif fn and not fn.startswith(_LIB_DIRS) and not fn.startswith("<"):
                    user = ("other", f"{fr.filename}:{fr.lineno}")
            if i == 0 and user is not None:
                if user[0] == "target":
                    self.site = user[1]
                else:
                    self.site_elsewhere = user[1]
        self.cause_lines = []
        if len(chain) > 1:
            for fr in traceback.extract_tb(chain[1].__traceback__):
                fn = os.path.realpath(fr.filename) if fr.filename and not fr.filename.startswith("<") else fr.filename
                if fn in paths:
                    self.cause_lines.append(fr.lineno)

    def where(self) -> str:
        """Where the error was raised, to follow "failed" or stand in parentheses: "at line 12",
        "at other.py:40", "inside JAX"."""
        if self.site is not None:
            return f"at line {self.site}"
        if self.site_elsewhere:
            return f"at {self.site_elsewhere}"
        return "inside JAX"

    def short(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


# ------------------------------------------------------------ probe
_IMPURE_MODULES = {"random", "uuid", "secrets", "datetime"}
_CLOCKS = {"time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}


def _impure_name(fn) -> Optional[str]:
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "?")
    if owner is not None:
        if isinstance(owner, _pyrandom.Random):
            return f"random.{name}"
        if isinstance(owner, np.random.RandomState):
            return f"np.random.{name}"
        if isinstance(owner, np.random.Generator):
            return f"np.random.Generator.{name}"
        if isinstance(owner, type(time)) and getattr(owner, "__name__", "") == "time" and name in _CLOCKS:
            return f"time.{name}"
        if isinstance(owner, type(os)) and name == "urandom" and \
                getattr(owner, "__name__", "") in ("posix", "nt", "os"):
            return "os.urandom"
    mod = getattr(fn, "__module__", None)
    if mod == "time" and name in _CLOCKS:
        return f"time.{name}"
    if mod and (mod.startswith("numpy.random")):
        return f"np.random.{name}"
    return None


def _has_tracer(v, depth: int = 0) -> Optional[str]:
    if isinstance(v, Tracer):
        try:
            return f"{type(v).__name__}({v.aval.str_short()})"
        except Exception:
            return type(v).__name__
    if isinstance(v, str):
        if "Tracer(" in v or "Traced<" in v:
            return repr(v if len(v) < 60 else v[:57] + "...")
        return None
    if depth < 3:
        if isinstance(v, (list, tuple, set)):
            for x in list(v)[:50]:
                r = _has_tracer(x, depth + 1)
                if r:
                    return r
        elif isinstance(v, dict):
            for x in list(v.values())[:50]:
                r = _has_tracer(x, depth + 1)
                if r:
                    return r
    return None


_LOG_METHODS = ("debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log")


class EnoughRun(BaseException):
    """Raised into the user's code to end a run that has shown what it can (a line of the target
    file ran ``stop_after`` times: a long loop).  A BaseException, so ``except Exception`` in the
    user's code does not swallow it."""


class Probe:
    """Instruments one trace: executed lines of the target file, print /
    logging calls and impure calls made from it.  ``stop_after``: end the run (:class:`EnoughRun`)
    once a line of the target file has run that many times."""

    def __init__(self, paths: Set[str], profile: bool = False, watch: Sequence[int] = (),
                 stop_after: Optional[int] = None):
        self.stop_after = stop_after
        self.stopped = False
        self.paths = set(paths)
        self.profile = profile
        self.lines: collections.Counter = collections.Counter()
        # watched lines -> the kinds of JAX trace they ran under ("DynamicJaxprTrace": staged,
        # "BatchTrace": vmapped, "EvalTrace": eagerly, ...)
        self.watch = frozenset(watch)
        self.traces: dict = {}
        self.prints: List[dict] = []
        self.impure: List[dict] = []
        self._saved: List[Tuple[Any, str, Any]] = []

    # -- settrace: line coverage of the target file only
    def _global_trace(self, frame, event, arg):
        if frame.f_code.co_filename in self.paths:
            return self._local_trace
        return None

    def _local_trace(self, frame, event, arg):
        if event == "line":
            n = frame.f_lineno
            self.lines[n] += 1
            if n in self.watch:
                self.traces.setdefault(n, set()).update(current_trace())
            if self.stop_after is not None and self.lines[n] > self.stop_after and not self.stopped:
                self.stopped = True
                raise EnoughRun(f"line {n} ran {self.stop_after} times")
        return self._local_trace

    def ran_under(self, line: int, end_line: int, kinds=None) -> bool:
        """A watched line of the span ran under a JAX trace (of one of ``kinds``, else any but eager)."""
        got = set().union(*[self.traces.get(n, set()) for n in range(line, end_line + 1)])
        return bool(got & set(kinds)) if kinds else bool(got - {"EvalTrace"})

    # -- setprofile: impure calls made from the target file
    def _profile(self, frame, event, arg):
        if event == "c_call":
            if frame.f_code.co_filename in self.paths:
                name = _impure_name(arg)
                if name:
                    self.impure.append({"line": frame.f_lineno, "name": name})
        elif event == "call":
            back = frame.f_back
            if back is not None and back.f_code.co_filename in self.paths:
                mod = frame.f_globals.get("__name__", "")
                if mod in _IMPURE_MODULES or mod.startswith("numpy.random"):
                    self.impure.append({"line": back.f_lineno, "name": f"{mod}.{frame.f_code.co_name}"})

    def _caller(self, skip_logging: bool = False):
        f = sys._getframe(2)
        if skip_logging:
            while f is not None and f.f_code.co_filename == logging.__file__:
                f = f.f_back
        return f

    def __enter__(self):
        probe = self
        real_print = builtins.print

        @functools.wraps(real_print)   # it stands for `builtins.print`: importers that look it up by its
        def spy_print(*args, **kwargs):  # module and name (numba does, for every builtin) find it there
            f = probe._caller()
            if f is not None and f.f_code.co_filename in probe.paths:
                shown = None
                for a in args:
                    shown = shown or _has_tracer(a)
                probe.prints.append({"line": f.f_lineno, "what": "print", "tracer": shown,
                                     "args": [describe_value(a) for a in args][:4]})
            return real_print(*args, **kwargs)

        self._saved.append((builtins, "print", real_print))
        builtins.print = spy_print
        for meth in _LOG_METHODS:
            real = getattr(logging.Logger, meth)

            def make(real, meth):
                @functools.wraps(real)
                def spy_log(self_, *args, **kwargs):
                    f = probe._caller(skip_logging=True)
                    if f is not None and f.f_code.co_filename in probe.paths:
                        vals = list(args) + list(kwargs.get("extra", {}).values() if isinstance(
                            kwargs.get("extra"), dict) else [])
                        shown = None
                        for a in vals:
                            shown = shown or _has_tracer(a)
                        probe.prints.append({"line": f.f_lineno, "what": f"logging.{meth}", "tracer": shown,
                                             "args": [describe_value(a) for a in args][:4]})
                    return real(self_, *args, **kwargs)
                return spy_log
            self._saved.append((logging.Logger, meth, real))
            setattr(logging.Logger, meth, make(real, meth))
        if self.profile:
            # NumPy's RNG functions are Cython: no profile events, so wrap them
            for name, fn in list(vars(np.random).items()):
                if name.startswith("_") or isinstance(fn, type) or not callable(fn) or \
                        type(fn).__name__ not in ("method", "builtin_function_or_method",
                                                  "cython_function_or_method", "function"):
                    continue
                self._saved.append((np.random, name, fn))
                setattr(np.random, name, self._numpy_spy(fn, name))
        self._old_trace = sys.gettrace()
        self._old_profile = sys.getprofile()
        sys.settrace(self._global_trace)
        if self.profile:
            sys.setprofile(self._profile)
        return self

    def _numpy_spy(self, fn, name):
        probe = self

        @functools.wraps(fn)
        def spy(*args, **kwargs):
            f = sys._getframe(1)
            if f.f_code.co_filename in probe.paths:
                probe.impure.append({"line": f.f_lineno, "name": f"np.random.{name}"})
            return fn(*args, **kwargs)
        return spy

    def __exit__(self, *exc):
        sys.settrace(self._old_trace)
        if self.profile:
            sys.setprofile(self._old_profile)
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
        return False

    def ran(self, line: int, end_line: int) -> bool:
        return any(self.lines.get(n) for n in range(line, end_line + 1))


# ------------------------------------------------------------ tracing
def _out_leaves(out):
    return [x for x in jax.tree_util.tree_leaves(out)
            if isinstance(x, (jax.Array, Tracer, np.ndarray, np.generic, int, float, complex))]


class Observer:
    """Compares the arguments' pytree structure and leaf identities before
    and after the traced call (argument mutation, JAX105)."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.changes: List[str] = []

    @staticmethod
    def _snapshot(a, k):
        flat, treedef = jax.tree_util.tree_flatten_with_path((a, k))
        return treedef, {jax.tree_util.keystr(p): id(v) for p, v in flat}

    def before(self, a, k):
        self._before = self._snapshot(a, k)

    def after(self, a, k):
        treedef, leaves = self._snapshot(a, k)
        old_def, old = self._before
        changed = sorted({p for p in set(old) | set(leaves) if old.get(p) != leaves.get(p)})
        if treedef != old_def and not changed:
            changed = ["(structure)"]
        self.changes = [self._pretty(p) for p in changed]

    def _pretty(self, path: str) -> str:
        # "[0][1]['params']" -> "state['params']" using the parameter names
        import re
        m = re.match(r"^\[(0|1)\]\[(\d+|'[^']*')\](.*)$", path)
        if not m:
            return path
        which, idx, rest = m.groups()
        if which == "0" and idx.isdigit() and int(idx) < len(self.names):
            return self.names[int(idx)] + rest
        if which == "1":
            return idx.strip("'") + rest
        return f"argument {idx}{rest}"
