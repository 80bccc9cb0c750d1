"""Strategies that run the flagged code on concrete values (worker side; imports JAX).

``raises`` (Flax ``apply`` contracts, non-pytree arguments): the flagged call raises the error the
rule predicts, raised from deeper code (the module's ``__call__``, JAX's argument handling) with
the flagged line as one frame of the traceback.  A flagged call that by its shape raises nothing
(``rngs=`` given, ``mutable=`` given) is checked by running the entry: ``same-rng`` (the dropout
stream of the call draws the same key again and again during one run) and ``updates-kept`` (the
updated collection the call returns reaches a result of the entry, or not).

``pmap-sync`` (JAX601): the entry mapped the way its ``pmap`` maps it, on several devices, with
the same parameters on every device and a different data shard per device; the updated
parameters are compared across devices.  A collective over an axis name nothing binds is traced
the way the module maps it and must raise JAX's ``unbound axis name``.
"""
from __future__ import annotations

import functools
import json
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from . import rules as R
from .group import Group, _in_span, confirmed, not_confirmed, unreached
from .session import SDS, ErrorInfo, Inputs, Probe, Tracer, _out_leaves


# ------------------------------------------------------------ concrete inputs
def _is_key(x) -> bool:
    try:
        return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    except Exception:
        return False


def _random_leaf(x: SDS, key, nonneg: bool = False):
    """A concrete value for one abstract leaf: normal floats (non-negative for optimizer
    states: an Adam second moment must not be negative), small ints, keys."""
    shape = tuple(x.shape)
    if _is_key(x):
        n = int(np.prod(shape)) if shape else 1
        ks = jax.random.split(key, max(n, 1))
        return ks.reshape(shape) if shape else ks[0]
    dt = jnp.dtype(x.dtype)
    if dt.kind == "f" or dt.kind == "c":
        v = jax.random.normal(key, shape, jnp.float32)
        return (jnp.abs(v) * 0.1 if nonneg else v).astype(dt)
    if dt.kind in "iu":
        # 0 or 1: valid as a class label or an index whatever the number of classes
        return (jax.random.randint(key, shape, 0, 2) if not nonneg else jnp.zeros(shape, jnp.int32)).astype(dt)
    if dt.kind == "b":
        return jax.random.bernoulli(key, 0.5, shape)
    return jnp.zeros(shape, dt)


def _flat(inputs: Inputs):
    leaves, treedef = jax.tree_util.tree_flatten((inputs.args, inputs.kwargs), is_leaf=lambda x: isinstance(x, SDS))
    return leaves, treedef


def random_inputs(inputs: Inputs, seed: int) -> Inputs:
    """The inputs with every abstract leaf replaced by random values (zeros would make
    gradients, batch statistics and dropout masks degenerate)."""
    leaves, treedef = _flat(inputs)
    base = jax.random.key(seed)
    out = [_random_leaf(x, jax.random.fold_in(base, i)) if isinstance(x, SDS) else x for i, x in enumerate(leaves)]
    a, k = jax.tree_util.tree_unflatten(treedef, out)
    return Inputs(a, k, inputs.source, inputs.names, inputs.origins)


def _frames_in_span(paths, t: dict) -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename in paths and _in_span(f.f_lineno, t):
            return True
        f = f.f_back
    return False


def _run(g: Group, inputs: Inputs, probe: Optional[Probe] = None):
    """Call the entry on concrete ``inputs``; (output, ErrorInfo or None)."""
    from .session import EAGER_LIMIT_S, EAGER_LINE_HITS, EnoughRun, time_limit
    try:
        with time_limit(EAGER_LIMIT_S):
            if probe is not None:
                probe.stop_after = EAGER_LINE_HITS       # a long loop: a few iterations show it
                with probe:
                    out = g.entry.call(*inputs.args, **inputs.kwargs)
            else:
                out = g.entry.call(*inputs.args, **inputs.kwargs)
            jax.block_until_ready([x for x in jax.tree_util.tree_leaves(out) if isinstance(x, jax.Array)])
        return out, None
    except EnoughRun:
        return None, None
    except (Exception, SystemExit) as exc:
        return None, ErrorInfo(exc, g.c.paths)


