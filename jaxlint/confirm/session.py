"""Tracing machinery used inside the confirmation worker and the harness.

This module imports JAX; only ``jaxlint.confirm.worker`` (a subprocess) and
the harness instrumentation import it.  It turns argument specs into
``jax.ShapeDtypeStruct`` inputs, resolves entry functions in an imported
module, and traces them under a :class:`Probe` that records which lines of
the module ran, ``print``/``logging`` calls, impure calls (clock, Python and
NumPy RNG) and the traceback of any error.
"""
from __future__ import annotations

import functools
import inspect
import time
from typing import Callable, List, Optional, Sequence, Set, Tuple

import jax
import jax.numpy as jnp
import numpy as np

SDS = jax.ShapeDtypeStruct
Tracer = jax.core.Tracer


class NoInputs(Exception):
    """No inputs could be built for an entry (the message says why)."""


class Unresolved(Exception):
    """An entry could not be found or constructed in the imported module."""


# ------------------------------------------------------------ inputs
def _key_sds(shape=()):
    return jax.eval_shape(lambda: jax.random.split(jax.random.key(0), int(np.prod(shape)) or 1).reshape(shape)
                          if shape else jax.random.key(0))


def spec_value(spec: dict, concrete: bool = False):
    """An argument spec -> a ShapeDtypeStruct (or a concrete zero array), a pytree or a static value."""
    t = spec["t"]
    if t == "concrete":
        # a value the model does not prove traced: a host value (a Python scalar, a NumPy array),
        # never a tracer -- and not a JAX array either, which a jit of ours would stage into a tracer
        # at its first operation, where the program has a Python value (a static argument, a shape)
        return spec_value(spec["of"], "host")
    if t == "array":
        shape = tuple(spec["shape"])
        dtype = jnp.dtype(spec["dtype"])
        if concrete == "host":
            if not shape:
                return {"f": 0.5, "c": 0.5, "i": 2, "u": 2, "b": True}.get(dtype.kind, 0)
            return np.zeros(shape, dtype)
        if concrete:
            return jnp.zeros(shape, dtype) if not spec.get("weak") else (
                0.0 if dtype.kind == "f" else 0 if dtype.kind in "iu" else False)
        return SDS(shape, dtype, weak_type=bool(spec.get("weak")))
    if t == "key":
        shape = tuple(spec["shape"])
        if concrete:
            k = jax.random.key(0)
            return jax.random.split(k, int(np.prod(shape))).reshape(shape) if shape else k
        return _key_sds(shape)
    if t == "static":
        return spec["v"]
    if t == "rngs":
        from flax import nnx
        return nnx.Rngs(0)
    if t == "list":
        return [spec_value(s, concrete) for s in spec["items"]]
    if t == "tuple":
        return tuple(spec_value(s, concrete) for s in spec["items"])
    if t == "init":
        return _initialized(spec, concrete)
    if t == "trainstate":
        return _train_state(spec, concrete)
    if t == "factory":
        return _from_factory(spec, concrete)
    if t == "made":             # what a callable the instance's constructor bound returns (`self.reset(key)`)
        return _made(spec)
    if t == "global":           # a module-level value of the module (its own TrainState)
        if not hasattr(MODULE, spec["name"]):
            raise NoInputs(f"`{spec['name']}` is not defined after importing the module")
        value = getattr(MODULE, spec["name"])
        if concrete:
            return value
        return jax.tree_util.tree_map(lambda x: SDS(x.shape, x.dtype) if isinstance(x, (jax.Array, np.ndarray))
                                      else x, value)
    if t == "ns":
        return Namespace(**{k: spec_value(s, concrete) for k, s in spec["items"].items()})
    if t == "pyobj":            # a static argument read by attribute: a plain object, not a pytree
        return PyObject(**{k: spec_value(s, "host") for k, s in spec["items"].items()})
    if t == "dict":
        return {k: spec_value(s, concrete) for k, s in spec["items"].items()}
    raise NoInputs(f"unknown spec {spec!r}")


