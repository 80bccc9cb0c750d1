"""Harness instrumentation, inside the user's own process.

Installed by ``jaxlint/confirm/_site/sitecustomize.py`` when
``JAXLINT_CONFIRM_PLAN`` is set.  Nothing here imports JAX: a meta-path
hook waits for the program to import ``jax`` and then

* replaces ``jax.jit`` with a thin function that, for functions defined in a
  flagged module, wraps the traced Python function in a spy.  The spy runs
  only while JAX traces (once per new signature) and records the abstract
  signature: tracers become ``ShapeDtypeStruct``, static arguments and the
  pytree structure are kept as they are.  An exception raised by the traced
  code on its way out (``TracerBoolConversionError`` ...) is recorded too.
  Spies are cached per function, so JAX's own caching is unchanged.
* listens to ``jax.monitoring`` backend-compile events and attributes each
  compilation to the calls of the "step" functions on the Python stack
  (JAX501/JAX502 evidence: executables compiled per step).
* at exit, confirms the findings of every flagged module the process
  imported with the recorded signatures, and writes the verdicts to
  ``result-<pid>.jsonl`` in the plan's output directory.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import io
import importlib.abc
import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import weakref
from contextlib import contextmanager
from typing import Dict, Optional, Tuple

_PLAN: Optional[dict] = None
_FILES: Dict[str, int] = {}             # realpath -> job index
_REAL: Dict[str, Optional[str]] = {}     # co_filename -> realpath if a plan file, else None
_SIGNATURES: Dict[Tuple[str, str], list] = {}
_ERRORS: Dict[str, list] = {}
_STEPS: Dict[Tuple[str, str], dict] = {}     # (path, qualname) -> record
_STEP_CODES: Dict[Tuple[str, str], Tuple[str, dict]] = {}   # (path, co_qualname) -> (qual, entry info)
_SPIES = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_installed = False


def _plan_path(filename: str) -> Optional[str]:
    r = _REAL.get(filename, 0)
    if r == 0:
        real = os.path.realpath(filename) if filename and not filename.startswith("<") else None
        r = real if real in _FILES else None
        _REAL[filename] = r
    return r


def _qualname(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


# ------------------------------------------------------------ install
class _JaxFinder(importlib.abc.MetaPathFinder):
    """Patches a module right after it has run: the modules that define instrumented
    transforms (``jax``, ``jax.lax``, ``flax.nnx``, ``equinox``...), Flax linen (for
    ``Module.apply``) and the flagged modules themselves (eager calls)."""

    def __init__(self, names):
        self._busy = False
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name not in self.names or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            _on_module(module)
        except Exception as exc:  # never break the user's program
            sys.stderr.write(f"jaxlint confirm: instrumentation failed: {type(exc).__name__}: {exc}\n")

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install(plan: Optional[dict] = None, at_exit: bool = True) -> None:
    """Instrument this process for the plan in ``JAXLINT_CONFIRM_PLAN`` (harness mode), or for
    ``plan`` (a worker running a module's ``__main__`` block; it confirms when the run ends,
    not at exit: ``at_exit=False``)."""
    global _PLAN, _installed, _AT_EXIT
    if _installed:
        return
    if plan is None:
        path = os.environ.get("JAXLINT_CONFIRM_PLAN")
        if not path:
            return
        with open(path, encoding="utf-8") as fh:
            plan = json.load(fh)
    _PLAN = plan
    _AT_EXIT = at_exit
    for i, job in enumerate(_PLAN["jobs"]):
        real = os.path.realpath(job["path"])
        _FILES[real] = i
        steps = set()
        for t in job["targets"]:
            steps.update(s for s in t.get("extra", {}).get("steps") or () if s)
        for q in steps:
            _STEP_CODES[(real, q)] = (q, job["entries"].get(q, {}))
    _installed = True
    previous = sys.excepthook

    def excepthook(tp, value, tb):      # an error that ends the program at a flagged line
        if "jax" in sys.modules:
            for path in _FILES:
                _record_error(path, value)
        return previous(tp, value, tb)
    sys.excepthook = excepthook
    for job in _PLAN["jobs"]:
        if job.get("module"):
            _EAGER[job["module"]] = [q for q, e in job["entries"].items() if not e.get("owner")]
    watched = set(_transform_modules()) | {"flax.linen"} | set(_EAGER)
    for name in sorted(watched):
        if name in sys.modules:
            _on_module(sys.modules[name])
    sys.meta_path.insert(0, _JaxFinder(watched))


_EAGER: Dict[str, list] = {}      # flagged module name -> its module-level entry functions
_JAX_READY = []
_AT_EXIT = True
# (path, qualname) -> one record per trace of a flagged function the program's transform made:
# (line of the call in the flagged file that led to it, abstract traced arguments, static values)
_TRACES: Dict[Tuple[str, str], list] = {}


def _transform_modules() -> Dict[str, list]:
    """module name -> the instrumented transform records it defines
    (knowledge.Transform.instrumented: the records say what the harness wraps)."""
    from ..analysis import knowledge as K
    out: Dict[str, list] = {}
    for t in K.TRANSFORMS.values():
        if t.instrumented:
            out.setdefault(t.name.rpartition(".")[0], []).append(t)
    return out


def _on_module(module) -> None:
    name = module.__name__
    if name == "jax":
        _on_jax_ready()
    for mod_name, records in _transform_modules().items():     # this one and any loaded with it
        mod = sys.modules.get(mod_name)
        for t in records if mod is not None else ():
            attr = t.name.rpartition(".")[2]
            real = getattr(mod, attr, None)
            if real is not None and not getattr(real, "_jaxlint_patched", False):
                setattr(mod, attr, _spying(real, t))
    if name == "flax.linen":
        _patch_linen_apply(module)
        _observe_flax()
    if name in _EAGER:
        _spy_eager(module, _EAGER[name])


def _on_jax_ready() -> None:
    if _JAX_READY:
        return
    _JAX_READY.append(True)
    from jax import monitoring
    monitoring.register_event_duration_secs_listener(_on_compile)
    if _AT_EXIT:
        atexit.register(_finish)


def _spying(real, t):
    """The transform ``real`` taking spies of its functions (at the record's function
    positions, keywords and lists) instead of the functions."""
    missing = object()

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        if not args and not any(k in kwargs for k in t.fun_keywords) and t.fun_positions == (0,):
            return lambda f: wrapper(f, **kwargs)          # used as a decorator factory
        args = list(args)
        for i in t.fun_positions:
            if i < len(args) and callable(args[i]):
                args[i] = _spy_for(args[i])
        for i in t.list_positions:
            if i < len(args) and isinstance(args[i], (list, tuple)):
                args[i] = type(args[i])(_spy_for(f) if callable(f) else f for f in args[i])
        for k in t.fun_keywords:
            v = kwargs.get(k, missing)
            if v is not missing and callable(v):
                kwargs[k] = _spy_for(v)
        return real(*args, **kwargs)

    wrapper._jaxlint_patched = True
    return wrapper


_OBSERVERS: Dict[str, object] = {}       # realpath -> runobs.RunObserver (harness mode)


def _observe_flax() -> None:
    """Harness mode: watch the Flax calls at flagged lines while the command runs (the dropout keys
    drawn, the statistics given and returned: runobs.py).  A worker running a `__main__` block
    installs its own."""
    if not _AT_EXIT or _OBSERVERS or _PLAN is None:
        return
    try:
        from .runobs import RunObserver
        for job in _PLAN["jobs"]:
            real = os.path.realpath(job["path"])
            obs = RunObserver(job, {job["path"], real})
            if obs.rng or obs.stats:
                _OBSERVERS[real] = obs.__enter__()
    except Exception:
        pass


def _patch_linen_apply(linen) -> None:
    """``Module.apply`` of a flagged Flax linen module records the call of its method."""
    cls = linen.Module
    real = cls.apply
    if getattr(real, "_jaxlint_patched", False):
        return

    @functools.wraps(real)
    def apply(self, variables, *args, method=None, **kwargs):
        try:
            code = getattr(type(self), "__call__" if method is None else getattr(method, "__name__", method))
            code = getattr(inspect.unwrap(code), "__code__", None)
            path = _plan_path(code.co_filename) if code is not None else None
            if path is not None:
                inst, meth = self, method

                def init(*a, **k):
                    import jax
                    return inst.init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, *a,
                                     method=meth, **k)
                _record_signature((path, _qualname(code)), init, args, kwargs, arrays=True)
        except Exception:
            pass
        return real(self, variables, *args, method=method, **kwargs)

    apply._jaxlint_patched = True
    cls.apply = apply


def _spy_eager(module, quals) -> None:
    """Module-level functions of a flagged module record their eager calls too."""
    import types
    for q in quals:
        fn = getattr(module, q, None)
        if not isinstance(fn, types.FunctionType) or _plan_path(fn.__code__.co_filename) is None:
            continue
        key = (_plan_path(fn.__code__.co_filename), _qualname(fn.__code__))

        def make(fn, key):
            @functools.wraps(fn)
            def eager(*args, **kwargs):
                _record_signature(key, fn, args, kwargs, arrays=True)
                return fn(*args, **kwargs)
            eager._jaxlint_patched = True
            return eager
        setattr(module, q, make(fn, key))


# ------------------------------------------------------------ signatures
def _spy_for(fun):
    try:
        target = inspect.unwrap(fun)
    except Exception:
        return fun
    code = getattr(target, "__code__", None)
    if code is None:
        return fun
    path = _plan_path(code.co_filename)
    if path is None:
        return fun
    try:
        spy = _SPIES.get(fun)
    except TypeError:
        spy = None
    if spy is not None:
        return spy
    key = (path, _qualname(code))

    @functools.wraps(fun)
    def spy(*args, **kwargs):
        _record_signature(key, fun, args, kwargs)
        _record_trace(key, args, kwargs)
        try:
            return fun(*args, **kwargs)
        except BaseException as exc:
            _record_error(path, exc)
            raise

    try:
        _SPIES[fun] = spy
    except TypeError:
        pass
    return spy


def _record_signature(key, fun, args, kwargs, arrays: bool = False) -> None:
    """The abstract signature of a call: tracers (and, with ``arrays``, concrete arrays of an
    eager call) become ``ShapeDtypeStruct``; static values and the pytree structure stay."""
    try:
        if "jax" not in sys.modules or len(_SIGNATURES.get(key, ())) >= 3:
            return                              # (a step called every iteration stops costing anything)
        import jax
        import numpy as np
        from .session import SDS, Inputs
        Tracer = jax.core.Tracer
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if not any(isinstance(x, Tracer) or arrays and isinstance(x, (jax.Array, np.ndarray)) for x in leaves):
            return

        def abstract(x):
            if isinstance(x, Tracer):
                aval = x.aval
                return SDS(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))
            if arrays and isinstance(x, (jax.Array, np.ndarray)):
                return SDS(x.shape, x.dtype)
            return x
        a, k = jax.tree_util.tree_map(abstract, (tuple(args), dict(kwargs)))
        inp = Inputs(a, k, "harness")
        with _LOCK:
            lst = _SIGNATURES.setdefault(key, [])
            desc = inp.describe()
            if len(lst) < 3 and all(d != desc for _, _, d in lst):
                lst.append((fun, inp, desc))
    except Exception:
        pass


def _record_trace(key, args, kwargs) -> None:
    """One trace of ``key`` by the program's transform (the spy runs only while JAX traces): the
    line of the flagged file that called into the transform, the traced arguments' abstract
    values and the other (static) values, so that a function compiled again for each new static
    value shows it (JAX505)."""
    try:
        if "jax" not in sys.modules or len(_TRACES.get(key, ())) >= 64:
            return
        import jax
        Tracer = jax.core.Tracer
        leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=lambda x: x is None)
        if not any(isinstance(x, Tracer) for x in leaves):
            return
        avals, statics = [], []
        for x in leaves:
            if isinstance(x, Tracer):
                avals.append((tuple(x.aval.shape), str(x.aval.dtype)))
            else:
                statics.append(_static_text(x))
        line = None
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename != __file__ and _plan_path(f.f_code.co_filename) == key[0]:
                line = f.f_lineno
                break
            f = f.f_back
        with _LOCK:
            _TRACES.setdefault(key, []).append((line, tuple(avals), tuple(statics)))
    except Exception:
        pass


def _static_text(x) -> str:
    try:
        text = repr(x)
    except Exception:
        text = f"<{type(x).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _record_error(path: str, exc: BaseException) -> None:
    try:
        from .session import ErrorInfo
        info = ErrorInfo(exc, {path})
        with _LOCK:
            lst = _ERRORS.setdefault(path, [])
            if len(lst) < 20 and not any(e.type == info.type and e.site == info.site for e in lst):
                lst.append(info)
    except Exception:
        pass


# ------------------------------------------------------------ compilations per step
def _on_compile(event, duration, **kw) -> None:
    if event != "/jax/core/compile/backend_compile_duration" or not _STEP_CODES:
        return
    try:
        f = sys._getframe(1)
        while f is not None:
            code = f.f_code
            path = _plan_path(code.co_filename)
            if path is not None:
                hit = _STEP_CODES.get((path, _qualname(code)))
                if hit is not None:
                    _count(path, hit, f, kw.get("fun_name", "?"), duration)
                    return
            f = f.f_back
    except Exception:
        pass


def _count(path: str, hit, frame, name: str, duration: float = 0.0) -> None:
    qual, info = hit
    with _LOCK:
        rec = _STEPS.setdefault((path, qual), {"frames": [], "counts": [], "names": [], "inputs": None,
                                               "call": None, "seconds": []})
        rec["seconds"].append(duration)
        for i, fr in enumerate(rec["frames"]):
            if fr is frame:
                rec["counts"][i] += 1
                rec["names"][i].append(name)
                return
        if len(rec["frames"]) >= 5:
            return
        rec["frames"].append(frame)
        rec["counts"].append(1)
        rec["names"].append([name])
        if rec["inputs"] is None:
            rec["call"], rec["inputs"] = _frame_inputs(frame, qual, info)


def _frame_inputs(frame, qual: str, info: dict):
    """The step's arguments, read from its frame at its first compilation."""
    try:
        import jax
        import numpy as np
        from .session import SDS, Inputs
        loc = frame.f_locals
        names = [p["name"] for p in info.get("params", []) if p["kind"] == "pos"]
        kwonly = [p["name"] for p in info.get("params", []) if p["kind"] == "kwonly"]

        def abstract(x):
            if isinstance(x, (jax.Array, np.ndarray)) and not isinstance(x, jax.core.Tracer):
                return SDS(x.shape, x.dtype)
            return x
        args = [loc[n] for n in names if n in loc]
        kwargs = {n: loc[n] for n in kwonly if n in loc}
        a, k = jax.tree_util.tree_map(abstract, (tuple(args), kwargs))
        call = None
        if info.get("owner"):
            code = frame.f_code
            self_name = code.co_varnames[0] if code.co_argcount else None
            obj = loc.get(self_name)
            if obj is not None:
                call = getattr(obj, qual.split(".", 1)[1])
        else:
            mod = sys.modules.get(frame.f_globals.get("__name__", ""))
            call = getattr(mod, qual, None) if mod is not None else None
        return call, Inputs(a, k, "harness")
    except Exception:
        return None, None