# ------------------------------------------------------------ raises
def s_raises(t: dict, g: Group) -> dict:
    names, fragments, checks = R.raises_args(t["confirm"])

    def predicted(err: ErrorInfo) -> bool:
        return bool(err.mro & names) or any(cls in err.mro and frag in err.full_message for cls, frag in fragments)

    base = g.base()
    err = base.error
    at = [ln for ln in err.lines + err.cause_lines if _in_span(ln, t)] if err is not None else []
    if at and predicted(err):
        return confirmed(f"tracing `{g.name}` raised {err.type} from the call at line {at[-1]}: {err.message}")
    kws = t["extra"].get("keywords") or []
    for kw, check in checks.items():
        # a shape that raises nothing (the keyword given here, or a value passed on to an apply
        # elsewhere): its own check runs the entry
        if kw in kws or not t["extra"].get("applies", True):
            return CHECKS[check](t, g)
    if at:
        v = unreached(f"tracing `{g.name}` failed at line {at[-1]} with {err.short()}, "
                      f"not the error {t['code']} predicts")
        v["retry"] = True
        return v
    if not g.ran(t):
        return g.not_reached(t)
    if t["extra"].get("returns"):
        v = _through_transform(t, g, predicted)
        if v is not None:
            return v
        if not t["extra"].get("applies"):
            v = unreached(f"the value returned at line {t['line']} goes through a transform applied outside "
                          f"`{g.name}` (a `vmap`, a loop body), which tracing `{g.name}` alone does not apply")
            v["retry"] = True       # the next entry (the function applying the transform) may show it
            return v
    if g.inputs.source == "synthesized":
        # a value synthesized from its uses (attributes read: a pytree namespace) stands where the
        # code passes an object of its own: a clean run says nothing about that object
        from .session import Namespace
        named = [n for n, v in zip(g.inputs.names, g.inputs.args) if n in t["names"] and isinstance(v, Namespace)]
        named += [k for k, v in g.inputs.kwargs.items() if k in t["names"] and isinstance(v, Namespace)]
        if named:
            return unreached(f"`{named[0]}` (passed at line {t['line']}) was synthesized as an object with the "
                             f"attributes the code reads, a pytree, so these inputs cannot show {t['code']} (the "
                             f"line ran without an error); declare the real inputs in [tool.jaxlint.confirm]")
    if g.inputs.source == "synthesized" and t["extra"].get("applies") and '"kind": "flax"' in json.dumps(
            g.info.get("candidates") or []):
        return unreached(f"the variables passed at line {t['line']} were synthesized as what the module's `init` "
                         f"returns, i.e. assuming the call is right, so these inputs cannot show {t['code']} "
                         f"(the line ran without an error); declare the real inputs in [tool.jaxlint.confirm]")
    return g.clean(t, "an error")


def _through_transform(t: dict, g: Group, predicted) -> Optional[dict]:
    """A flagged ``return`` of a transformed entry: its value goes through the transform
    (``jax.jit`` flattens it), so call the module's transformed function itself."""
    wrapped = getattr(g.c.module, g.qual, None) if "." not in g.qual else None
    if wrapped is None or wrapped is g.entry.function or not callable(wrapped):
        return None
    from .session import Entry, trace
    res = trace(Entry(g.qual, wrapped, g.entry.instance, g.entry.function), g.inputs, g.c.paths)
    err = res.error
    if err is not None and predicted(err) and res.probe.ran(t["line"], t["end_line"]):
        return confirmed(f"calling the transformed `{g.name}` raised {err.type} on the value returned at "
                         f"line {t['line']}: {err.message}")
    if err is None:
        return not_confirmed(f"calling the transformed `{g.name}` took the value returned at line {t['line']} "
                             f"without an error (inputs {g.inputs.describe()})")
    return unreached(f"calling the transformed `{g.name}` failed {err.where()}: {err.short()}")