MODULE = None     # the module being confirmed: "init" specs name its objects
INSTANCE = None   # the instance an entry is a bound callable of: "made" specs call its attributes


def _made(spec: dict):
    """A value the program's own code makes: the instance's ``attr`` (what its constructor bound,
    ``self.reset = jax.jit(reset)``) called on concrete inputs, the element ``pick`` of what it returns
    (``obs, state = env.reset(key)``).  Always a real value: the entries that use it run eagerly."""
    fn = vars(INSTANCE).get(spec["attr"]) if INSTANCE is not None and hasattr(INSTANCE, "__dict__") else None
    if not callable(fn):
        raise NoInputs(f"no `{spec['attr']}` bound on the instance to make an argument with")
    out = fn(*[spec_value(s, True) for s in spec["args"]], **{k: spec_value(v, True) for k, v in spec["kwargs"].items()})
    if spec.get("pick") is not None:
        if not isinstance(out, (tuple, list)) or len(out) <= spec["pick"]:
            raise NoInputs(f"`{spec['attr']}` does not return a tuple with an element {spec['pick']}")
        out = out[spec["pick"]]
    return out


def _initialized(spec: dict, concrete: bool):
    """What ``obj.init(...)`` returns for a module-level Flax module (``{"params": ...}``) or
    optax transformation (its state), as ``ShapeDtypeStruct`` leaves."""
    obj = getattr(MODULE, spec["obj"], None)
    if obj is None or not hasattr(obj, "init"):
        raise NoInputs(f"`{spec['obj']}` has no `init`")
    args = [spec_value(s) for s in spec["args"]]
    if spec["kind"] == "flax":
        rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
        out = jax.eval_shape(lambda *a: obj.init(rngs, *a), *args)
    else:
        out = jax.eval_shape(obj.init, *args)
    if spec.get("pick") is not None:
        if not hasattr(out, "get") or spec["pick"] not in out:
            raise NoInputs(f"`{spec['obj']}.init` returns no {spec['pick']!r} collection")
        out = out[spec["pick"]]
    if concrete:
        out = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype) if isinstance(x, SDS) else x, out)
    return out


def _train_state(spec: dict, concrete: bool):
    """A Flax ``TrainState`` of the module's model and optimizer (``TrainState.create`` through
    ``jax.eval_shape``: the optimizer state is what the transformation's ``init`` makes), with a
    field for every other attribute the code reads (``state.batch_stats``)."""
    from flax.training import train_state
    tx = getattr(MODULE, spec["tx"], None)
    model = getattr(MODULE, spec["model"], None) if spec.get("model") else None
    if tx is None or not hasattr(tx, "init"):
        raise NoInputs(f"`{spec['tx']}` is not an optax transformation")
    items = {k: spec_value(s) for k, s in spec["items"].items()}
    params = items.pop("params")
    cls = _state_class(tuple(sorted(items))) if items else train_state.TrainState
    apply_fn = model.apply if model is not None else None

    def make(p, extra):
        return cls.create(apply_fn=apply_fn, params=p, tx=tx, **extra)
    out = jax.eval_shape(make, params, items)
    if concrete:
        out = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype) if isinstance(x, SDS) else x, out)
    return out


def _from_factory(spec: dict, concrete: bool):
    """What a function of the module returns (``create_train_state(rng)``), through
    ``jax.eval_shape``; static arguments (ints, strings) are closed over."""
    fn = getattr(MODULE, spec["fn"], None)
    if fn is None or not callable(fn):
        raise NoInputs(f"`{spec['fn']}` is not a function of the module")
    leaves, treedef = jax.tree_util.tree_flatten([spec_value(s) for s in spec["args"]],
                                                 is_leaf=lambda x: isinstance(x, SDS))
    dyn_idx = [i for i, v in enumerate(leaves) if isinstance(v, SDS)]

    def call(*values):
        ls = list(leaves)
        for i, v in zip(dyn_idx, values):
            ls[i] = v
        return fn(*jax.tree_util.tree_unflatten(treedef, ls))
    out = jax.eval_shape(call, *[leaves[i] for i in dyn_idx])
    if concrete:
        out = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype) if isinstance(x, SDS) else x, out)
    return out