# ------------------------------------------------------------ at exit
def _module_for(real: str):
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and os.path.realpath(f) == real:
            return mod
    # a script run as `python script.py`: Python deletes `__main__.__file__` once the script has
    # run, before atexit; its own functions still say where they were defined
    main = sys.modules.get("__main__")
    if main is None:
        return None
    try:
        if sys.argv and sys.argv[0] and os.path.realpath(sys.argv[0]) == real:
            return main
    except Exception:
        pass
    for v in list(vars(main).values()):
        try:
            fns = [v] if not isinstance(v, type) else \
                [f for f in vars(v).values() if inspect.isfunction(f)] if v.__module__ == "__main__" else []
            for f in fns:
                code = getattr(inspect.unwrap(f), "__code__", None) if callable(f) else None
                if code is not None and os.path.realpath(code.co_filename) == real:
                    return main
        except Exception:
            continue
    return None


@contextmanager
def _alarm(seconds: float):
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def handler(signum, frame):
        raise TimeoutError(f"timed out after {seconds:g} s")
    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _finish() -> None:
    if _PLAN is None:
        return
    out_path = os.path.join(_PLAN["out_dir"], f"result-{os.getpid()}.jsonl")
    try:
        import jax
        out = open(out_path, "a", encoding="utf-8")

        def emit(rec):
            out.write(json.dumps(rec, default=str) + "\n")
            out.flush()
        dev = jax.devices()[0]
        emit({"event": "device", "device_kind": dev.device_kind, "backend": jax.default_backend(),
              "platform": dev.platform, "jax": jax.__version__})
        confirm_recorded(lambda v: emit({"event": "result", **v}))
        out.close()
    except BaseException as exc:  # never turn the user's exit into a crash
        try:
            sys.stderr.write(f"jaxlint confirm: confirmation in the harness failed: {type(exc).__name__}: {exc}\n")
        except Exception:
            pass