# -- same-rng: the dropout stream of the flagged call draws the same key again
def _draws(t: dict, g: Group, eager: bool = False):
    """Run ``g``'s entry once on random inputs; the keys the Flax rng streams drew while the flagged
    line was on the stack: ``{(stream, module path): [key bytes, ...]}``, the error, and whether the
    line ran.  A key drawn under a trace is recorded when the compiled program runs (a
    ``jax.debug.callback``), so a jitted step called in a loop records one key per call.  With
    ``eager`` the entry runs with jit disabled (when the jitted run fails on another bug first)."""
    from flax.core import scope as flax_scope
    draws: Dict[tuple, List[Optional[bytes]]] = {}
    real = flax_scope.Scope.make_rng
    paths = g.c.paths

    def record(where, data):
        draws.setdefault(where, []).append(np.asarray(data).tobytes())

    def spy(self, name="params", *a, **k):
        key = real(self, name, *a, **k)
        if _frames_in_span(paths, t):
            where = (name, tuple(getattr(self, "path", ())))
            data = jax.random.key_data(key) if _is_key(key) else key
            if isinstance(data, Tracer):
                jax.debug.callback(functools.partial(record, where), data)
            else:
                record(where, data)
        return key

    probe = Probe(paths)
    flax_scope.Scope.make_rng = spy
    jax.clear_caches()       # traces made before the spy was in place would not call it
    try:
        if eager:
            with jax.disable_jit():
                _, err = _run(g, random_inputs(g.inputs, 0), probe)
        else:
            _, err = _run(g, random_inputs(g.inputs, 0), probe)
        jax.effects_barrier()
    finally:
        flax_scope.Scope.make_rng = real
        jax.clear_caches()
    return draws, err, probe.ran(t["line"], t["end_line"])


def _same_key_verdict(t: dict, draws: Dict[tuple, List[Optional[bytes]]], who: str) -> Optional[dict]:
    repeated = [(k, v) for k, v in draws.items() if len(v) >= 2 and None not in v]
    for (name, path), keys in repeated:
        if len(set(keys)) < len(keys):
            layer = "/".join(path) or "the module"
            return confirmed(f"{who} ran the call at line {t['line']} {len(keys)} times, and `{layer}` drew the "
                             f"same '{name}' key {len(keys) - len(set(keys)) + 1} times: the same dropout mask "
                             f"every step")
    if repeated:
        (name, path), keys = repeated[0]
        return not_confirmed(f"{who} ran the call at line {t['line']} {len(keys)} times, and its '{name}' stream "
                             f"drew a different key each time")
    return None


def _draws_any(t: dict, g: Group):
    """``_draws``, again with jit disabled when the run failed before the line drew a key twice (a
    traced-value bug elsewhere in the step that the eager run does not hit); the last item says so."""
    draws, err, ran = _draws(t, g)
    if err is not None and not any(len(v) >= 2 for v in draws.values()):
        d2, e2, r2 = _draws(t, g, eager=True)
        if any(len(v) >= 2 for v in d2.values()):
            return d2, e2, r2, f" with jit disabled (jitted, it fails first {err.where()}: {err.short()})"
    return draws, err, ran, ""


