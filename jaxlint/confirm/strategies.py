"""One function per runtime signal (worker side; imports JAX).

Each strategy takes a target (one finding, see :mod:`jaxlint.confirm.plan`)
and the :class:`~.group.Group` that reaches it, and returns a verdict:
``confirmed`` with evidence, ``not-confirmed`` (traced and compiled
cleanly) or ``unreached`` with the reason.  Rules name their strategy in
their ``confirm`` attribute (:mod:`jaxlint.confirm.rules`).
"""
from __future__ import annotations

import numbers
import os
import time
from typing import Callable, Dict, Optional

import jax
import numpy as np

from . import rules as R
from .group import Group, _error_line, _in_span, confirmed, not_confirmed, unreached
from .probes import STAGED
from .running import s_pmap_sync, s_raises
from .session import (EAGER_LIMIT_S, EAGER_LINE_HITS, SDS, CompileCounter, EnoughRun, ErrorInfo, Inputs, Probe,
                      TraceResult, Tracer, block, count_eqns, describe_value, time_limit,
                      make_call, trace)


def s_trace_error(t: dict, g: Group) -> dict:
    names, fragments = R.trace_errors(t["confirm"])
    err = g.base().error
    if err is not None and _in_span(_error_line(err), t):
        line = _error_line(err)
        if (err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments)) \
                and g.eager:
            return _eager_error(t, g, err, line)
        if err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments):
            if R.claims_tracing(t["confirm"]) and not g.info.get("staged") and g.inputs.source != "harness":
                # nothing here stages the entry (a vmapped function, a module method): constants are
                # traced only under a jit the program may not apply -- the error must come from the
                # tracers the transform puts in, with every other value concrete
                v = g.memo(f"tracers-only:{t['id']}", lambda: _tracers_only(t, g, err))
                if v is not None:
                    return v
            if R.claims_tracing(t["confirm"]) and not R.tracer_specific(err.mro):
                # an error concrete values raise too (`ValueError: The truth value of an array ...`):
                # evidence of tracing only when the same call on concrete values gets past the line
                v = g.memo(f"concrete:{t['id']}", lambda: _discriminate(t, g, err))
                if v is not None:
                    return v
                return confirmed(f"tracing `{g.name}` raised {err.type} at line {line}: {err.message} (the same "
                                 f"call on concrete values runs line {line} without it)")
            return confirmed(f"tracing `{g.name}` raised {err.type} at line {line}: {err.message}")
        v = unreached(f"tracing `{g.name}` failed at line {line} with {err.short()}, "
                      f"not the error {t['code']} predicts")
        v["retry"] = True       # other inputs (a shape that fits) may get past it
        v["failed_line"] = line
        return v
    if not g.ran(t):
        return g.not_reached(t)
    return g.clean(t, "an error")


def _eager_error(t: dict, g: Group, err: ErrorInfo, line: int) -> dict:
    """The predicted error, raised at the line while the entry ran as the program does (concrete
    inputs; any tracer came from the program's own transforms)."""
    ran = f"running `{g.name}` as the program does (concrete inputs, its own transforms)"
    if R.tracer_specific(err.mro) or "Tracer" in err.full_message:
        # only a tracer raises it, or the value it names is one: the program's trace made it
        return confirmed(f"{ran} raised {err.type} at line {line}: {err.message}")
    if not _builtin_error(err) and not R.claims_tracing(t["confirm"]):
        return confirmed(f"{ran} raised {err.type} at line {line}: {err.message}")
    if not R.claims_tracing(t["confirm"]):
        # what the line assigns into (`acc[c] = ...`), read from the failing frame: a tracer of the
        # program's trace, or a JAX array the code made (not one of the inputs we built)
        inputs = {id(x) for x in jax.tree_util.tree_leaves((g.last_inputs.args, g.last_inputs.kwargs))} \
            if getattr(g, "last_inputs", None) is not None else set()
        for name, value in _locals_at(err, t, t["extra"].get("stores") or ()):
            if isinstance(value, Tracer):
                return confirmed(f"{ran} raised {err.type} at line {line} assigning into `{name}`, a tracer of the "
                                 f"program's trace ({describe_value(value)}): {err.message}")
            if isinstance(value, jax.Array) and id(value) not in inputs:
                return confirmed(f"{ran} raised {err.type} at line {line} assigning into `{name}`, a JAX array the "
                                 f"code itself made ({describe_value(value)}): {err.message}")
    v = unreached(f"{ran} raised {err.type} at line {line} on a concrete value (no tracer in it): it says "
                  f"nothing about traced values")
    v["retry"] = True
    return v