@functools.lru_cache(maxsize=None)
def _state_class(fields: Tuple[str, ...]):
    import typing

    import flax.struct
    from flax.training import train_state
    ns = {"__annotations__": {f: typing.Any for f in fields}, "__module__": __name__}
    ns.update({f: None for f in fields})
    return flax.struct.dataclass(type("TrainState", (train_state.TrainState,), ns))


@jax.tree_util.register_pytree_with_keys_class
class Namespace:
    """An object with attributes, as a pytree: stands for a synthesized ``state``
    whose uses read ``state.params`` / ``state.step`` (``replace`` as on a Flax
    ``struct.dataclass``)."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def replace(self, **changes) -> "Namespace":
        return Namespace(**{**self.__dict__, **changes})

    def tree_flatten_with_keys(self):
        keys = sorted(self.__dict__)
        return [(jax.tree_util.GetAttrKey(k), self.__dict__[k]) for k in keys], tuple(keys)

    @classmethod
    def tree_unflatten(cls, keys, values):
        return cls(**dict(zip(keys, values)))

    def __repr__(self) -> str:
        return "{" + ", ".join(f".{k}: {describe_value(v)}" for k, v in self.__dict__.items()) + "}"


class PyObject:
    """A synthesized static argument read by attribute (``cfg.depth``): a hashable Python object."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return "object(" + ", ".join(f"{k}={describe_value(v)}" for k, v in self.__dict__.items()) + ")"


def describe_value(v) -> str:
    if isinstance(v, (SDS, jax.Array, Tracer, np.ndarray)) or hasattr(v, "aval"):
        try:
            if isinstance(v, Tracer):
                return str(v.aval.str_short())
            key = jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)
            return f"{'key' if key else jnp.dtype(v.dtype).name}[{','.join(str(d) for d in v.shape)}]"
        except Exception:
            return type(v).__name__
    if isinstance(v, (list, tuple)):
        inner = ", ".join(describe_value(x) for x in v[:6]) + (", ..." if len(v) > 6 else "")
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, (Namespace, PyObject)):
        return repr(v)
    if isinstance(v, dict):
        items = list(v.items())
        inner = ", ".join(f"{k}: {describe_value(x)}" for k, x in items[:6]) + (", ..." if len(items) > 6 else "")
        return "{" + inner + "}"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _role(v) -> str:
    """How an argument enters the trace: "tracer" (it holds abstract leaves the trace makes
    tracers of), "concrete" (real arrays, constants of the trace) or "Python value"."""
    leaves = jax.tree_util.tree_leaves(v, is_leaf=lambda x: isinstance(x, SDS))
    if any(isinstance(x, SDS) for x in leaves):
        return "tracer"
    if any(isinstance(x, (jax.Array, np.ndarray)) for x in leaves):
        return "concrete"
    return "Python value"


