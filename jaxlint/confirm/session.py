"""Tracing machinery used inside the confirmation worker and the harness.

This module imports JAX; only ``jaxlint.confirm.worker`` (a subprocess) and
the harness instrumentation import it.  It turns argument specs into
``jax.ShapeDtypeStruct`` inputs, resolves entry functions in an imported
module, and traces them under a :class:`Probe` that records which lines of
the module ran, ``print``/``logging`` calls, impure calls (clock, Python and
NumPy RNG) and the traceback of any error.
"""
from __future__ import annotations

import builtins
import collections
import functools
import inspect
import logging
import os
import random as _pyrandom
import sys
import sysconfig
import time
import traceback
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple

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
    if t == "array":
        shape = tuple(spec["shape"])
        dtype = jnp.dtype(spec["dtype"])
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
    if t == "dict":
        return {k: spec_value(s, concrete) for k, s in spec["items"].items()}
    raise NoInputs(f"unknown spec {spec!r}")


MODULE = None     # the module being confirmed: "init" specs name its objects


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
    if isinstance(v, Namespace):
        return repr(v)
    if isinstance(v, dict):
        items = list(v.items())
        inner = ", ".join(f"{k}: {describe_value(x)}" for k, x in items[:6]) + (", ..." if len(items) > 6 else "")
        return "{" + inner + "}"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


class Inputs:
    """Arguments for one entry: a pytree with ``ShapeDtypeStruct`` leaves for
    traced values and plain Python values for static ones."""

    def __init__(self, args, kwargs, source: str, names: Sequence[str] = ()):
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.source = source   # declared | annotations | harness | call site | synthesized
        self.names = list(names)[:len(self.args)]   # positional parameter names, for messages

    def describe(self) -> str:
        parts = [f"{n}={describe_value(a)}" if n else describe_value(a)
                 for n, a in zip(self.names + [""] * len(self.args), self.args)]
        parts += [f"{k}={describe_value(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})"

    def concrete(self) -> "Inputs":
        def conv(x):
            if isinstance(x, SDS):
                if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
                    k = jax.random.key(0)
                    return jax.random.split(k, int(np.prod(x.shape))).reshape(x.shape) if x.shape else k
                return jnp.zeros(x.shape, x.dtype)
            return x
        a, k = jax.tree_util.tree_map(conv, (self.args, self.kwargs), is_leaf=lambda x: isinstance(x, SDS))
        return Inputs(a, k, self.source, self.names)


def inputs_from_spec(call_spec: dict, source: str = "declared", names: Sequence[str] = ()) -> Inputs:
    return Inputs([spec_value(s) for s in call_spec["args"]],
                  {k: spec_value(s) for k, s in call_spec["kwargs"].items()}, source, names)


# ------------------------------------------------------------ entries
def _construct(cls, entry: dict, job_cfg: dict):
    """An instance of ``cls`` for calling a method: declared constructor
    arguments, else defaults, ``rngs`` for Flax NNX and small sizes for
    ``int``-annotated parameters."""
    if entry.get("ctor") is not None:
        inp = inputs_from_spec(entry["ctor"]).concrete()
        return cls(*inp.args, **inp.kwargs)
    kwargs = {}
    for p in entry.get("ctor_params") or ():
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
        fn = inspect.unwrap(obj) if callable(obj) else obj
        if not callable(fn):
            raise Unresolved(f"`{qual}` is not callable")
        return Entry(qual, fn, function=fn)
    cls = getattr(module, owner, None)
    if cls is None:
        raise Unresolved(f"class `{owner}` not found in module `{module.__name__}`")
    meth_name = qual.split(".", 1)[1]
    if entry.get("staticmethod"):
        fn = inspect.unwrap(getattr(cls, meth_name))
        return Entry(qual, fn, function=fn)
    try:
        inst = _construct(cls, entry, job_cfg)
    except Unresolved:
        raise
    except Exception as exc:
        raise Unresolved(f"cannot construct `{owner}()`: {type(exc).__name__}: {_first_line(exc)}") from None
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


def _first_line(exc: BaseException, limit: int = 160) -> str:
    s = str(exc).strip().splitlines()
    s = s[0] if s else ""
    return s if len(s) <= limit else s[:limit - 3] + "..."


# ------------------------------------------------------------ errors
_LIB_DIRS = tuple({os.path.realpath(p) + os.sep for p in
                   (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("purelib"),
                    sysconfig.get_paths().get("platlib"), os.path.dirname(os.path.dirname(jax.__file__)),
                    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                   if p})


class ErrorInfo:
    def __init__(self, exc: BaseException, paths: Set[str]):
        self.exc = exc
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
        if self.site is not None:
            return f"line {self.site}"
        if self.site_elsewhere:
            return self.site_elsewhere
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


class Probe:
    """Instruments one trace: executed lines of the target file, print /
    logging calls and impure calls made from it."""

    def __init__(self, paths: Set[str], profile: bool = False):
        self.paths = set(paths)
        self.profile = profile
        self.lines: collections.Counter = collections.Counter()
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
            self.lines[frame.f_lineno] += 1
        return self._local_trace

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

        def spy_print(*args, **kwargs):
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
        self.traced = None
        self.error: Optional[ErrorInfo] = None
        self.seconds = 0.0
        self.probe: Optional[Probe] = None
        self.observer: Optional[Observer] = None

    @property
    def jaxpr(self):
        return None if self.traced is None else self.traced.jaxpr


def trace(entry: Entry, inputs: Inputs, paths: Set[str], *, profile: bool = False,
          observer: Optional[Observer] = None, key_wrap: bool = False, probe: bool = True) -> TraceResult:
    res = TraceResult()
    call, dyn = make_call(entry, inputs, observer=observer, key_wrap=key_wrap)
    res.observer = observer
    p = Probe(paths, profile=profile) if probe else None
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