def s_same_rng(t: dict, g: Group) -> dict:
    draws, err, ran, how = _draws_any(t, g)
    if not ran:
        if err is not None:
            return unreached(f"running `{g.name}` (random inputs) failed before reaching line "
                             f"{t['line']}: {err.short()} ({err.where()})")
        return unreached(f"line {t['line']} did not run when `{g.name}` ran with inputs {g.inputs.describe()}")
    v = _same_key_verdict(t, draws, f"running `{g.name}` once (random inputs){how}")
    if v is not None:
        return v
    # one draw per call: the repetition is across calls, made by a loop that calls the entry
    tried = []
    for qual in t["extra"].get("loop_callers") or ():
        try:
            for cg in g.c.groups(qual):
                cdraws, cerr, cran, chow = _draws_any(t, cg)
                tried.append(qual)
                v = _same_key_verdict(t, cdraws, f"running `{qual}` once (it calls `{g.name}` in a loop; random "
                                                 f"inputs {cg.inputs.describe()}){chow}")
                if v is not None:
                    return v
                if cran:
                    break
        except Exception:       # no inputs for the caller, or it cannot be resolved
            continue
    if err is not None and not draws:
        return unreached(f"running `{g.name}` (random inputs) failed {err.where()}: {err.short()}")
    n = max((len(v) for v in draws.values()), default=0)
    also = (f"; running {', '.join(f'`{q}`' for q in dict.fromkeys(tried))}, which calls it in a loop, did not "
            f"repeat it either") if tried else ""
    return unreached(f"one run of `{g.name}` made the call at line {t['line']} draw {n} key"
                     f"{'s' if n != 1 else ''} per stream; the repetition the finding names is across calls of "
                     f"`{g.name}`, which check mode does not make (harness mode runs the program){also}")


# -- updates-kept: the updated collection the call returns reaches a result, or not
def _perturbed(tree, amount: float):
    return jax.tree_util.tree_map(lambda x: x + amount if hasattr(x, "dtype") and jnp.issubdtype(
        x.dtype, jnp.inexact) else x, tree)


def s_updates_kept(t: dict, g: Group) -> dict:
    # the spy sits on the function ``Module.apply`` calls (looked up at call time), so a bound
    # ``model.apply`` stored before the run (a TrainState's ``apply_fn``) goes through it too
    import flax.linen.module as linen_module
    real = linen_module.apply
    paths = g.c.paths
    state = {"shift": 0.0, "seen": []}

    def spy(fn, module, *a, mutable=False, **k):
        inner = real(fn, module, *a, mutable=mutable, **k)
        if mutable in (None, False):
            return inner

        def run(*args, **kwargs):
            out = inner(*args, **kwargs)
            if isinstance(out, tuple) and len(out) == 2 and _frames_in_span(paths, t):
                state["seen"].append(sorted(out[1]) if hasattr(out[1], "keys") else [])
                return out[0], _perturbed(out[1], state["shift"])
            return out
        return run

    call, _, dyn_idx, _, _ = _dynamic_call(g, g.inputs)
    conc, _ = _flat(random_inputs(g.inputs, 0))
    values = [conc[i] for i in dyn_idx]
    results = []
    linen_module.apply = spy
    try:
        for shift in (0.0, 1000.0):
            state["shift"] = shift
            jax.clear_caches()      # the shift is a constant of the trace: trace again
            try:
                out = _compiled_run(call, values)
            except (Exception, SystemExit) as exc:
                err = ErrorInfo(exc, g.c.paths)
                return unreached(f"running `{g.name}` on random inputs failed {err.where()}: {err.short()}")
            results.append(out)
    finally:
        linen_module.apply = real
        jax.clear_caches()
    if not state["seen"]:
        return unreached(f"the call at line {t['line']} did not run as a Flax `apply` with `mutable=` when "
                         f"`{g.name}` ran with inputs {g.inputs.describe()}")
    cols = ", ".join(f"`{c}`" for c in state["seen"][0]) or "the updated collections"
    a = [np.asarray(x) for x in jax.tree_util.tree_leaves(results[0]) if hasattr(x, "dtype")]
    b = [np.asarray(x) for x in jax.tree_util.tree_leaves(results[1]) if hasattr(x, "dtype")]
    changed = len(a) != len(b) or any(x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")
                                      for x, y in zip(a, b))
    if changed:
        return not_confirmed(f"the updated {cols} returned by the call at line {t['line']} reach the results of "
                             f"`{g.name}`: shifting them by 1000 changes its outputs")
    return confirmed(f"the updated {cols} returned by the call at line {t['line']} reach none of the {len(a)} "
                     f"results of `{g.name}`: shifting them by 1000 leaves every output bit-identical, so the "
                     f"new statistics are discarded and the stored ones never change")


