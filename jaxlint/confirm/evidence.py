"""Per-rule evidence (worker side; imports JAX).

:class:`Confirmer` takes one module job (see :mod:`jaxlint.confirm.plan`),
groups its findings by the entry function that reaches them and the inputs
built for it, traces each entry once under a :class:`~.session.Probe`, and
asks the strategy of each finding's rule (:data:`STRATEGIES`, keyed through
:data:`jaxlint.confirm.rules.STRATEGY`) for a verdict:
``confirmed`` with evidence, ``not-confirmed`` (traced and compiled
cleanly) or ``unreached`` with the reason.
"""
from __future__ import annotations

import inspect
import numbers
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np

from . import rules as R
from .session import (CompileCounter, Entry, ErrorInfo, Inputs, NoInputs, Observer, TraceResult,
                      Unresolved, block, count_eqns, describe_value, inputs_from_params,
                      inputs_from_spec, make_call, resolve_entry, trace, _first_line)

CONFIRMED, NOT_CONFIRMED, UNREACHED = "confirmed", "not-confirmed", "unreached"


def confirmed(text: str) -> dict:
    return {"status": CONFIRMED, "evidence": text}


def not_confirmed(text: str) -> dict:
    return {"status": NOT_CONFIRMED, "evidence": text}


def unreached(text: str) -> dict:
    return {"status": UNREACHED, "reason": text}


# ------------------------------------------------------------ groups
class Group:
    """One entry function with one set of inputs, shared by its findings."""

    def __init__(self, confirmer: "Confirmer", qual: str, info: dict, entry: Entry, inputs: Inputs):
        self.c = confirmer
        self.qual = qual
        self.info = info
        self.entry = entry
        self.inputs = inputs
        self.targets: List[dict] = []
        self._base: Optional[TraceResult] = None
        self._compiled = None
        self._snap_before: Dict[str, object] = {}
        self._snap_after: Dict[str, object] = {}
        self._extra: Dict[str, object] = {}
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return self.qual

    def param_names(self) -> List[str]:
        return [p["name"] for p in self.info.get("params", []) if p["kind"] == "pos"]

    # -- the base trace
    def base(self) -> TraceResult:
        if self._base is None:
            targets = self.c.targets_by_qual.get(self.qual, self.targets)
            strategies = {R.STRATEGY.get(t["code"]) for t in targets}
            names = sorted({n for t in targets for n in t["names"]})
            self._snap_before = self.c.snapshot(names, self.entry)
            observer = Observer(self.param_names()) if "arg-mutation" in strategies else None
            jax.clear_caches()   # JAX reuses traces of cond/scan bodies: make the Python bodies run again
            self._base = trace(self.entry, self.inputs, self.c.paths,
                               profile=bool(strategies & R.NEEDS_PROFILE), observer=observer)
            self._snap_after = self.c.snapshot(names, self.entry)
            self.seconds += self._base.seconds
        return self._base

    def compile(self) -> Tuple[Optional[float], Optional[ErrorInfo]]:
        if self._compiled is None:
            base = self.base()
            t0 = time.perf_counter()
            try:
                base.traced.lower().compile()
                self._compiled = (time.perf_counter() - t0, None)
            except Exception as exc:
                self._compiled = (None, ErrorInfo(exc, self.c.paths))
            self.seconds += time.perf_counter() - t0
        return self._compiled

    def retrace(self, **kw) -> TraceResult:
        jax.clear_caches()
        res = trace(self.entry, self.inputs, self.c.paths, probe=kw.pop("probe", False), **kw)
        self.seconds += res.seconds
        return res

    def memo(self, key: str, fn: Callable):
        if key not in self._extra:
            self._extra[key] = fn()
        return self._extra[key]

    # -- shared verdicts
    def ran(self, t: dict) -> bool:
        return self.base().probe.ran(t["line"], t["end_line"])

    def not_reached(self, t: dict) -> dict:
        err = self.base().error
        if err is not None:
            v = unreached(f"tracing `{self.name}` failed before reaching line {t['line']}: "
                          f"{err.short()} ({err.where()})")
        else:
            v = unreached(f"line {t['line']} did not run while tracing `{self.name}` with inputs "
                          f"{self.inputs.describe()}")
        v["retry"] = True       # another entry point may reach it
        return v

    def clean(self, t: dict, what: str) -> dict:
        err = self.base().error
        if err is not None:
            return not_confirmed(f"line {t['line']} ran under tracing without {what} "
                                 f"(tracing later failed {err.where()}: {err.short()})")
        secs, cerr = self.compile()
        if cerr is not None:
            return unreached(f"`{self.name}` traced, but compiling failed: {cerr.short()}")
        return not_confirmed(f"`{self.name}` traced and compiled cleanly with inputs {self.inputs.describe()}; "
                             f"line {t['line']} ran under tracing without {what}")