def _locals_at(err: ErrorInfo, t: dict, names):
    """``(name, value)`` of ``names`` in the frame of the target file that raised at the flagged line."""
    tb = err.exc.__traceback__ if err.exc is not None else None
    frame = None
    while tb is not None:
        f = tb.tb_frame
        if f.f_code.co_filename in err.paths and _in_span(tb.tb_lineno, t):
            frame = f
        tb = tb.tb_next
    if frame is None:
        return []
    return [(n, frame.f_locals[n]) for n in names if n in frame.f_locals]


def _builtin_error(err: ErrorInfo) -> bool:
    import builtins
    return isinstance(getattr(builtins, err.type, None), type)


def _tracers_only(t: dict, g: Group, err: ErrorInfo) -> Optional[dict]:
    """Run the entry with tracers only where the inputs hold them and nothing staged: ``jax.vmap``
    over a batch of one, eagerly, so operations on concrete values stay concrete.  None when the same
    kind of error is raised at the flagged line, else the ``unreached`` verdict saying why the error
    of the staged trace is no evidence."""
    from .probes import Probe
    from .running import random_inputs
    leaves, treedef = jax.tree_util.tree_flatten((g.inputs.args, g.inputs.kwargs),
                                                 is_leaf=lambda x: isinstance(x, SDS))
    dyn_idx = [i for i, v in enumerate(leaves) if isinstance(v, SDS)]
    if not dyn_idx:
        return _no_tracer(t, g, err)
    batched = [SDS((1,) + tuple(leaves[i].shape), leaves[i].dtype) for i in dyn_idx]
    values = random_inputs(Inputs(batched, {}, g.inputs.source), 0).args
    target = g.entry.call

    def call(*vals):
        ls = list(leaves)
        for i, v in zip(dyn_idx, vals):
            ls[i] = v
        a, k = jax.tree_util.tree_unflatten(treedef, ls)
        target(*a, **k)

    probe = Probe(g.c.paths)
    again = None
    try:
        with probe:
            jax.vmap(call)(*values)
    except (Exception, SystemExit) as exc:
        again = ErrorInfo(exc, g.c.paths)
    line = _error_line(err)
    if again is not None and _error_line(again) == line and (again.type == err.type or
                                                             R.tracer_specific(again.mro)):
        return None
    if again is None and probe.ran(t["line"], t["end_line"]):
        why = "runs without it"
    elif again is not None and probe.ran(t["line"], t["end_line"]):
        why = f"gets past it and fails later: {again.short()} ({again.where()})"
    else:
        why = (f"does not reach it: {again.short()} ({again.where()})" if again is not None else
               "does not reach it")
    v = unreached(f"tracing `{g.name}` under `jax.jit` raised {err.type} at line {line}, but nothing in this module "
                  f"stages `{g.name}` ({g.info.get('basis_why')}), and with tracers only where it gets them (the "
                  f"other values concrete) line {line} {why}; the error came from staging, which depends on "
                  f"how the program calls it")
    v["retry"] = True
    return v


def _no_tracer(t: dict, g: Group, err: ErrorInfo) -> dict:
    line = _error_line(err)
    v = unreached(f"tracing `{g.name}` raised {err.type} at line {line}, but none of its inputs is a value the "
                  f"model proves traced, so the tracer came from staging its constants, which depends on how "
                  f"the program calls `{g.name}`")
    v["retry"] = True
    return v