class Inputs:
    """Arguments for one entry: a pytree with ``ShapeDtypeStruct`` leaves for
    traced values and plain Python values for static ones.  ``origins`` says where each
    argument came from (by position, then keyword): synthesized, call site, annotation,
    declared, recorded by the harness."""

    def __init__(self, args, kwargs, source: str, names: Sequence[str] = (), origins=None):
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.source = source   # declared | annotations | harness | call site | synthesized
        self.names = list(names)[:len(self.args)]   # positional parameter names, for messages
        self.origins = dict(origins or {})          # position or keyword -> where the value came from

    def _origin(self, key) -> str:
        o = self.origins.get(key) or self.source
        return {"harness": "recorded", "annotations": "annotation"}.get(o, o)

    def describe(self) -> str:
        parts = [f"{n}={describe_value(a)}" if n else describe_value(a)
                 for n, a in zip(self.names + [""] * len(self.args), self.args)]
        parts += [f"{k}={describe_value(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})"

    def provenance(self) -> str:
        """Each argument with how it enters the trace and where it came from:
        ``x=float32[4,4] (tracer, synthesized), n=4 (Python value, call site)``."""
        parts = []
        for i, a in enumerate(self.args):
            n = self.names[i] if i < len(self.names) else f"argument {i}"
            parts.append(f"{n}={describe_value(a)} ({_role(a)}, {self._origin(i)})")
        for k, v in self.kwargs.items():
            parts.append(f"{k}={describe_value(v)} ({_role(v)}, {self._origin(k)})")
        return ", ".join(parts) if parts else "no arguments"

    def concrete(self) -> "Inputs":
        """Real values for a run (eager code, a concrete re-run): abstract leaves and host arrays
        become JAX arrays, as the program's own arrays are."""
        def conv(x):
            if isinstance(x, SDS):
                if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
                    k = jax.random.key(0)
                    return jax.random.split(k, int(np.prod(x.shape))).reshape(x.shape) if x.shape else k
                return jnp.zeros(x.shape, x.dtype)
            if isinstance(x, np.ndarray):
                return jnp.asarray(x)
            return x
        a, k = jax.tree_util.tree_map(conv, (self.args, self.kwargs), is_leaf=lambda x: isinstance(x, SDS))
        return Inputs(a, k, self.source, self.names, self.origins)

    @property
    def any_tracer(self) -> bool:
        return any(isinstance(x, SDS) for x in jax.tree_util.tree_leaves(
            (self.args, self.kwargs), is_leaf=lambda x: isinstance(x, SDS)))


def inputs_from_spec(call_spec: dict, source: str = "declared", names: Sequence[str] = ()) -> Inputs:
    origins = {i: s.get("src") for i, s in enumerate(call_spec["args"]) if s.get("src")}
    origins.update({k: s.get("src") for k, s in call_spec["kwargs"].items() if s.get("src")})
    return Inputs([spec_value(s) for s in call_spec["args"]],
                  {k: spec_value(s) for k, s in call_spec["kwargs"].items()}, source, names, origins)


# ------------------------------------------------------------ entries
def _construct(cls, entry: dict, job_cfg: dict):
    """An instance of ``cls`` for calling a method: declared constructor
    arguments, else defaults, ``rngs`` for Flax NNX and small sizes for
    ``int``-annotated parameters."""
    if entry.get("ctor") is not None:
        inp = inputs_from_spec(entry["ctor"]).concrete()
        return cls(*inp.args, **inp.kwargs)
    kwargs = {}
    given = entry.get("ctor_given") or {}
    for p in entry.get("ctor_params") or ():
        if p["name"] in given:          # what the module's own `Cls(...)` call passes
            kwargs[p["name"]] = spec_value(given[p["name"]], concrete=True)
            continue
        if p["kind"] in ("var", "varkw") or p["has_default"]:
            continue
        spec = p["ann"]
        if p["name"] == "rngs":
            from flax import nnx
            kwargs["rngs"] = nnx.Rngs(0)
        elif spec is not None and spec["t"] == "array" and spec["shape"] == [] and spec.get("weak"):
            kwargs[p["name"]] = {"int32": job_cfg.get("dim_size", 4), "float32": 0.5}.get(spec["dtype"], False)
        elif spec is not None:
            kwargs[p["name"]] = spec_value(spec, concrete=True)
        else:
            raise Unresolved(f"cannot construct `{cls.__name__}`: parameter `{p['name']}` needs a value "
                             f"(declare \"module:{cls.__name__}\" in [tool.jaxlint.confirm])")
    return cls(**kwargs)


class Entry:
    """A resolved entry: ``call(*args, **kwargs)`` runs the flagged code."""

    def __init__(self, name: str, call: Callable, instance=None, function=None):
        self.name = name
        self.call = call
        self.instance = instance
        self.function = function


def resolve_entry(module, entry: dict, job_cfg: dict) -> Entry:
    qual = entry["qualname"]
    owner = entry.get("owner")
    if owner is None:
        obj = getattr(module, qual, None)
        if obj is None:
            raise Unresolved(f"`{qual}` not found in module `{module.__name__}` (defined conditionally or deleted?)")
        if entry.get("as_is"):       # the program's own transformed callable (`step = jax.jit(...)`)
            if not callable(obj):
                raise Unresolved(f"`{qual}` is not callable")
            return Entry(qual, obj, function=None)
        fn = inspect.unwrap(obj) if callable(obj) else obj
        if not callable(fn):
            raise Unresolved(f"`{qual}` is not callable")
        return Entry(qual, fn, function=fn)
    cls = getattr(module, owner, None)
    if cls is None:
        raise Unresolved(f"class `{owner}` not found in module `{module.__name__}`")
    meth_name = entry["attr"] if entry.get("instance_attr") else qual.split(".", 1)[1]
    if entry.get("staticmethod"):
        fn = inspect.unwrap(getattr(cls, meth_name))
        return Entry(qual, fn, function=fn)
    try:
        inst = _construct(cls, entry, job_cfg)
    except Unresolved:
        raise
    except Exception as exc:
        raise Unresolved(f"cannot construct `{owner}()`: {type(exc).__name__}: {_first_line(exc)}") from None
    if entry.get("instance_attr"):   # what the constructor bound (`self.reset = jax.jit(reset)`)
        obj = vars(inst).get(meth_name) if hasattr(inst, "__dict__") else None
        if not callable(obj):
            raise Unresolved(f"`{owner}()` has no callable `{meth_name}` of its own after construction")
        return Entry(qual, obj, inst, None)
    if entry.get("owner_kind") == "linen":
        method = None if meth_name == "__call__" else meth_name

        def call(*a, **k):
            rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
            return inst.init(rngs, *a, method=method, **k)
        raw = inspect.unwrap(getattr(cls, meth_name))
        return Entry(qual, call, inst, raw)
    bound = getattr(inst, meth_name)
    raw = inspect.unwrap(getattr(cls, meth_name))
    unwrapped = inspect.unwrap(bound)
    if unwrapped is not bound and not inspect.ismethod(unwrapped):
        # a jit-wrapped method: call the plain function with the instance
        return Entry(qual, functools.partial(raw, inst), inst, raw)
    return Entry(qual, bound, inst, raw)


from .probes import (EnoughRun, ErrorInfo, Observer, Probe, _first_line, _has_tracer,  # noqa: E402,F401
                     _impure_name, _out_leaves)


def make_call(entry: Entry, inputs: Inputs, *, observer: Optional[Observer] = None,
              key_wrap: bool = False):
    """A function of the dynamic leaves only (static values are closed over)."""
    leaves, treedef = jax.tree_util.tree_flatten((inputs.args, inputs.kwargs),
                                                 is_leaf=lambda x: isinstance(x, SDS))
    dyn_idx = [i for i, v in enumerate(leaves) if isinstance(v, SDS)]
    dyn = [leaves[i] for i in dyn_idx]
    target = entry.call

    def call(*values):
        ls = list(leaves)
        for i, v in zip(dyn_idx, values):
            if key_wrap and _is_raw_key(ls[i]):
                v = jax.random.wrap_key_data(v)
            ls[i] = v
        a, k = jax.tree_util.tree_unflatten(treedef, ls)
        if observer is not None:
            observer.before(a, k)
        out = target(*a, **k)
        if observer is not None:
            observer.after(a, k)
        return _out_leaves(out)

    call.__name__ = entry.name.replace(".", "_")
    return call, dyn


def _is_raw_key(v) -> bool:
    return isinstance(v, SDS) and v.dtype == jnp.uint32 and len(v.shape) >= 1 and v.shape[-1] == 2


def count_eqns(jaxpr) -> int:
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for sub in _subjaxprs(eqn.params):
            n += count_eqns(sub)
    return n


def _subjaxprs(params):
    out = []
    for v in params.values():
        vals = v if isinstance(v, (tuple, list)) else [v]
        for item in vals:
            if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                out.append(item.jaxpr)
            elif hasattr(item, "eqns"):
                out.append(item)
    return out


class TraceResult:
    def __init__(self):
        self.inputs: Optional[Inputs] = None     # the concrete inputs an eager run used
        self.traced = None
        self.error: Optional[ErrorInfo] = None
        self.seconds = 0.0
        self.probe: Optional[Probe] = None
        self.observer: Optional[Observer] = None

    @property
    def jaxpr(self):
        return None if self.traced is None else self.traced.jaxpr


def trace(entry: Entry, inputs: Inputs, paths: Set[str], *, profile: bool = False,
          observer: Optional[Observer] = None, key_wrap: bool = False, probe: bool = True,
          watch: Sequence[int] = ()) -> TraceResult:
    res = TraceResult()
    call, dyn = make_call(entry, inputs, observer=observer, key_wrap=key_wrap)
    res.observer = observer
    p = Probe(paths, profile=profile, watch=watch) if probe else None
    res.probe = p
    t0 = time.perf_counter()
    try:
        if p is not None:
            with p:
                res.traced = jax.jit(call).trace(*dyn)
        else:
            res.traced = jax.jit(call).trace(*dyn)
    except (Exception, SystemExit) as exc:
        res.error = ErrorInfo(exc, paths)
    res.seconds = time.perf_counter() - t0
    return res


EAGER_LIMIT_S = 20.0     # one eager run of an entry (a training loop may run for long)
EAGER_LINE_HITS = 12     # ...which ends once a line of the module has run this often (a long loop)


def run_eagerly(entry: Entry, inputs: Inputs, paths: Set[str], *, profile: bool = False,
                watch: Sequence[int] = (), limit: float = EAGER_LIMIT_S) -> TraceResult:
    """Run an eager entry as the program would: concrete inputs, no jit of ours; only the program's
    own transforms inside it trace anything (the probe records under which trace each watched line
    ran).  Stopped after ``limit`` seconds (a long loop), as an error."""
    res = TraceResult()
    conc = inputs.concrete()
    res.inputs = conc
    res.probe = Probe(paths, profile=profile, watch=watch, stop_after=EAGER_LINE_HITS)
    t0 = time.perf_counter()
    try:
        with time_limit(limit), res.probe:
            out = entry.call(*conc.args, **conc.kwargs)
            for leaf in jax.tree_util.tree_leaves(out):
                if hasattr(leaf, "block_until_ready"):
                    leaf.block_until_ready()
    except EnoughRun:
        pass                # res.probe.stopped says so
    except (Exception, SystemExit) as exc:
        res.error = ErrorInfo(exc, paths)
    res.seconds = time.perf_counter() - t0
    return res


class time_limit:
    """Raise ``TimeoutError`` in the main thread after ``seconds`` (SIGALRM; a no-op elsewhere)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.armed = False

    def __enter__(self):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            def fire(signum, frame):
                raise TimeoutError(f"timed out after {self.seconds:g} s")
            self.old = signal.signal(signal.SIGALRM, fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            import signal
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


class CompileCounter:
    """Counts XLA backend compilations (``jax.monitoring`` duration events)."""

    EVENT = "/jax/core/compile/backend_compile_duration"
    _installed = False
    _active: List["CompileCounter"] = []

    def __init__(self):
        self.names: List[str] = []
        self.seconds = 0.0

    @classmethod
    def _listener(cls, event, duration, **kw):
        if event == cls.EVENT:
            for c in cls._active:
                c.names.append(kw.get("fun_name", "?"))
                c.seconds += duration

    def __enter__(self):
        if not CompileCounter._installed:
            jax.monitoring.register_event_duration_secs_listener(CompileCounter._listener)
            CompileCounter._installed = True
        CompileCounter._active.append(self)
        return self

    def __exit__(self, *exc):
        CompileCounter._active.remove(self)
        return False

    @property
    def count(self) -> int:
        return len(self.names)


def block(x):
    for leaf in jax.tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x