def _in_span(line: Optional[int], t: dict) -> bool:
    return line is not None and t["line"] <= line <= t["end_line"]


def _error_line(err: ErrorInfo) -> Optional[int]:
    if err.site is not None:
        return err.site
    if err.lines and not err.site_elsewhere:
        return err.lines[-1]
    return None


# ------------------------------------------------------------ strategies
def s_trace_error(t: dict, g: Group) -> dict:
    names, fragments = R.TRACE_ERRORS[t["code"]]
    err = g.base().error
    if err is not None and _in_span(_error_line(err), t):
        if err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments):
            return confirmed(f"tracing `{g.name}` raised {err.type} at line {_error_line(err)}: {err.message}")
        return unreached(f"tracing `{g.name}` failed at line {_error_line(err)} with {err.short()}, "
                         f"not the error {t['code']} predicts")
    if not g.ran(t):
        return g.not_reached(t)
    return g.clean(t, "an error")


def s_print(t: dict, g: Group) -> dict:
    base = g.base()
    recs = [r for r in base.probe.prints if _in_span(r["line"], t)]
    with_tracer = [r for r in recs if r["tracer"]]
    if with_tracer:
        r = with_tracer[0]
        return confirmed(f"`{r['what']}` ran while `{g.name}` was traced (once per compilation, not per call) "
                         f"and was given a tracer, {r['tracer']}, instead of a value")
    err = base.error
    if err is not None and _in_span(_error_line(err), t):
        if "Tracer" in err.full_message or "__format__" in err.full_message:
            return confirmed(f"formatting the traced value failed at trace time: {err.short()}")
        return unreached(f"tracing `{g.name}` failed at line {_error_line(err)}: {err.short()}")
    if not g.ran(t):
        return g.not_reached(t)
    if recs:
        return not_confirmed(f"`{recs[0]['what']}` at line {t['line']} ran at trace time with static values only "
                             f"({', '.join(recs[0]['args'])})")
    return g.clean(t, "printing or logging a tracer")


def s_global_write(t: dict, g: Group) -> dict:
    g.base()
    mine = {n.split(".")[0] for n in t["names"]} | {".".join(n.split(".")[:2]) for n in t["names"]
                                                    if n.startswith("self.")}
    changes = g.c.diff({k: v for k, v in g._snap_before.items() if k in mine}, g._snap_after)
    if changes and g.ran(t):
        return confirmed(f"tracing `{g.name}` once changed {'; '.join(changes[:3])}: the change happens at trace "
                         f"time only, compiled calls never run line {t['line']} again")
    if not g.ran(t):
        return g.not_reached(t)
    return g.clean(t, "changing global state")


def _perturb(v, depth: int = 0):
    """A different value of the same kind, or None."""
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return not v
    if isinstance(v, numbers.Integral):
        return type(v)(v * 2 + 1)
    if isinstance(v, numbers.Number):
        return type(v)(v * 2 + 1)
    if isinstance(v, (np.ndarray, jax.Array)) and v.dtype.kind in "fiuc":
        return v + 1
    if depth < 2 and isinstance(v, dict):
        out = {k: (_perturb(x, depth + 1) if _perturb(x, depth + 1) is not None else x) for k, x in v.items()}
        return out if any(out[k] is not v[k] for k in v) else None
    if depth < 2 and isinstance(v, (list, tuple)):
        items = [(_perturb(x, depth + 1) if _perturb(x, depth + 1) is not None else x) for x in v]
        if not any(a is not b for a, b in zip(items, v)):
            return None
        return type(v)(items) if isinstance(v, tuple) and not hasattr(v, "_fields") else (
            type(v)(*items) if hasattr(v, "_fields") else items)
    return None