def _discriminate(t: dict, g: Group, err: ErrorInfo) -> Optional[dict]:
    """Run the entry eagerly (``jax.disable_jit``) on the same inputs made concrete; None when the
    flagged line then runs without ``err``'s kind of error (the traced error came from tracing),
    else the ``unreached`` verdict that says why the error is no evidence."""
    from .probes import Probe
    conc = g.inputs.concrete()
    probe = Probe(g.c.paths)
    again = None
    try:
        with jax.disable_jit(), probe:
            block(g.entry.call(*conc.args, **conc.kwargs))
    except (Exception, SystemExit) as exc:
        again = ErrorInfo(exc, g.c.paths)
    line = _error_line(err)
    if again is not None and _error_line(again) == line and again.type == err.type:
        v = unreached(f"tracing `{g.name}` raised {err.type} at line {line}, but running it on concrete values "
                      f"raises the same error there ({again.message}): it does not come from tracing (these "
                      f"inputs do not fit the code)")
    elif not probe.ran(t["line"], t["end_line"]):
        why = f": {again.short()} ({again.where()})" if again is not None else ""
        v = unreached(f"tracing `{g.name}` raised {err.type} at line {line}, an error concrete values raise too, "
                      f"and running it on concrete values did not reach line {t['line']}{why}, so the two "
                      f"cannot be told apart")
    else:
        return None
    v["retry"] = True       # other inputs (another rank) may show a tracer error
    return v


def s_print(t: dict, g: Group) -> dict:
    base = g.base()
    recs = [r for r in base.probe.prints if _in_span(r["line"], t)]
    with_tracer = [r for r in recs if r["tracer"]]
    if with_tracer:
        r = with_tracer[0]
        if g.eager:
            return confirmed(f"`{r['what']}` ran under the program's own trace while `{g.name}` ran as the program "
                             f"does, and was given a tracer, {r['tracer']}, instead of a value")
        return confirmed(f"`{r['what']}` ran while `{g.name}` was traced (once per compilation, not per call) "
                         f"and was given a tracer, {r['tracer']}, instead of a value")
    err = base.error
    if err is not None and _in_span(_error_line(err), t):
        if "Tracer" in err.full_message or "__format__" in err.full_message:
            return confirmed(f"formatting the traced value failed at trace time: {err.short()}")
        return unreached(f"tracing `{g.name}` failed at line {_error_line(err)}: {err.short()}")
    if not g.ran(t):
        return g.not_reached(t)
    if recs and g.under_trace(t):
        return not_confirmed(f"`{recs[0]['what']}` at line {t['line']} ran at trace time with static values only "
                             f"({', '.join(recs[0]['args'])})")
    return g.clean(t, "printing or logging a tracer")