def _compiled_run(call, values):
    """Compile ``call`` afresh and run it on ``values`` (its array results).  A new trace per call is
    the point: the spy's shift is a constant of the trace."""
    out = jax.jit(lambda *v: _out_leaves(call(*v)))(*values)  # noqa: JAX502
    return jax.block_until_ready(out)


CHECKS = {"same-rng": s_same_rng, "updates-kept": s_updates_kept}


# ------------------------------------------------------------ pmap-sync
def s_pmap_sync(t: dict, g: Group) -> dict:
    sites = (t["extra"].get("axes") or {}).get(g.qual) or []
    if t["extra"].get("collective"):
        return _unbound_axis(t, g, sites)
    pm = [s for s in sites if s["kind"] == "pmap"]
    if not pm:
        v = unreached(f"`{g.name}` is not mapped by a `pmap` with a literal axis name in this module")
        v["retry"] = True
        return v
    return _replica_drift(t, g, pm[0]["names"][0])


def _dynamic_call(g: Group, inputs: Inputs):
    """(function of the abstract leaves returning the entry's full output, abstract leaves, their
    indices in the flattened ``(args, kwargs)``, treedef, leaves)."""
    leaves, treedef = _flat(inputs)
    dyn_idx = [i for i, v in enumerate(leaves) if isinstance(v, SDS)]
    target = g.entry.call

    def call(*values):
        ls = list(leaves)
        for i, v in zip(dyn_idx, values):
            ls[i] = v
        a, k = jax.tree_util.tree_unflatten(treedef, ls)
        return target(*a, **k)

    call.__name__ = g.name.replace(".", "_")
    return call, [leaves[i] for i in dyn_idx], dyn_idx, treedef, leaves


def _stacked_sds(dyn: Sequence[SDS], n: int) -> List[SDS]:
    return [SDS((n,) + tuple(x.shape), x.dtype) for x in dyn]


def _unbound_axis(t: dict, g: Group, sites: List[dict]) -> dict:
    n = 2
    how = "`jax.jit`"
    if sites:
        s = sites[0]
        call, dyn, *_ = _dynamic_call(g, g.inputs)
        name = s["names"][0]
        if s["kind"] == "pmap":
            n = min(len(jax.local_devices()), 4)
            how = f"`jax.pmap(axis_name={name!r})` on {n} device{'s' if n != 1 else ''}"
            mapped = jax.pmap(call, axis_name=name)
            probe = Probe(g.c.paths)
            conc = random_inputs(Inputs(_stacked_sds(dyn, n), {}, "synthesized"), 0).args
            try:
                with probe:
                    jax.block_until_ready(mapped(*conc))
                err = None
            except (Exception, SystemExit) as exc:
                err = ErrorInfo(exc, g.c.paths)
        else:
            how = f"`jax.vmap(axis_name={name!r})`"
            probe = Probe(g.c.paths)
            jax.clear_caches()
            try:
                with probe:
                    jax.jit(jax.vmap(call, axis_name=name)).trace(*_stacked_sds(dyn, n))
                err = None
            except (Exception, SystemExit) as exc:
                err = ErrorInfo(exc, g.c.paths)
        ran = probe.ran(t["line"], t["end_line"])
    else:
        base = g.base()
        err, ran = base.error, g.ran(t)
    if err is not None and "NameError" in err.mro and "unbound axis name" in err.full_message:
        at = [ln for ln in err.lines if _in_span(ln, t)]
        if at:
            return confirmed(f"tracing `{g.name}` under {how} raised NameError at line {at[-1]}: {err.message}")
    if not ran:
        if err is not None:
            v = unreached(f"running `{g.name}` under {how} failed before reaching line {t['line']}: "
                          f"{err.short()} ({err.where()})")
        else:
            v = unreached(f"line {t['line']} did not run when `{g.name}` ran under {how}")
        v["retry"] = True
        return v
    if err is not None and any(_in_span(ln, t) for ln in err.lines):
        return unreached(f"`{g.name}` under {how} failed at line {t['line']} with {err.short()}, not an unbound "
                         f"axis name")
    bound = ", ".join(f"`{n}`" for s in sites for n in s["names"]) or "none"
    return not_confirmed(f"the collective at line {t['line']} ran under {how} (axis names bound: {bound}) "
                         f"without an unbound-axis error")