def confirm_recorded(result, modules: Optional[Dict[str, object]] = None, run_name: str = "the command",
                     observer=None) -> None:
    """Confirm the findings of every flagged module of the plan with what the run recorded;
    ``result(verdict)`` for each.  ``modules``: realpath -> module object, where the run's
    module is not one ``sys.modules`` names by its file (a ``__main__`` block run by a worker)."""
    import contextlib as _ctx
    from .evidence import Confirmer
    timeout = float(_PLAN.get("timeout") or 60)
    for obs in _OBSERVERS.values():
        try:
            obs.__exit__(None, None, None)      # the run is over: its spies go before anything is re-traced
        except Exception:
            pass
    with _LOCK:     # the run's traces, not those confirmation makes when it traces again
        run_traces = {k: list(v) for k, v in _TRACES.items()}
    if True:
        for i, job in enumerate(_PLAN["jobs"]):
            real = os.path.realpath(job["path"])
            module = (modules or {}).get(real) or _module_for(real)
            if module is None:
                continue
            obs_here = observer if observer is not None else _OBSERVERS.get(real)
            sigs = {q: [(fun, inp) for fun, inp, _ in lst] for (p, q), lst in _SIGNATURES.items() if p == real}
            steps = {}
            for (p, q), rec in _STEPS.items():
                if p != real:
                    continue
                steps[q] = {"counts": rec["counts"], "names": rec["names"], "inputs": rec["inputs"],
                            "seconds": rec["seconds"]}
                if rec["inputs"] is not None and q not in sigs:
                    sigs[q] = [(rec["call"], rec["inputs"])]
            traces = {q: lst for (p, q), lst in run_traces.items() if p == real}
            with _ctx.redirect_stdout(io.StringIO()):   # re-traced prints are ours, not the run's
                Confirmer(job, module, result, signatures=sigs,
                          step_records=steps, run_errors=_ERRORS.get(real, []), harness_only=True,
                          guard=lambda: _alarm(timeout), trace_records=traces, run_name=run_name,
                          observer=obs_here).run()