def s_global_write(t: dict, g: Group) -> dict:
    v = _needs_staging(t, g, "a write made only at trace time")
    if v is not None:
        return v
    g.base()
    mine = {n.split(".")[0] for n in t["names"]} | {".".join(n.split(".")[:2]) for n in t["names"]
                                                    if n.startswith("self.")}
    changes = g.c.diff({k: v for k, v in g._snap_before.items() if k in mine}, g._snap_after)
    if changes and g.ran(t) and g.under_trace(t, STAGED):
        how = (f"running `{g.name}` as the program does, line {t['line']} ran under its trace and changed"
               if g.eager else f"tracing `{g.name}` once changed")
        return confirmed(f"{how} {'; '.join(changes[:3])}: the change happens at trace "
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


def _needs_trace_of_ours(t: dict, g: Group, what: str) -> Optional[dict]:
    """An eager entry cannot show ``what`` (it needs a program traced by us: its jaxpr, its
    arguments); the next entry may."""
    if not g.eager:
        return None
    v = unreached(f"`{g.name}` is not traced in this module, and showing {what} needs a trace of the function "
                  f"the transform is applied to")
    v["retry"] = True
    return v


def _needs_staging(t: dict, g: Group, what: str) -> Optional[dict]:
    """A transform entry nothing here stages (only vmapped): its Python body runs on every call, so
    what happens only at trace time under a staging transform (``what``) cannot show in it -- a jit
    of ours would stage what the program does not."""
    if g.info.get("basis") != "transform" or g.info.get("staged") or g.inputs.source == "harness":
        return None
    v = unreached(f"`{g.name}` is {g.info.get('basis_why')} and nothing here stages it (no `jit`, no `lax` "
                  f"body): it runs its Python code on every call, so {what} would show only under a `jit` the "
                  f"program may not apply")
    v["retry"] = True
    v["inputs_ok"] = True
    return v


def s_global_read(t: dict, g: Group) -> dict:
    v = _needs_trace_of_ours(t, g, "that a global is baked into the program") or \
        _needs_staging(t, g, "a global baked into the program")
    if v is not None:
        return v
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
        # no program was built, with the global changed or not: the claim was not put to the test
        v = unreached(f"tracing `{g.name}` failed {base.error.where()} with or without changing "
                      f"{', '.join(f'`{n}`' for n in tried)}, so no program showed what it bakes in: "
                      f"{base.error.short()}")
        v["failed_line"], v["retry"] = _error_line(base.error), True
        return v
    return not_confirmed(f"changing {', '.join(f'`{n}`' for n in tried)} does not change the program traced "
                         f"from `{g.name}`")


def s_impure_call(t: dict, g: Group) -> dict:
    v = _needs_staging(t, g, "a value frozen at trace time")
    if v is not None:
        return v
    base = g.base()
    recs = [r for r in base.probe.impure if _in_span(r["line"], t)]
    if recs and g.eager and not g.under_trace(t, STAGED):
        recs = []       # called eagerly: a fresh value on every call, as the code intends
    if recs and g.eager:
        names = sorted({r["name"] for r in recs})
        return confirmed(f"`{'`, `'.join(names)}` ran at trace time from line {t['line']} while the program traced "
                         f"it (running `{g.name}` as the program does): its result is a trace-time constant of "
                         f"the compiled program")
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
    v = _needs_trace_of_ours(t, g, "how the traced function changes its arguments")
    if v is not None:
        return v
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
    if g.eager:
        return g.clean(t, "leaking a tracer")

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


def _eager_run(g: Group) -> TraceResult:
    """Run ``g``'s entry as eager code runs: on concrete inputs, the program's own jits as they are."""
    from .probes import Probe
    res = TraceResult()
    conc = g.inputs.concrete()
    res.probe = Probe(g.c.paths)
    t0 = time.perf_counter()
    try:
        with res.probe:
            block(g.entry.call(*conc.args, **conc.kwargs))
    except (Exception, SystemExit) as exc:
        res.error = ErrorInfo(exc, g.c.paths)
    res.seconds = time.perf_counter() - t0
    return res


def s_key_reuse(t: dict, g: Group) -> dict:
    eager = g.info.get("basis") == "eager" and g.inputs.source != "harness"

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
            if eager:      # eager code (a script, a test, a loop): run it, as the program does
                return _eager_run(g)
            return trace(g.entry, g.inputs, g.c.paths, key_wrap=True)
        finally:
            jax.config.update("jax_debug_key_reuse", old_flag)
            for owner, name, value in patched:
                setattr(owner, name, value)
            jax.clear_caches()
    res = g.memo("key-reuse", reuse_pass)
    how = "running" if eager else "tracing"
    err = res.error
    if err is not None and "KeyReuseError" in err.mro:
        where = err.cause_lines or err.lines
        # run eagerly, the reuse raises at the second consumer (its cause points at the first)
        if any(_in_span(ln, t) for ln in where) or (eager and any(_in_span(ln, t) for ln in err.lines)):
            return confirmed(f"with `jax_debug_key_reuse`, {how} `{g.name}` raised KeyReuseError "
                             f"({err.message}); the key is consumed again at line {t['line']}")
        via = set(t.get("via") or ())
        hit = [ln for ln in where if ln in via]
        if hit and "body" in err.message and res.probe.ran(t["line"], t["end_line"]):
            return confirmed(f"with `jax_debug_key_reuse`, {how} `{g.name}` raised KeyReuseError at line "
                             f"{hit[-1]} ({err.message.rstrip(':')}): the key used at line {t['line']} is the "
                             f"same in every iteration")
        if res.probe.ran(t["line"], t["end_line"]) and _first_ran(t, res):
            return not_confirmed(f"`jax_debug_key_reuse` reports a reused key at line "
                                 f"{where[-1] if where else '?'}, not at line {t['line']}")
    if not res.probe.ran(t["line"], t["end_line"]):
        if err is not None:
            v = unreached(f"{how} `{g.name}` with typed keys failed before reaching line {t['line']}: "
                          f"{err.short()} ({err.where()})")
            v["failed_line"] = _error_line(err)
            return v
        return unreached(f"line {t['line']} did not run while {how} `{g.name}` with inputs {g.inputs.describe()}")
    if err is not None:
        return unreached(f"{how} `{g.name}` with typed keys failed {err.where()}: {err.short()}")
    if not _first_ran(t, res):
        # the reuse needs both consumers: without the earlier one this run says nothing
        return unreached(f"line {t['line']} ran, but the earlier consumer of the key at line "
                         f"{t['extra']['first_use']} did not while {how} `{g.name}` with inputs "
                         f"{g.inputs.describe()}, so the reuse could not happen")
    both = " (both consumers ran)" if t["extra"].get("first_use") else ""
    return not_confirmed(f"`jax_debug_key_reuse` found no reused key while {how} `{g.name}` with inputs "
                         f"{g.inputs.describe()}{both}")


def _first_ran(t: dict, res: TraceResult) -> bool:
    """The earlier consumer the finding names ran (findings of a key reused by one line, in a loop,
    name none: the line itself)."""
    first = t["extra"].get("first_use")
    return first is None or bool(res.probe.lines.get(first))


def s_unrolled_loop(t: dict, g: Group) -> dict:
    v = _needs_trace_of_ours(t, g, "the loop's equations") or \
        _needs_staging(t, g, "a loop unrolled into a compiled program")
    if v is not None:
        return v
    base = g.base()
    loop = t["extra"].get("loop") or {"line": t["line"]}
    hits = base.probe.lines.get(loop["line"], 0)
    if not hits:
        return g.not_reached(t)
    if base.error is not None:
        return unreached(f"tracing `{g.name}` failed {base.error.where()}: {base.error.short()}")
    iters = max(hits - 1, 0)
    threshold = g.c.job["config"].get("unrolled_loop_threshold", 16)
    trip = loop.get("trip") or {}
    default = trip.get("default")
    if iters < threshold and trip.get("kind") == "param" and isinstance(default, int) and default > iters:
        # the inputs (a recorded call, say) ran fewer iterations than the count the finding names
        flagged = _retrace_with_trip(g, trip, default, probe=True)
        if flagged is not None and flagged.error is None and flagged.probe.lines.get(loop["line"], 0):
            noted = (f"; the inputs {g.inputs.describe()} ran it {iters} time{'s' if iters != 1 else ''}, "
                     f"so it was traced again with `{trip['name']}={default}` (its default)")
            return _unrolled_verdict(g, t, loop, flagged, threshold, trip, note=noted)
    return _unrolled_verdict(g, t, loop, base, threshold, trip)


MAX_COMPILED_EQNS = 4000     # JAX504: programs larger than this are traced, not compiled


def _unrolled_verdict(g: Group, t: dict, loop: dict, base: TraceResult, threshold: int, trip: dict,
                      note: str = "") -> dict:
    iters = max(base.probe.lines.get(loop["line"], 0) - 1, 0)
    eqns = count_eqns(base.jaxpr.jaxpr)
    secs = None
    if eqns > MAX_COMPILED_EQNS:      # the count already shows it; compiling would take the budget
        compile_txt = f" (not compiled: over {MAX_COMPILED_EQNS} equations)"
    else:
        if base is g.base():
            secs, _ = g.compile()
        else:
            t0 = time.perf_counter()
            try:
                base.traced.lower().compile()
                secs = time.perf_counter() - t0
            except Exception:
                secs = None
        compile_txt = f", {secs:.2f} s to compile" if secs is not None else ""
    smaller = ""
    if iters >= 2 and trip.get("kind") in ("global", "param"):
        n2 = max(1, iters // 10 if iters >= 20 else iters // 2)
        other = _retrace_with_trip(g, trip, n2)
        if other is not None and other.error is None:
            e2 = count_eqns(other.jaxpr.jaxpr)
            t0 = time.perf_counter()
            try:
                if e2 > MAX_COMPILED_EQNS:
                    raise ValueError("too large")
                other.traced.lower().compile()
                c2 = f", {time.perf_counter() - t0:.2f} s"
            except Exception:
                c2 = ""
            smaller = f" ({n2} iteration{'s' if n2 != 1 else ''}: {e2} equations{c2})"
    summary = f"{iters} iteration{'s' if iters != 1 else ''} → {eqns} equations{compile_txt}{smaller}{note}"
    if iters >= threshold and eqns < iters:
        # Python work only (shapes, counters): the loop puts nothing into the program
        return not_confirmed(f"the loop at line {loop['line']} ran {iters} times under tracing but the program "
                             f"has {eqns} equation{'s' if eqns != 1 else ''} in all: nothing of it is unrolled "
                             f"into the compiled program")
    if iters >= threshold:
        return confirmed(f"tracing `{g.name}` unrolled the loop at line {loop['line']}: {summary}")
    return not_confirmed(f"the loop at line {loop['line']} ran {iters} time{'s' if iters != 1 else ''} under "
                         f"tracing ({eqns} equations{compile_txt}), below the threshold of {threshold}")


def _retrace_with_trip(g: Group, trip: dict, n: int, probe: bool = False) -> Optional[TraceResult]:
    name = trip["name"]
    if trip["kind"] == "global":
        mod = g.c.module
        if name not in vars(mod):
            return None
        old = getattr(mod, name)
        setattr(mod, name, n)
        try:
            return g.retrace(probe=probe)
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
    g.inputs = Inputs(args, kwargs, saved.source, saved.names, saved.origins)
    try:
        return g.retrace(probe=probe)
    finally:
        g.inputs = saved
        jax.clear_caches()


def _step_counts(g: Group, calls: int = 3):
    """Compilations during each of ``calls`` real calls of the step, and for the whole step jitted."""
    rec = g.c.step_records.get(g.qual)
    if rec is not None:                       # observed by the harness (calls that compiled something)
        counts, names = list(rec["counts"]), list(rec["names"])
        secs = sum(rec.get("seconds") or [0.0])
        inputs = rec.get("inputs")
    else:
        inputs = g.inputs
        conc = inputs.concrete()
        block(jax.tree_util.tree_leaves((conc.args, conc.kwargs)))
        jax.clear_caches()     # count from a cold cache, whatever ran before in this process
        counts, names, secs = [], [], 0.0
        for _ in range(calls):
            # a step that loops for long ends after a few iterations of its loop: the compilations
            # per iteration show by then
            probe = Probe(g.c.paths, stop_after=EAGER_LINE_HITS)
            with CompileCounter() as c:
                try:
                    with time_limit(EAGER_LIMIT_S), probe:
                        block(g.entry.call(*conc.args, **conc.kwargs))
                except EnoughRun:
                    g.stopped_early = EAGER_LINE_HITS
            counts.append(c.count)
            names.append(list(c.names))
            secs += c.seconds
    whole, whole_err, whole_secs = None, None, 0.0
    if inputs is not None:
        jax.clear_caches()
        call, dyn = make_call(g.entry, inputs)
        probe = Probe(g.c.paths, stop_after=200)
        try:
            with CompileCounter() as c:
                with time_limit(EAGER_LIMIT_S / 2), probe:
                    traced = jax.jit(call).trace(*dyn)
                traced.lower().compile()
            whole, whole_secs = c.count, c.seconds
        except EnoughRun:
            whole_err = "unrolls"          # jitting the whole step would unroll a long Python loop
        except Exception as exc:
            whole_err = ErrorInfo(exc, g.c.paths)
    return counts, names, whole, whole_err, secs, whole_secs


def s_compiles(t: dict, g: Group) -> dict:
    try:
        counts, names, whole, whole_err, secs, whole_secs = g.memo("steps", lambda: _step_counts(g))
    except Exception as exc:
        info = ErrorInfo(exc, g.c.paths)
        return unreached(f"calling the step `{g.name}` failed {info.where()}: {info.short()}")
    if not counts:
        return unreached(f"the step `{g.name}` was not called")
    jit_name = t["extra"].get("jit_name")
    whole_txt = (f"; jitting the whole step compiles {whole} ({whole_secs:.2f} s)" if whole is not None else "")
    spent = f" in {secs:.2f} s of compiling" if secs else ""
    n = len(counts)
    observed = g.qual in g.c.step_records
    calls = f"during the command, {n} calls of `{g.name}`" if observed else f"calling `{g.name}` {n} times"
    if (t["confirm"].get("args") or ["caller"])[0] == "enclosing":      # JAX502: the jit is recreated
        later = counts[1:]
        if any(later):
            return confirmed(f"{calls} compiled {', '.join(map(str, counts))} executables{spent}: "
                             f"the `jax.jit` at line {t['line']} builds a new function each time and recompiles"
                             f"{whole_txt}")
        first = names[0] if names else []
        dup = sorted({x for x in first if first.count(x) > 1 and (not jit_name or jit_name in x)})
        if dup:
            k = first.count(dup[0])
            return confirmed(f"one call of `{g.name}` compiled `{dup[0]}` {k} times (once per loop iteration)"
                             f"{spent}"
                             f"{whole_txt}")
        return not_confirmed(f"{calls} compiled {counts[0]} executable"
                             f"{'s' if counts[0] != 1 else ''}, then nothing: no recompilation")
    # JAX501: inner jit inside an eager step
    first = counts[0]
    if whole is None and whole_err == "unrolls":
        if first > 1:
            top = ", ".join(sorted(set(names[0]))[:4]) if names else ""
            return confirmed(f"the first call of `{g.name}` compiled {first} executables ({top}){spent} and every "
                             f"call dispatches them one by one; jitted whole, the step would be one program (its "
                             f"Python loop unrolled)")
        return not_confirmed(f"the first call of `{g.name}` compiled {first} executable{'s' if first != 1 else ''}")
    if whole is None:
        why = whole_err.short() if whole_err is not None else "no recorded inputs"
        return unreached(f"the first call of `{g.name}` compiled {first} executables, but the whole step could "
                         f"not be jitted to compare: {why}")
    if first > whole:
        top = ", ".join(sorted(set(names[0]))[:4]) if names else ""
        return confirmed(f"the first call of `{g.name}` compiled {first} executables ({top}){spent} and every "
                         f"call dispatches them one by one; {whole} after jitting the whole step "
                         f"({whole_secs:.2f} s)")
    return not_confirmed(f"the first call of `{g.name}` compiled {first} executable{'s' if first != 1 else ''}, "
                         f"no more than the whole step jitted ({whole})")


def s_recompiles(t: dict, g: Group) -> dict:
    """JAX505's static value that changes from call to call: judged from the traces a run of the
    program made (``evidence.recompile_verdict``, before any entry is traced); tracing an entry with
    inputs of ours shows nothing about the values the program passes."""
    return unreached("a static value that changes on every call recompiles and raises nothing: only a run of the "
                     "program shows it")


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
    "raises": s_raises,
    "pmap-sync": s_pmap_sync,
    "recompiles": s_recompiles,
}
assert set(R.STRATEGY_NAMES) == set(STRATEGIES)