def _structure(tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return treedef, tuple((tuple(x.shape), str(x.dtype)) if hasattr(x, "shape") else repr(x) for x in leaves)


def _is_param_path(where: str) -> bool:
    w = where.lower()
    return any(k in w for k in ("param", "weight", "variables")) and not _is_optimizer_path(where)


def _is_optimizer_path(where: str) -> bool:
    w = where.lower()
    return "opt_state" in w or w.startswith(("opt", "optimizer"))


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference; NaN on both sides counts as equal, on one side as infinite."""
    if not a.size:
        return 0.0
    both = np.isnan(a) & np.isnan(b)
    d = np.where(both, 0.0, np.abs(a - b))
    return float(np.max(np.where(np.isnan(d), np.inf, d)))


def _replica_drift(t: dict, g: Group, axis: str) -> dict:
    n = min(len(jax.local_devices()), 4)
    if n < 2:
        return unreached("only one device is visible to JAX, so there are no replicas to compare (on CPU, "
                         "XLA_FLAGS=--xla_force_host_platform_device_count=4 gives four)")
    inputs = g.inputs
    call, dyn, dyn_idx, treedef, leaves = _dynamic_call(g, inputs)
    # which arguments are state (a result has their structure: the step returns them updated)
    try:
        out_shape = jax.eval_shape(jax.vmap(call, axis_name=axis), *_stacked_sds(dyn, n))
    except Exception as exc:
        info = ErrorInfo(exc, g.c.paths)
        v = unreached(f"tracing `{g.name}` mapped over axis `{axis}` failed {info.where()}: {info.short()}")
        v["retry"] = True
        return v
    per_device = jax.tree_util.tree_map(lambda x: SDS(tuple(x.shape[1:]), x.dtype), out_shape)
    outs = list(per_device) if isinstance(per_device, (tuple, list)) else [per_device]
    out_structs = [_structure(o) for o in outs]
    names = list(inputs.names) + [None] * (len(inputs.args) - len(inputs.names))
    top: List[Tuple[str, object]] = [(names[i] or f"argument {i}", a) for i, a in enumerate(inputs.args)]
    top += list(inputs.kwargs.items())
    is_sds = lambda x: isinstance(x, SDS)     # noqa: E731
    has_arrays = [any(isinstance(x, SDS) for x in jax.tree_util.tree_leaves(v, is_leaf=is_sds)) for _, v in top]
    state = [i for i, (_, v) in enumerate(top) if has_arrays[i] and _structure(v) in out_structs]
    if not state:
        return unreached(f"no result of `{g.name}` has the structure of one of its arguments, so the updated "
                         f"parameters cannot be told from the other results")
    data = [i for i in range(len(top)) if has_arrays[i] and i not in state]
    if not data:        # every argument comes back: the first is the state, the others the data
        state, data = state[:1], [i for i in state[1:]]
    if not data:
        return unreached(f"`{g.name}` takes no data argument to shard across devices")
    # per-device values: state identical on every device, data different per device
    key = jax.random.key(0)
    stacked_top = []
    for i, (_, v) in enumerate(top):
        if i in state:
            one = jax.tree_util.tree_map(
                lambda x, k=i: _random_leaf(x, jax.random.fold_in(key, 1000 + k), nonneg=True)
                if isinstance(x, SDS) else x, v, is_leaf=is_sds)
            stacked_top.append(jax.tree_util.tree_map(
                lambda x: jnp.broadcast_to(x, (n,) + tuple(x.shape)) if hasattr(x, "shape") else x, one))
        else:
            sv = jax.tree_util.tree_map(lambda x: SDS((n,) + tuple(x.shape), x.dtype) if isinstance(x, SDS) else x,
                                        v, is_leaf=is_sds)
            stacked_top.append(random_inputs(Inputs([sv], {}, ""), 2000 + i).args[0])
    nargs = len(inputs.args)
    s_args = stacked_top[:nargs]
    s_kwargs = {k: stacked_top[nargs + j] for j, k in enumerate(inputs.kwargs)}
    s_leaves, _ = jax.tree_util.tree_flatten((tuple(s_args), s_kwargs), is_leaf=is_sds)
    if len(s_leaves) != len(leaves):
        return unreached(f"could not lay the inputs of `{g.name}` out per device")
    conc = [s_leaves[i] for i in dyn_idx]
    probe = Probe(g.c.paths)
    jax.clear_caches()
    try:
        with probe:
            result = jax.pmap(call, axis_name=axis)(*conc)
        jax.block_until_ready(jax.tree_util.tree_leaves(result))
    except (Exception, SystemExit) as exc:
        info = ErrorInfo(exc, g.c.paths)
        v = unreached(f"running `{g.name}` under `jax.pmap(axis_name={axis!r})` on {n} devices failed "
                      f"{info.where()}: {info.short()}")
        v["retry"] = True
        return v
    if not probe.ran(t["line"], t["end_line"]):
        v = unreached(f"line {t['line']} did not run when `{g.name}` ran under `jax.pmap`")
        v["retry"] = True
        return v
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    worst: Optional[tuple] = None
    other: Optional[tuple] = None       # the largest difference outside the parameters (optimizer moments)
    compared = []
    leaves_all = [(i, j, f"{top[i][0]}{jax.tree_util.keystr(path)}")
                  for i in state for j, o in enumerate(results) if out_structs[j] == _structure(top[i][1])
                  for path, _ in jax.tree_util.tree_flatten_with_path(o)[0]]
    has_params = any(_is_param_path(w) for _, _, w in leaves_all)
    for i in state:
        want = _structure(top[i][1])
        for j, o in enumerate(results):
            if out_structs[j] != want:
                continue
            compared.append(top[i][0])
            for path, leaf in jax.tree_util.tree_flatten_with_path(o)[0]:
                arr = np.asarray(leaf)
                if arr.dtype.kind not in "fc" or arr.ndim == 0:
                    continue
                diffs = [_max_diff(arr[d], arr[0]) for d in range(1, n)]
                d = max(diffs) if diffs else 0.0
                where = f"{top[i][0]}{jax.tree_util.keystr(path)}"
                # the parameters decide: optimizer moments built from each device's own gradients may
                # differ while the averaged updates keep the parameters equal
                if (_is_param_path(where) if has_params else not _is_optimizer_path(where)):
                    if worst is None or d > worst[0]:
                        worst = (d, where, 1 + int(np.argmax(diffs)))
                elif other is None or d > other[0]:
                    other = (d, where, 1 + int(np.argmax(diffs)))
            break
    shards = ", ".join(f"`{top[i][0]}`" for i in data)
    kept = ", ".join(f"`{c}`" for c in dict.fromkeys(compared))
    setup = (f"running `{g.name}` under `jax.pmap(axis_name={axis!r})` on {n} {jax.devices()[0].platform} devices "
             f"with the same {kept} on every device and a different shard of {shards} per device")
    if worst is None:
        return unreached(f"{setup} returned no floating-point parameters to compare")
    d, where, dev = worst
    scale = max(1.0, max(float(np.max(np.abs(np.asarray(x)))) for x in jax.tree_util.tree_leaves(result)
                         if hasattr(x, "dtype") and np.asarray(x).size and np.asarray(x).dtype.kind in "fc"))
    if d > 1e-6 * scale:
        return confirmed(f"{setup} returned different `{where}` on each device after one step (largest "
                         f"difference {d:.3g}, between devices 0 and {dev}): the replicas drift apart")
    also = (f"; `{other[1]}` differs (by {other[0]:.3g}): each device keeps its own optimizer state"
            if other is not None and other[0] > 1e-6 * scale else "")
    return not_confirmed(f"{setup} returned the same parameters on every device after one step (largest "
                         f"difference {d:.3g} in `{where}`): the update is synchronized{also}")