def _same_program(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if str(a.jaxpr) != str(b.jaxpr):
        return False
    if len(a.consts) != len(b.consts):
        return False
    for x, y in zip(a.consts, b.consts):
        try:
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        except Exception:
            if x is not y:
                return False
    return True


def s_global_read(t: dict, g: Group) -> dict:
    base = g.base()
    if not g.ran(t):
        return g.not_reached(t)
    mod = g.c.module
    tried = []
    for name in t["names"]:
        parts = name.split(".")
        if parts[0] not in vars(mod) or parts[0] in ("self", "cls"):
            continue
        holder, attr = (mod, parts[0]) if len(parts) == 1 else (getattr(mod, parts[0], None), parts[1])
        if holder is None or not hasattr(holder, attr):
            continue
        old = getattr(holder, attr)
        if callable(old) or isinstance(old, type(os)):
            continue
        new = _perturb(old)
        if new is None:
            continue
        shown = ".".join(parts[:2])
        try:
            setattr(holder, attr, new)
        except Exception:
            continue
        try:
            other = g.retrace()
        finally:
            setattr(holder, attr, old)
            jax.clear_caches()
        tried.append(shown)
        differs = (other.error is None) != (base.error is None) or not _same_program(base.jaxpr, other.jaxpr)
        if differs:
            return confirmed(f"global `{shown}` is read at trace time and baked into the program: re-tracing "
                             f"`{g.name}` after changing it ({describe_value(old)} → {describe_value(new)}) gives a "
                             f"different program, while an already-compiled call keeps the old value")
    if not tried:
        return unreached(f"no global number or array on line {t['line']} that could be varied")
    if base.error is not None:
        return not_confirmed(f"changing {', '.join(f'`{n}`' for n in tried)} does not change the traced program "
                             f"(tracing failed {base.error.where()}: {base.error.short()})")
    return not_confirmed(f"changing {', '.join(f'`{n}`' for n in tried)} does not change the program traced "
                         f"from `{g.name}`")


def s_impure_call(t: dict, g: Group) -> dict:
    base = g.base()
    recs = [r for r in base.probe.impure if _in_span(r["line"], t)]
    if recs:
        names = sorted({r["name"] for r in recs})
        other = g.memo("retrace", lambda: g.retrace())
        if base.error is None and other.error is None and not _same_program(base.jaxpr, other.jaxpr):
            frozen = ("two traces (with `jax.clear_caches()` between) baked different constants, so each compiled "
                      "program replays one frozen value on every call")
        else:
            frozen = "its result is a trace-time constant of the compiled program"
        return confirmed(f"`{'`, `'.join(names)}` ran at trace time from line {t['line']} "
                         f"({len(recs)} call{'s' if len(recs) != 1 else ''} while tracing `{g.name}`): {frozen}")
    err = base.error
    if err is not None and _in_span(_error_line(err), t):
        return unreached(f"tracing `{g.name}` failed at line {_error_line(err)}: {err.short()}")
    if not g.ran(t):
        return g.not_reached(t)
    return g.clean(t, "calling a clock or Python/NumPy random function")


def s_arg_mutation(t: dict, g: Group) -> dict:
    base = g.base()
    changes = base.observer.changes if base.observer is not None else []
    params = set(g.param_names()) | {p["name"] for p in g.info.get("params", [])}
    named = [p for p in params if p in t["names"]]
    if named:      # only the arguments this line names
        changes = [c for c in changes if c.split("[")[0].split(".")[0] in named]
    if changes and g.ran(t):
        shown = ", ".join(f"`{c}`" for c in changes[:3]) + (f" and {len(changes) - 3} more" if len(changes) > 3 else "")
        return confirmed(f"tracing `{g.name}` replaced {shown} inside the caller's argument; under `jit` the "
                         f"caller's object is not updated (eager code would update it)")
    if not g.ran(t):
        return g.not_reached(t)
    if base.error is not None and not changes:
        return unreached(f"tracing `{g.name}` failed {base.error.where()} before the arguments could be "
                         f"compared: {base.error.short()}")
    return g.clean(t, "changing its arguments")


def s_tracer_leak(t: dict, g: Group) -> dict:
    g.base()
    leaks = g.c.find_tracers(t["names"], g.entry)
    if leaks and g.ran(t):
        return confirmed(f"after tracing `{g.name}`, {'; '.join(leaks[:3])}: a leaked tracer raises "
                         f"UnexpectedTracerError when used later")
    if not g.ran(t):
        return g.not_reached(t)

    def leak_pass():
        jax.clear_caches()
        with jax.checking_leaks():
            return trace(g.entry, g.inputs, g.c.paths, probe=False)
    res = g.memo("leaks", leak_pass)
    if res.error is not None and "Leaked" in res.error.full_message:
        refs = [ln.strip() for ln in res.error.full_message.splitlines() if "is referred to by" in ln]
        named = [r for r in refs if not r.split("is referred to by")[-1].strip().startswith("<")]
        detail = (named or refs or [res.error.message])[0]
        return confirmed(f"`jax.checking_leaks()` reports a leaked tracer while tracing `{g.name}`: {detail}")
    return g.clean(t, "leaking a tracer")


def s_key_reuse(t: dict, g: Group) -> dict:
    def reuse_pass():
        jax.clear_caches()
        old_flag = jax.config.jax_debug_key_reuse
        patched = []
        legacy = jax.random.PRNGKey
        patched.append((jax.random, "PRNGKey", legacy))
        jax.random.PRNGKey = jax.random.key
        for k, v in list(vars(g.c.module).items()):
            if v is legacy:
                patched.append((g.c.module, k, v))
                setattr(g.c.module, k, jax.random.key)
        jax.config.update("jax_debug_key_reuse", True)
        try:
            return trace(g.entry, g.inputs, g.c.paths, key_wrap=True)
        finally:
            jax.config.update("jax_debug_key_reuse", old_flag)
            for owner, name, value in patched:
                setattr(owner, name, value)
            jax.clear_caches()
    res = g.memo("key-reuse", reuse_pass)
    err = res.error
    if err is not None and "KeyReuseError" in err.mro:
        where = err.cause_lines or err.lines
        if any(_in_span(ln, t) for ln in where):
            return confirmed(f"with `jax_debug_key_reuse`, tracing `{g.name}` raised KeyReuseError "
                             f"({err.message}); the key is consumed again at line {t['line']}")
        via = set(t.get("via") or ())
        hit = [ln for ln in where if ln in via]
        if hit and "body" in err.message and res.probe.ran(t["line"], t["end_line"]):
            return confirmed(f"with `jax_debug_key_reuse`, tracing `{g.name}` raised KeyReuseError at line "
                             f"{hit[-1]} ({err.message.rstrip(':')}): the key used at line {t['line']} is the "
                             f"same in every iteration")
        if res.probe.ran(t["line"], t["end_line"]):
            return not_confirmed(f"`jax_debug_key_reuse` reports a reused key at line "
                                 f"{where[-1] if where else '?'}, not at line {t['line']}")
    if not res.probe.ran(t["line"], t["end_line"]):
        if err is not None:
            return unreached(f"tracing `{g.name}` with typed keys failed before reaching line {t['line']}: "
                             f"{err.short()} ({err.where()})")
        return unreached(f"line {t['line']} did not run while tracing `{g.name}` with inputs {g.inputs.describe()}")
    if err is not None:
        return unreached(f"tracing `{g.name}` with typed keys failed {err.where()}: {err.short()}")
    return not_confirmed(f"`jax_debug_key_reuse` found no reused key while tracing `{g.name}` "
                         f"with inputs {g.inputs.describe()}")


def s_unrolled_loop(t: dict, g: Group) -> dict:
    base = g.base()
    loop = t["extra"].get("loop") or {"line": t["line"]}
    hits = base.probe.lines.get(loop["line"], 0)
    if not hits:
        return g.not_reached(t)
    if base.error is not None:
        return unreached(f"tracing `{g.name}` failed {base.error.where()}: {base.error.short()}")
    iters = max(hits - 1, 0)
    eqns = count_eqns(base.jaxpr.jaxpr)
    secs, cerr = g.compile()
    compile_txt = f", {secs:.2f} s to compile" if secs is not None else ""
    threshold = g.c.job["config"].get("unrolled_loop_threshold", 16)
    smaller = ""
    trip = loop.get("trip") or {}
    if iters >= 2 and trip.get("kind") in ("global", "param"):
        n2 = max(1, iters // 10 if iters >= 20 else iters // 2)
        other = _retrace_with_trip(g, trip, n2)
        if other is not None and other.error is None:
            e2 = count_eqns(other.jaxpr.jaxpr)
            t0 = time.perf_counter()
            try:
                other.traced.lower().compile()
                c2 = f", {time.perf_counter() - t0:.2f} s"
            except Exception:
                c2 = ""
            smaller = f" ({n2} iteration{'s' if n2 != 1 else ''}: {e2} equations{c2})"
    summary = f"{iters} iteration{'s' if iters != 1 else ''} → {eqns} equations{compile_txt}{smaller}"
    if iters >= threshold:
        return confirmed(f"tracing `{g.name}` unrolled the loop at line {loop['line']}: {summary}")
    return not_confirmed(f"the loop at line {loop['line']} ran {iters} time{'s' if iters != 1 else ''} under "
                         f"tracing ({eqns} equations{compile_txt}), below the threshold of {threshold}")


def _retrace_with_trip(g: Group, trip: dict, n: int) -> Optional[TraceResult]:
    name = trip["name"]
    if trip["kind"] == "global":
        mod = g.c.module
        if name not in vars(mod):
            return None
        old = getattr(mod, name)
        setattr(mod, name, n)
        try:
            return g.retrace()
        finally:
            setattr(mod, name, old)
            jax.clear_caches()
    kwargs = dict(g.inputs.kwargs)
    args = list(g.inputs.args)
    names = g.param_names()
    if name in names and names.index(name) < len(args):
        args[names.index(name)] = n
    else:
        kwargs[name] = n
    saved = g.inputs
    g.inputs = Inputs(args, kwargs, saved.source)
    try:
        return g.retrace()
    finally:
        g.inputs = saved
        jax.clear_caches()


def _step_counts(g: Group, calls: int = 3):
    """Compilations during each of ``calls`` real calls of the step, and for the whole step jitted."""
    rec = g.c.step_records.get(g.qual)
    if rec is not None:                       # observed by the harness (calls that compiled something)
        counts, names = list(rec["counts"]), list(rec["names"])
        inputs = rec.get("inputs")
    else:
        inputs = g.inputs
        conc = inputs.concrete()
        block(jax.tree_util.tree_leaves((conc.args, conc.kwargs)))
        jax.clear_caches()     # count from a cold cache, whatever ran before in this process
        counts, names = [], []
        for _ in range(calls):
            with CompileCounter() as c:
                block(g.entry.call(*conc.args, **conc.kwargs))
            counts.append(c.count)
            names.append(list(c.names))
    whole, whole_err = None, None
    if inputs is not None:
        jax.clear_caches()
        call, dyn = make_call(g.entry, inputs)
        try:
            with CompileCounter() as c:
                jax.jit(call).trace(*dyn).lower().compile()
            whole = c.count
        except Exception as exc:
            whole_err = ErrorInfo(exc, g.c.paths)
    return counts, names, whole, whole_err


def s_compiles(t: dict, g: Group) -> dict:
    try:
        counts, names, whole, whole_err = g.memo("steps", lambda: _step_counts(g))
    except Exception as exc:
        info = ErrorInfo(exc, g.c.paths)
        return unreached(f"calling the step `{g.name}` failed {info.where()}: {info.short()}")
    if not counts:
        return unreached(f"the step `{g.name}` was not called")
    jit_name = t["extra"].get("jit_name")
    whole_txt = (f"; jitting the whole step compiles {whole}" if whole is not None else "")
    n = len(counts)
    observed = g.qual in g.c.step_records
    calls = f"during the command, {n} calls of `{g.name}`" if observed else f"calling `{g.name}` {n} times"
    if t["code"] == "JAX502":
        later = counts[1:]
        if any(later):
            return confirmed(f"{calls} compiled {', '.join(map(str, counts))} executables: "
                             f"the `jax.jit` at line {t['line']} builds a new function each time and recompiles"
                             f"{whole_txt}")
        first = names[0] if names else []
        dup = sorted({x for x in first if first.count(x) > 1 and (not jit_name or jit_name in x)})
        if dup:
            k = first.count(dup[0])
            return confirmed(f"one call of `{g.name}` compiled `{dup[0]}` {k} times (once per loop iteration)"
                             f"{whole_txt}")
        return not_confirmed(f"{calls} compiled {counts[0]} executable"
                             f"{'s' if counts[0] != 1 else ''}, then nothing: no recompilation")
    # JAX501: inner jit inside an eager step
    first = counts[0]
    if whole is None:
        why = whole_err.short() if whole_err is not None else "no recorded inputs"
        return unreached(f"the first call of `{g.name}` compiled {first} executables, but the whole step could "
                         f"not be jitted to compare: {why}")
    if first > whole:
        top = ", ".join(sorted(set(names[0]))[:4]) if names else ""
        return confirmed(f"the first call of `{g.name}` compiled {first} executables ({top}) and every call "
                         f"dispatches them one by one; {whole} after jitting the whole step")
    return not_confirmed(f"the first call of `{g.name}` compiled {first} executable{'s' if first != 1 else ''}, "
                         f"no more than the whole step jitted ({whole})")


STRATEGIES: Dict[str, Callable[[dict, Group], dict]] = {
    "trace-error": s_trace_error,
    "print": s_print,
    "global-write": s_global_write,
    "global-read": s_global_read,
    "impure-call": s_impure_call,
    "arg-mutation": s_arg_mutation,
    "tracer-leak": s_tracer_leak,
    "key-reuse": s_key_reuse,
    "unrolled-loop": s_unrolled_loop,
    "compiles": s_compiles,
}
assert set(R.STRATEGY.values()) <= set(STRATEGIES)


# ------------------------------------------------------------ confirmer
class Confirmer:
    def __init__(self, job: dict, module, emit: Callable[[dict], None], *,
                 signatures: Optional[Dict[str, List[Tuple[Callable, Inputs]]]] = None,
                 step_records: Optional[Dict[str, dict]] = None,
                 run_errors: Optional[List[ErrorInfo]] = None,
                 phase: Callable[[str], None] = lambda s: None,
                 harness_only: bool = False, guard: Optional[Callable] = None):
        self.job = job
        self.module = module
        self.emit = emit
        self.phase = phase
        path = job["path"]
        self.paths = {path, os.path.realpath(path)}
        self.signatures = signatures or {}
        self.step_records = step_records or {}
        self.run_errors = run_errors or []
        self.harness_only = harness_only
        self.guard = guard
        self._entries: Dict[str, object] = {}
        self._inputs: Dict[str, object] = {}

    # -- globals / attributes
    def _lookup(self, name: str, entry: Entry):
        parts = name.split(".")
        if parts[0] == "self":
            obj = entry.instance
            if obj is None or len(parts) < 2:
                return None
            return (obj, parts[1]) if hasattr(obj, parts[1]) else None
        if parts[0] not in vars(self.module):
            return None
        val = vars(self.module)[parts[0]]
        if callable(val) and not hasattr(val, "__dict__") or isinstance(val, (type, type(os))):
            return None
        return (self.module, parts[0])

    @staticmethod
    def _state(v):
        if isinstance(v, (list, tuple, set, frozenset)) or type(v).__name__ == "deque":
            return ("seq", len(v), tuple(id(x) for x in list(v)[:200]))
        if isinstance(v, dict):
            return ("dict", len(v), tuple((repr(k), id(x)) for k, x in list(v.items())[:200]))
        d = getattr(v, "__dict__", None)
        if isinstance(d, dict) and not callable(v):
            return ("obj", tuple(sorted((k, id(x)) for k, x in d.items())))
        return ("id", id(v))

    def snapshot(self, names: Sequence[str], entry: Entry) -> Dict[str, object]:
        out = {}
        for n in names:
            loc = self._lookup(n, entry)
            if loc is None:
                continue
            owner, attr = loc
            try:
                v = getattr(owner, attr)
            except Exception:
                continue
            key = f"{'self.' if owner is entry.instance and owner is not self.module else ''}{attr}"
            out[key] = (id(v), self._state(v), v)
        return out

    @staticmethod
    def diff(before: Dict[str, object], after: Dict[str, object]) -> List[str]:
        out = []
        for k, (vid, state, val) in before.items():
            if k not in after:
                continue
            vid2, state2, val2 = after[k]
            if vid != vid2:
                out.append(f"`{k}` ({describe_value(val)} → {describe_value(val2)})")
            elif state != state2:
                if state[0] in ("seq", "dict") and state[1] != state2[1]:
                    out.append(f"`{k}` ({state[1]} → {state2[1]} items)")
                else:
                    out.append(f"`{k}` (modified in place)")
        return out

    def find_tracers(self, names: Sequence[str], entry: Entry) -> List[str]:
        from .session import _has_tracer
        out = []
        for n in names:
            loc = self._lookup(n, entry)
            if loc is None:
                continue
            owner, attr = loc
            try:
                v = getattr(owner, attr)
            except Exception:
                continue
            found = _has_tracer(v)
            if found and not isinstance(v, str):
                shown = f"self.{attr}" if owner is entry.instance else attr
                text = f"`{shown}` holds a tracer, {found}"
                if text not in out:
                    out.append(text)
        return out

    # -- entries and inputs
    def entry(self, qual: str) -> Entry:
        if qual not in self._entries and self.signatures.get(qual) and self.signatures[qual][0][0] is not None:
            fn = self.signatures[qual][0][0]      # the function the program itself passed to jax.jit
            self._entries[qual] = Entry(qual, fn, getattr(inspect.unwrap(fn), "__self__", None), fn)
        if qual not in self._entries:
            try:
                self._entries[qual] = resolve_entry(self.module, self.job["entries"][qual], self.job["config"])
            except Unresolved as exc:
                self._entries[qual] = exc
            except Exception as exc:
                self._entries[qual] = Unresolved(f"cannot reach `{qual}`: {type(exc).__name__}: {_first_line(exc)}")
        v = self._entries[qual]
        if isinstance(v, Exception):
            raise v
        return v

    def inputs(self, qual: str, entry: Entry) -> Inputs:
        if qual not in self._inputs:
            info = self.job["entries"][qual]
            try:
                sig = self.signatures.get(qual)
                if sig:
                    fn, inp = sig[0]
                    if fn is not None:
                        entry.call = fn
                    self._inputs[qual] = inp
                elif self.harness_only:
                    raise NoInputs(f"`{qual}` was not called through `jax.jit` during the command")
                elif info.get("declared") is not None:
                    self._inputs[qual] = inputs_from_spec(info["declared"])
                else:
                    self._inputs[qual] = inputs_from_params(info["params"], f"`{qual}`")
            except NoInputs as exc:
                self._inputs[qual] = exc
            except Exception as exc:
                self._inputs[qual] = NoInputs(f"no inputs for `{qual}`: {type(exc).__name__}: {_first_line(exc)}")
        v = self._inputs[qual]
        if isinstance(v, Exception):
            raise v
        return v

    # -- the run
    def group(self, qual: str) -> Group:
        g = self._groups.get(qual)
        if g is None:
            entry = self.entry(qual)
            inputs = self.inputs(qual, entry)
            g = self._groups[qual] = Group(self, qual, self.job["entries"][qual], entry, inputs)
        return g

    def _judge(self, t: dict, group: Group) -> dict:
        self.phase(f"confirming {t['code']} at line {t['line']} via `{group.qual}`")
        try:
            if self.guard is not None:
                with self.guard():
                    verdict = STRATEGIES[R.STRATEGY[t["code"]]](t, group)
            else:
                verdict = STRATEGIES[R.STRATEGY[t["code"]]](t, group)
        except TimeoutError as exc:
            verdict = unreached(f"confirmation {exc}")
        except Exception as exc:  # a bug here must not lose the other findings
            info = ErrorInfo(exc, self.paths)
            verdict = unreached(f"confirmation crashed: {info.short()}")
        verdict["entry"] = f"{self.job.get('module') or os.path.basename(self.job['path'])}:{group.qual}"
        verdict["inputs"] = f"{group.inputs.source} {group.inputs.describe()}"
        return verdict

    def run(self, targets: Optional[Sequence[dict]] = None) -> None:
        targets = list(targets if targets is not None else self.job["targets"])
        self._groups: Dict[str, Group] = {}
        self.targets_by_qual: Dict[str, List[dict]] = {}
        for t in targets:
            for q in t["entries"]:
                self.targets_by_qual.setdefault(q, []).append(t)
        for t in targets:
            t0 = time.perf_counter()
            verdict = self._early(t)
            if verdict is None:
                reasons: List[str] = []
                first_unreached = None
                for qual in t["entries"]:
                    try:
                        group = self.group(qual)
                    except (Unresolved, NoInputs) as exc:
                        reasons.append(str(exc))
                        continue
                    group.targets.append(t)
                    v = self._judge(t, group)
                    if v.pop("retry", False):
                        first_unreached = first_unreached or v
                        continue
                    verdict = v
                    break
                if verdict is None:
                    verdict = first_unreached
                if verdict is None:
                    why = reasons[0] if reasons else "no entry point"
                    if len(t["entries"]) > 1:
                        why += f" (also tried {', '.join(f'`{q}`' for q in t['entries'][1:])})"
                    verdict = unreached(why)
            verdict["id"] = t["id"]
            verdict["seconds"] = round(time.perf_counter() - t0, 4)
            self.emit(verdict)

    def _early(self, t: dict) -> Optional[dict]:
        for err in self.run_errors:      # harness: an error the real run raised at this line
            v = _run_error_verdict(t, err)
            if v is not None:
                return v
        if t.get("unreached"):
            return unreached(t["unreached"])
        if not R.supported(t["code"]):
            return unreached(f"no runtime check for {t['code']} yet")
        if t.get("module_level"):
            return unreached("module-level code: not inside a function that can be traced")
        if not t["entries"]:
            return unreached("no entry point: the flagged code is not in a function reachable by getattr")
        return None


def _run_error_verdict(t: dict, err: ErrorInfo) -> Optional[dict]:
    strategy = R.STRATEGY.get(t["code"])
    line = _error_line(err)
    if not _in_span(line, t):
        return None
    if strategy == "trace-error":
        names, fragments = R.TRACE_ERRORS[t["code"]]
        if err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments):
            return confirmed(f"the run raised {err.type} at line {line}: {err.message}")
    if strategy == "key-reuse" and "KeyReuseError" in err.mro:
        return confirmed(f"the run raised KeyReuseError at line {line}: {err.message}")
    return None


def import_failure_verdicts(job: dict, err: ErrorInfo) -> List[dict]:
    """Verdicts when the module itself failed to import: an error raised at a
    module-level finding's own line confirms it; everything else is unreached."""
    out = []
    for t in job["targets"]:
        v = _run_error_verdict(t, err) if t.get("module_level") else None
        if v is None:
            v = unreached(f"importing the module failed: {err.short()} ({err.where()})")
        else:
            v["evidence"] = v["evidence"].replace("the run raised", "importing the module raised")
        v["id"] = t["id"]
        out.append(v)
    return out
