"""What jaxlint knows about JAX, Flax, Equinox and the Python standard library.

Everything here is data, keyed by *qualified* names (``jax.numpy.sum``, never
``jnp.sum``).  The semantic model (``model.py``) reads these tables; rules
should ask the model rather than read the tables directly, except for
rule-specific vocabularies (which calls are impure, which are samplers, ...).
"""
from __future__ import annotations

import functools

from collections.abc import Mapping, Set as AbstractSet
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, Optional, Tuple

# --------------------------------------------------------------------------
# Canonical spellings: several public paths name the same object.
# --------------------------------------------------------------------------
CANONICAL_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("jax.experimental.pjit.pjit", "jax.jit"),
    ("jax.experimental.shard_map.shard_map", "jax.shard_map"),
    ("jax.tree_util.tree_map", "jax.tree.map"),
    ("jax.tree_map", "jax.tree.map"),
    ("jax.tree_util.tree_leaves", "jax.tree.leaves"),
    ("jax.tree_util.tree_structure", "jax.tree.structure"),
    ("jax.tree_util.tree_flatten", "jax.tree.flatten"),
    ("jax._src.numpy", "jax.numpy"),
    ("flax.linen.module.Module", "flax.linen.Module"),
    ("flax.linen.module.compact", "flax.linen.compact"),
    ("flax.nnx.module.Module", "flax.nnx.Module"),
    ("flax.nnx.Module", "flax.nnx.Module"),
    ("equinox._module.Module", "equinox.Module"),
)


@functools.lru_cache(maxsize=8192)
def canonical(name: str) -> str:
    for prefix, repl in CANONICAL_PREFIXES:
        if name == prefix or name.startswith(prefix + "."):
            return repl + name[len(prefix):]
    return name


# --------------------------------------------------------------------------
# Transforms: calls that trace the function they are given.
#
# One record per transform holds everything jaxlint knows about it; every
# other table (``BODY_ARITY``, ``JIT_NAMES``, ``GRAD_NAMES``, the purity and
# PRNG tables, ...) is derived from ``TRANSFORMS`` and read live, so teaching
# jaxlint a transform is one row here.  The record has no defaults: a row
# states every fact (tests/test_transforms.py checks it).
# --------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Transform:
    name: str                       # canonical qualified name
    kind: str                       # jit | grad | vmap | pmap | trace | filter | body
    # where the traced callables are passed
    fun_positions: Tuple[int, ...]  # positional indices of traced callables
    fun_keywords: Tuple[str, ...]   # keywords of traced callables
    list_positions: Tuple[int, ...]  # positional args holding a list of callables (lax.switch)
    # which arguments of the traced function stay static
    static_nums_kw: Tuple[str, ...]   # keywords naming static positional args
    static_names_kw: Tuple[str, ...]  # keywords naming static keyword args
    # lax bodies: how many positional arguments the primitive passes to its body
    # (None: not fixed), or the call's positional args from ``operands_from`` on
    body_arity: Optional[int]
    operands_from: Optional[int]
    # (body parameter index, call argument index) of a loop carry's initial value
    carry_init: Optional[Tuple[int, int]]
    # a loop primitive whose body runs once per step: how the body returns its
    # carry ("first" of a pair, "all", "none": no carry); None: not a loop
    loop: Optional[str]
    jit_like: bool          # makes a compiled callable cached per function (jit, nnx.jit, filter_jit)
    caches_trace: bool      # caches its trace on the function object (later calls reuse it)
    inside_cached_trace: bool  # its function only ever runs inside an enclosing cached trace
    eager: bool             # runs the function on every call unless an enclosing function is staged
    inspects: bool          # traces once on purpose to inspect (shapes, jaxprs)
    differentiates: bool    # computes derivatives of the function
    prng_sees_through: bool  # PRNG analysis: ``T(f)(key)`` evaluates ``f`` with ``key``
    static_checked: bool    # JAX505 checks the static arguments declared on it
    instrumented: bool      # the confirmation harness wraps it to record signatures
    mesh_axes: bool         # binds the axis names of a Mesh, not spelled at the call (shard_map)
    replicates: bool        # data-parallel replicas whose gradients are NOT reduced for you (pmap)
    # adds no tracer of its own: the function (and its derivative rules) runs on the values
    # its caller gives it -- traced exactly when a caller's trace calls it (custom_jvp/vjp;
    # under an eager ``jax.grad`` its rules see concrete arrays)
    values_as_given: bool
    # the named axis it binds: (keyword, positional index or None); None: binds no axis name
    axis_name: Optional[Tuple[str, Optional[int]]]
    # a gradient maker: index of the gradients in the made function's result (None: the
    # whole result), plain and with ``has_aux=True``; None: not a gradient maker
    grad_output: Optional[Tuple[Optional[int], Optional[int]]]
    verb: str               # message text: "<verb> `<label>`"
    label: str              # the short spelling used in messages

    def describe(self) -> str:
        """e.g. "jitted with `jax.jit`", "traced as the body of `lax.scan`"."""
        return f"{self.verb} `{self.label}`"


_FUN = dict(fun_positions=(0,), fun_keywords=("fun", "f"), list_positions=())
_NO_BODY = dict(body_arity=None, operands_from=None, carry_init=None, loop=None)
# transforms that call the function at once with the operands after it (``jax.eval_shape(f,
# *args)``): parameters beyond them keep their (static) defaults
_CALLS_NOW = dict(body_arity=None, operands_from=1, carry_init=None, loop=None)
_NO_STATIC = dict(static_nums_kw=(), static_names_kw=())
_JIT_STATIC = dict(static_nums_kw=("static_argnums",), static_names_kw=("static_argnames",))
_ARGNUMS = dict(static_nums_kw=("static_argnums",), static_names_kw=())
_NONDIFF = dict(static_nums_kw=("nondiff_argnums",), static_names_kw=("nondiff_argnames",))
_PMAP_STATIC = dict(static_nums_kw=("static_broadcasted_argnums",), static_names_kw=())


def _where(fun_positions: Tuple[int, ...], fun_keywords: Tuple[str, ...], list_positions: Tuple[int, ...]) -> dict:
    return dict(fun_positions=fun_positions, fun_keywords=fun_keywords, list_positions=list_positions)


def _lax(body_arity: Optional[int], operands_from: Optional[int], carry_init: Optional[Tuple[int, int]],
         loop: Optional[str]) -> dict:
    return dict(body_arity=body_arity, operands_from=operands_from, carry_init=carry_init, loop=loop)


# the yes/no facts, one column each in a row's ``flags`` (its letter: yes, ``.``: no)
FLAG_COLUMNS = (("J", "jit_like"), ("C", "caches_trace"), ("N", "inside_cached_trace"), ("E", "eager"),
                ("I", "inspects"), ("D", "differentiates"), ("P", "prng_sees_through"),
                ("S", "static_checked"), ("H", "instrumented"), ("M", "mesh_axes"), ("R", "replicates"),
                ("G", "values_as_given"))


def _flags(flags: str) -> Dict[str, bool]:
    if len(flags) != len(FLAG_COLUMNS):
        raise ValueError(f"transform flags {flags!r}: one column per fact, "
                         f"{''.join(c for c, _ in FLAG_COLUMNS)}")
    out = {}
    for ch, (letter, field) in zip(flags, FLAG_COLUMNS):
        if ch not in (letter, "."):
            raise ValueError(f"transform flags {flags!r}: column {field} is {letter!r} or '.'")
        out[field] = ch == letter
    return out


def _T(name: str, kind: str, flags: str, verb: str, label: str, where: dict, static: dict,
       body: dict, axis_name: Optional[Tuple[str, Optional[int]]],
       grad_output: Optional[Tuple[Optional[int], Optional[int]]]) -> Transform:
    """One row.  ``where``, ``static`` and ``body`` are groups of fields: a row
    names one of the groups above or spells out its own."""
    return Transform(name=name, kind=kind, verb=verb, label=label, axis_name=axis_name, grad_output=grad_output,
                     **_flags(flags), **where, **static, **body)


_JIT, _PMAP, _VMAP, _DIFF, _TRACE = "jitted with", "pmapped with", "vmapped with", "differentiated with", "traced with"
_BODY = "traced as the body of"

TRANSFORMS: Dict[str, Transform] = {t.name: t for t in [
    # flags: J jit_like, C caches_trace, N inside_cached_trace, E eager, I inspects,
    #        D differentiates, P prng_sees_through, S static_checked, H instrumented,
    #        M mesh_axes, R replicates, G values_as_given
    #  _T(name, kind, flags, verb, label,
    #     where, static, body, axis_name, grad_output)
    _T("jax.jit", "jit", "JC....PSH...", _JIT, "jax.jit",
       _FUN, _JIT_STATIC, _NO_BODY, None, None),
    _T("jax.pmap", "pmap", ".C....PSH.R.", _PMAP, "jax.pmap",
       _FUN, _PMAP_STATIC, _NO_BODY, ("axis_name", 1), None),
    _T("jax.vmap", "vmap", "......P.H...", _VMAP, "jax.vmap",
       _FUN, _NO_STATIC, _NO_BODY, ("axis_name", 3), None),
    _T("jax.grad", "grad", ".....DP.H...", _DIFF, "jax.grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (None, 0)),
    _T("jax.value_and_grad", "grad", ".....DP.H...", _DIFF, "jax.value_and_grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (1, 1)),
    _T("jax.jacfwd", "grad", ".....DP.H...", _DIFF, "jax.jacfwd",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.jacrev", "grad", ".....DP.H...", _DIFF, "jax.jacrev",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.jacobian", "grad", ".....DP.H...", _DIFF, "jax.jacobian",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.hessian", "grad", ".....DP.H...", _DIFF, "jax.hessian",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.checkpoint", "trace", "..N...P.H...", _TRACE, "jax.checkpoint",
       _FUN, _ARGNUMS, _NO_BODY, None, None),
    _T("jax.remat", "trace", "..N...P.H...", _TRACE, "jax.remat",
       _FUN, _ARGNUMS, _NO_BODY, None, None),
    _T("jax.custom_jvp", "trace", "...E..P....G", _TRACE, "jax.custom_jvp",
       _FUN, _NONDIFF, _NO_BODY, None, None),
    _T("jax.custom_vjp", "trace", "...E..P....G", _TRACE, "jax.custom_vjp",
       _FUN, _NONDIFF, _NO_BODY, None, None),
    _T("jax.shard_map", "trace", "..N...P..M..", _TRACE, "jax.shard_map",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.eval_shape", "trace", "....I.P.....", _TRACE, "jax.eval_shape",
       _FUN, _NO_STATIC, _CALLS_NOW, None, None),
    _T("jax.make_jaxpr", "trace", "....I.P.....", _TRACE, "jax.make_jaxpr",
       _FUN, _JIT_STATIC, _NO_BODY, None, None),
    _T("jax.jvp", "trace", "...E..P.....", _TRACE, "jax.jvp",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("jax.vjp", "trace", "...E..P.....", _TRACE, "jax.vjp",
       _FUN, _NO_STATIC, _CALLS_NOW, None, None),
    _T("jax.linearize", "trace", "...E..P.....", _TRACE, "jax.linearize",
       _FUN, _NO_STATIC, _CALLS_NOW, None, None),
    # (jax.named_scope is not a transform)
    _T("equinox.filter_jit", "filter", "JC....P.H...", _TRACE, "eqx.filter_jit",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("equinox.filter_grad", "filter", ".....DP.H...", _TRACE, "eqx.filter_grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (None, 0)),
    _T("equinox.filter_value_and_grad", "filter", ".....DP.H...", _TRACE, "eqx.filter_value_and_grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (1, 1)),
    _T("equinox.filter_vmap", "filter", "......P.H...", _TRACE, "eqx.filter_vmap",
       _FUN, _NO_STATIC, _NO_BODY, ("axis_name", None), None),
    _T("equinox.filter_pmap", "filter", ".C....P.H.R.", _TRACE, "eqx.filter_pmap",
       _FUN, _NO_STATIC, _NO_BODY, ("axis_name", None), None),
    _T("equinox.filter_checkpoint", "filter", "......P.....", _TRACE, "eqx.filter_checkpoint",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("flax.nnx.jit", "jit", "JC....PSH...", _JIT, "nnx.jit",
       _FUN, _JIT_STATIC, _NO_BODY, None, None),
    _T("flax.nnx.grad", "grad", ".....DP.H...", _DIFF, "nnx.grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (None, 0)),
    _T("flax.nnx.value_and_grad", "grad", ".....DP.H...", _DIFF, "nnx.value_and_grad",
       _FUN, _NO_STATIC, _NO_BODY, None, (1, 1)),
    _T("flax.nnx.vmap", "vmap", "......P.H...", _VMAP, "nnx.vmap",
       _FUN, _NO_STATIC, _NO_BODY, ("axis_name", None), None),
    _T("flax.nnx.scan", "trace", "..N...P.H...", _TRACE, "nnx.scan",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("flax.nnx.remat", "trace", "..N...P.....", _TRACE, "nnx.remat",
       _FUN, _NO_STATIC, _NO_BODY, None, None),
    _T("flax.nnx.pmap", "pmap", ".C....P.H.R.", _PMAP, "nnx.pmap",
       _FUN, _NO_STATIC, _NO_BODY, ("axis_name", 1), None),
    _T("flax.linen.jit", "trace", "..N...P.....", _TRACE, "nn.jit",
       _FUN, _JIT_STATIC, _NO_BODY, None, None),
    _T("flax.linen.remat", "trace", "..N...P.....", _TRACE, "nn.remat",
       _FUN, _ARGNUMS, _NO_BODY, None, None),
    _T("flax.linen.checkpoint", "trace", "..N...P.....", _TRACE, "nn.checkpoint",
       _FUN, _ARGNUMS, _NO_BODY, None, None),
    # structured control flow: bodies are always traced, even outside jit.
    #   _where(fun positions, fun keywords, list positions); _lax(arity, operands from, carry init, loop)
    _T("jax.lax.scan", "body", ".C....P.H...", _BODY, "lax.scan",
       _where((0,), ("f",), ()), _NO_STATIC, _lax(2, None, (0, 1), "first"), None, None),
    _T("jax.lax.fori_loop", "body", ".C....P.H...", _BODY, "lax.fori_loop",
       _where((2,), ("body_fun",), ()), _NO_STATIC, _lax(2, None, (1, 3), "all"), None, None),
    _T("jax.lax.while_loop", "body", ".C....P.H...", _BODY, "lax.while_loop",
       _where((0, 1), ("cond_fun", "body_fun"), ()), _NO_STATIC, _lax(1, None, (0, 2), "all"), None, None),
    _T("jax.lax.cond", "body", ".C....P.H...", _BODY, "lax.cond",
       _where((1, 2), ("true_fun", "false_fun"), ()), _NO_STATIC, _lax(None, 3, None, None), None, None),
    _T("jax.lax.switch", "body", ".C....P.H...", _BODY, "lax.switch",
       _where((), ("branches",), (1,)), _NO_STATIC, _lax(None, 2, None, None), None, None),
    _T("jax.lax.map", "body", ".C....P.H...", _BODY, "lax.map",
       _where((0,), ("f",), ()), _NO_STATIC, _lax(1, None, None, "none"), None, None),
    _T("jax.lax.associative_scan", "body", ".C....P.....", _BODY, "lax.associative_scan",
       _where((0,), ("fn",), ()), _NO_STATIC, _lax(2, None, None, None), None, None),
]}


def transform_for(qualname: Optional[str]) -> Optional[Transform]:
    if qualname is None:
        return None
    return TRANSFORMS.get(qualname)


# ---- views derived from TRANSFORMS (read live: a row added to, or a test's
# monkeypatched, TRANSFORMS shows up everywhere)
class TransformNames(AbstractSet):
    """The names of the transforms whose record passes ``test``, read from
    :data:`TRANSFORMS` at each query.  Supports ``in``, iteration and set
    operators (which return plain frozensets)."""

    __slots__ = ("_test", "_extra")

    def __init__(self, test: Callable[[Transform], bool], extra: Iterable[str] = ()):
        self._test = test
        self._extra = frozenset(extra)

    def __contains__(self, name: object) -> bool:
        t = TRANSFORMS.get(name)    # type: ignore[call-overload]
        return (t is not None and self._test(t)) or name in self._extra

    def __iter__(self) -> Iterator[str]:
        names = [n for n, t in TRANSFORMS.items() if self._test(t)]
        return iter(names + sorted(self._extra - set(names)))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> FrozenSet[str]:
        return frozenset(it)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"TransformNames({sorted(self)!r})"


class TransformTable(Mapping):
    """``name -> value(record)`` for the transforms that pass ``has`` (by default:
    whose value is not None), read from :data:`TRANSFORMS` at each query."""

    __slots__ = ("_value", "_has")

    def __init__(self, value: Callable[[Transform], object],
                 has: Optional[Callable[[Transform], bool]] = None):
        self._value = value
        self._has = has if has is not None else (lambda t: value(t) is not None)

    def __getitem__(self, name: str) -> object:
        t = TRANSFORMS.get(name)
        if t is None or not self._has(t):
            raise KeyError(name)
        return self._value(t)

    def __iter__(self) -> Iterator[str]:
        return (n for n, t in TRANSFORMS.items() if self._has(t))

    def __len__(self) -> int:
        return sum(1 for _ in self)


_TERMINALS: Tuple[Optional[dict], FrozenSet[str]] = (None, frozenset())


def transform_terminals() -> FrozenSet[str]:
    """The final path component of every transform name: a cheap pre-filter
    before resolving a call's qualified name (recomputed when TRANSFORMS is replaced)."""
    global _TERMINALS
    table, terms = _TERMINALS
    if table is not TRANSFORMS or len(terms) == 0:
        terms = frozenset(n.rsplit(".", 1)[1] for n in TRANSFORMS)
        _TERMINALS = (TRANSFORMS, terms)
    return terms


class _Terminals(AbstractSet):
    """:func:`transform_terminals` as a live set (``"jit" in TRANSFORM_TERMINALS``)."""

    def __contains__(self, name: object) -> bool:
        return name in transform_terminals()

    def __iter__(self) -> Iterator[str]:
        return iter(transform_terminals())

    def __len__(self) -> int:
        return len(transform_terminals())

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> FrozenSet[str]:
        return frozenset(it)


TRANSFORM_TERMINALS = _Terminals()

# how many positional arguments a structured-control-flow primitive passes to its body;
# ``None``: computed from the call (cond/switch operands)
BODY_ARITY = TransformTable(lambda t: t.body_arity,
                            has=lambda t: t.body_arity is not None or t.operands_from is not None)
# transforms that compile: applying one creates a cached, compiled callable
JIT_NAMES = TransformNames(lambda t: t.jit_like)
# transforms that differentiate
GRAD_NAMES = TransformNames(lambda t: t.differentiates)
# transforms whose Python body runs on every call unless an enclosing function is staged
EAGER_TRANSFORMS = TransformNames(lambda t: t.eager)
# decorators that cache a function on its arguments' hashes: no JAX array or tracer is
# hashable, so the function's parameters always hold Python values
# keywords of ``jax.jit`` whose literal tuple fixes how many positional arguments the jitted
# function takes (``pjit does not support kwargs when in_shardings is specified``)
SHARDED_ARITY_KEYWORDS = frozenset({"in_shardings"})
ARGUMENT_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
# decorators known to leave a function running as written (no transform, no compilation): by
# qualified name, by the modules whose decorators only register, cache or describe, and by the
# attribute of an object's own decorator (``@x.setter``, ``@f.register``)
PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "functools.wraps", "functools.cache",
                              "functools.lru_cache", "functools.cached_property", "functools.total_ordering",
                              "abc.abstractmethod", "typing.overload", "typing.final", "typing.override",
                              "typing.no_type_check", "contextlib.contextmanager", "dataclasses.dataclass"})
PLAIN_DECORATOR_PREFIXES = ("functools.", "abc.", "typing.", "pytest.")
PLAIN_DECORATOR_ATTRS = frozenset({"setter", "getter", "deleter", "register"})
# calls that raise on a tracer and return the value otherwise: what follows them runs on concrete
# values only (``jax.core.concrete_or_error(None, x, msg)``)
CONCRETE_GUARDS = frozenset({"jax.core.concrete_or_error", "jax.extend.core.concrete_or_error",
                             "jax._src.core.concrete_or_error"})
# context managers under which JAX computes operations on concrete values at once, even
# while tracing (``with jax.ensure_compile_time_eval(): c = jnp.mean(table)`` is concrete)
COMPILE_TIME_EVAL = frozenset({"jax.ensure_compile_time_eval", "jax.core.eval_context"})
# transforms that add no tracer of their own: their function runs on the values it is given
VALUES_AS_GIVEN = TransformNames(lambda t: t.values_as_given)
# transforms that trace once on purpose to inspect a function (shapes, jaxprs)
INSPECTING_TRANSFORMS = TransformNames(lambda t: t.inspects)
# Equinox filters that cache their trace like jit/pmap
CACHING_FILTERS = TransformNames(lambda t: t.kind == "filter" and t.caches_trace)
# transforms whose traced function is only ever run inside a cached trace
CACHED_TRACES = TransformNames(lambda t: t.inside_cached_trace)
# transforms whose static arguments JAX505 checks
STATIC_CHECKED = TransformNames(lambda t: t.static_checked)
# transforms the confirmation harness instruments
INSTRUMENTED = TransformNames(lambda t: t.instrumented)
# transform -> (body parameter index, call argument index of the initial carry)
CARRY_INIT = TransformTable(lambda t: t.carry_init)
# loop primitives whose body runs once per step: name -> (function position, function keyword,
# index of the carry parameter or None, how the carry is returned: "first" of a 2-tuple / "all")
LOOP_BODIES = TransformTable(lambda t: None if t.loop is None else (
    t.fun_positions[-1], t.fun_keywords[-1], t.carry_init[0] if t.carry_init else None,
    None if t.loop == "none" else t.loop))

# transforms that bind a named axis: name -> (keyword, positional index or None)
AXIS_BINDERS = TransformTable(lambda t: t.axis_name)
# transforms that bind axis names this module does not spell at the call (a Mesh's axes)
MESH_BINDERS = TransformNames(lambda t: t.mesh_axes)
# data-parallel transforms whose gradients of replicated parameters are NOT reduced for you
REPLICATING = TransformNames(lambda t: t.replicates)
# gradient makers: name -> index of the gradients in the made function's result (None: the
# whole result), and that index when ``has_aux=True``
GRAD_MAKERS = TransformTable(lambda t: t.grad_output)

PARTIAL = frozenset({"functools.partial"})

# lax primitives that hand their body one slice of an operand per step: (body parameter index,
# call argument index, keyword).  The slice keeps the operand's structure: ``lax.scan(f, c,
# (labels, preds))`` gives ``f`` a *tuple* of two tracers on every step, not an array
SLICED_OPERANDS = {
    "jax.lax.scan": (1, 2, "xs"),
    "jax.lax.map": (0, 1, "xs"),
}

# array functions whose first argument is a *sequence* of arrays (a list or tuple as often as
# one stacked array): passing a value there says nothing about whether it is an array
SEQUENCE_FIRST = frozenset(
    f"{lib}.{name}" for lib in ("jax.numpy", "numpy")
    for name in ("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack",
                 "row_stack", "block"))

# wrappers the PRNG analysis sees through when comparing consumers (``jax.grad(f)(key)``)
PRNG_WRAPPERS = TransformNames(lambda t: t.prng_sees_through, extra=PARTIAL)

# Higher-order helpers that call a function on (leaves of) their other arguments
# in the caller's context: the callable's parameters are traced when the
# arguments are.
HIGHER_ORDER = {
    "jax.tree.map": 0,
    "jax.tree_util.tree_map_with_path": 0,
    "jax.tree.map_with_path": 0,
}
# of those, the ones whose callback's first parameter is a key path (static), not a leaf
PATH_FIRST = frozenset({"jax.tree_util.tree_map_with_path", "jax.tree.map_with_path"})

# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------
# attributes of an array that are static Python values even while tracing
STATIC_ATTRS = frozenset({
    "shape", "ndim", "dtype", "size", "itemsize", "nbytes", "weak_type",
    "sharding", "aval", "named_shape", "__class__", "__name__",
    "irreps",   # e3nn-jax ``IrrepsArray.irreps``: static structure of an equivariant array
    "axes",     # haliax ``NamedArray.axes``: the named axes (names and sizes) of a named array
})

# attributes describing an array's layout, never its numbers (recording or comparing them
# is bookkeeping: trace-time shape logs, ``assert a.shape == b.shape``)
SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})

# calls that read only the structure of what they are given (shapes, dtypes, tree structure),
# never its numbers
STRUCTURE_READERS = frozenset(
    {f"{m}.{f}" for m in ("jax.numpy", "numpy") for f in ("zeros_like", "ones_like", "empty_like", "shape", "ndim")}
    | {"jax.eval_shape", "jax.ShapeDtypeStruct", "jax.tree.structure", "jax.tree_util.tree_structure"})
# methods that build state from example inputs: Flax/Haiku ``model.init(rng, *example)`` and a
# replay buffer's ``buffer.init(example)`` (flashbax) trace the example for its shapes and dtypes;
# the parameters and buffers they build come from the key and the initializers, not the
# example's numbers
EXAMPLE_INPUT_METHODS = frozenset({"init", "lazy_init"})

# calls whose result is a Python value computed from static facts only
STATIC_RESULT_CALLS = frozenset({
    "len", "isinstance", "issubclass", "type", "id", "callable", "hasattr",
    "repr", "str", "format", "print", "hash", "dir", "vars",
    "int", "float", "bool", "complex",            # concretize (JAX202 reports them)
    "jax.numpy.shape", "jax.numpy.ndim", "jax.numpy.size", "jax.numpy.dtype",
    "jax.numpy.result_type", "jax.numpy.issubdtype", "jax.numpy.iinfo",
    "jax.numpy.finfo", "jax.numpy.promote_types", "jax.numpy.can_cast",
    "jax.numpy.isdtype", "jax.numpy.isscalar", "jax.numpy.iscomplexobj",
    "jax.numpy.isrealobj", "jax.numpy.issubsctype",
    "numpy.shape", "numpy.ndim", "numpy.size", "numpy.dtype", "numpy.result_type",
    "numpy.issubdtype", "numpy.iinfo", "numpy.finfo", "numpy.prod",
    "jax.tree.structure", "jax.tree_util.tree_structure", "jax.tree_util.keystr", "jax.eval_shape", "jax.ShapeDtypeStruct",
    "jax.device_count", "jax.local_device_count", "jax.devices", "jax.local_devices",
    "jax.process_index", "jax.process_count", "jax.default_backend",
    "jax.core.is_concrete", "jax.dtypes.canonicalize_dtype", "jax.dtypes.result_type",
    "jax.debug.print", "jax.debug.callback", "jax.debug.breakpoint",
    "math.prod", "jax.lax.axis_size", "jax.core.valid_jaxtype",
    "jax.lax.broadcast_shapes", "jax.numpy.broadcast_shapes", "numpy.broadcast_shapes",
    # sharding descriptions are Python objects, whatever they are built from
    "jax.sharding.NamedSharding", "jax.sharding.PartitionSpec", "jax.sharding.Mesh",
    "jax.sharding.AbstractMesh", "jax.sharding.PositionalSharding",
    "jax.sharding.SingleDeviceSharding", "jax.sharding.get_abstract_mesh", "jax.make_mesh",
    "jax.experimental.mesh_utils.create_device_mesh", "jax.typeof",
    "flax.linen.logical_to_mesh_axes", "flax.linen.logical_to_mesh_sharding",
    "flax.linen.get_logical_axis_rules", "flax.linen.partitioning.logical_to_mesh_axes",
    "flax.linen.get_partition_spec", "flax.linen.get_sharding", "flax.nnx.get_partition_spec",
    "flax.nnx.get_named_sharding", "flax.nnx.get_abstract_model",
})

# array constructors whose first argument is a shape or a size (a Python value under a trace)
SHAPE_FIRST_CALLS = frozenset(
    f"{m}.{f}" for m in ("jax.numpy", "numpy")
    for f in ("zeros", "ones", "empty", "full", "eye", "identity", "arange", "tri"))

# collectives that, applied to a Python constant, give a Python value (``lax.psum(1, axis)``
# is the axis size)
AXIS_SIZE_REDUCTIONS = frozenset({"jax.lax.psum"})

# attribute name prefixes that denote static metadata (``arr.n_batch``, ``cfg.num_heads``)
STATIC_ATTR_PREFIXES = ("n_", "num_", "is_", "has_", "use_")
# unknown callables named like predicates return Python bools (``is_array(x)``)
PREDICATE_PREFIXES = ("is_", "has_", "can_", "should_", "valid", "check_", "_is_", "_has_")

# the errors JAX raises at trace time for each concrete-value pitfall, with their bases: an
# ``except`` naming one of these (or ``Exception``) around the code handles the pitfall
TRACE_ERRORS = {
    "JAX201": frozenset({"TracerBoolConversionError", "ConcretizationTypeError", "JAXTypeError", "TypeError"}),
    "JAX202": frozenset({"ConcretizationTypeError", "TracerIntegerConversionError", "JAXTypeError", "TypeError"}),
    "JAX203": frozenset({"TracerArrayConversionError", "JAXTypeError", "TypeError"}),
    "JAX204": frozenset({"NonConcreteBooleanIndexError", "JAXIndexError", "IndexError", "LookupError"}),
    # item assignment raises ``TypeError: JAX arrays are immutable``, eagerly and traced alike
    "JAX301": frozenset({"TypeError"}),
}
CATCH_ALL_ERRORS = frozenset({"Exception", "BaseException"})

# calls that return a record (a NamedTuple) of plain functions -- Haiku's transforms, whose
# ``init``/``apply`` are the same function objects at every access, not bound methods
PLAIN_FUNCTION_RECORDS = frozenset({
    "haiku.transform", "haiku.transform_with_state", "haiku.without_apply_rng", "haiku.without_state",
    "haiku.multi_transform", "haiku.multi_transform_with_state",
})

# Pallas kernels write through mutable refs (``o_ref[...] = x``)
PALLAS_PREFIX = "jax.experimental.pallas"
# calls whose function argument (the first) receives refs for its parameters, not arrays:
# the kernel of ``pallas_call`` (its inputs, outputs and scratch buffers), the body of
# ``run_scoped`` (its scratch buffers), the body of a TPU ``emit_pipeline`` (its blocks)
REF_KERNEL_CALLS = frozenset({
    "jax.experimental.pallas.pallas_call", "jax.experimental.pallas.run_scoped",
    "jax.experimental.pallas.tpu.emit_pipeline", "jax.experimental.pallas.tpu.run_scoped",
    "jax.experimental.pallas.core_map", "jax.experimental.pallas.kernel",
})

# Python builtins whose result is a container of their inputs
CONTAINER_CALLS = frozenset({
    "list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "zip",
    "enumerate", "map", "filter", "range",
})

# modules whose functions return JAX arrays
# methods that return a Python container of what their receiver holds (Flax's
# ``FrozenDict.unfreeze()`` gives a plain dict)
CONTAINER_RESULT_METHODS = frozenset({"unfreeze"})
# modules of neural-network layers: ``nn.Dense(4)(x)`` takes and returns arrays
LAYER_PREFIXES = ("flax.linen.", "flax.nnx.", "equinox.nn.", "haiku.")
# packages whose functions jaxlint knows (their array work, their collectives): a call of any
# other package's function handed a traced value is an unknown (it may build a Python object, or
# reduce across devices inside)
KNOWN_LIBRARY_PREFIXES = ("jax.", "numpy.", "flax.", "optax.", "equinox.", "haiku.", "chex.", "math.")
ARRAY_MODULES = (
    "jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "jax.scipy.", "jax.image.",
    "jax.ops.", "flax.linen.activation.", "optax.",
)
ARRAY_FUNCTIONS = frozenset({"jax.device_put", "jax.numpy.array", "jax.numpy.asarray"})
# NumPy conversions: given a tracer they raise (TracerArrayConversionError), so what they
# return is always a concrete NumPy array
NUMPY_CONVERSIONS = frozenset({"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray",
                               "numpy.copy", "jax.device_get"})
# modules of jax-adjacent functions that are not array producers
NON_ARRAY = frozenset({
    "jax.numpy.ndarray", "optax.GradientTransformation",
})

# optax / flax calls whose results are PyTrees of arrays rather than arrays
PYTREE_FUNCTIONS_PREFIX = ("optax.",)

# array-module functions whose result may be several arrays (a tuple/list), not one array;
# the lax control-flow primitives return whatever their body returns
MULTI_ARRAY_RESULTS = frozenset({
    "jax.numpy.split", "jax.numpy.array_split", "jax.numpy.hsplit", "jax.numpy.vsplit", "jax.numpy.dsplit",
    "jax.numpy.meshgrid", "jax.numpy.unstack", "jax.numpy.nonzero", "jax.numpy.where", "jax.numpy.unravel_index",
    "jax.numpy.indices", "jax.numpy.linalg.eigh", "jax.numpy.linalg.svd", "jax.numpy.linalg.qr",
    "jax.numpy.linalg.slogdet", "jax.numpy.linalg.eig", "jax.lax.scan", "jax.lax.while_loop", "jax.lax.fori_loop",
    "jax.lax.cond", "jax.lax.switch", "jax.random.split",
})
# array-module functions that always return a Python list or tuple of arrays
SEQUENCE_RESULTS = frozenset({
    "jax.numpy.split", "jax.numpy.array_split", "jax.numpy.hsplit", "jax.numpy.vsplit", "jax.numpy.dsplit",
    "jax.numpy.unstack", "jax.numpy.meshgrid", "jax.tree.leaves", "jax.tree_util.tree_leaves",
})
# attributes and methods only an array has: a name used with them is an array
ARRAY_ONLY_ATTRS = frozenset({"shape", "ndim", "T", "dtype", "reshape", "astype"})
# modules whose functions return one array (unless listed in MULTI_ARRAY_RESULTS)
SINGLE_ARRAY_MODULES = ("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.")

# ---- arguments JAX needs as static Python ints or shapes (a tracer there raises)
ALL_POSITIONS = -1   # every positional argument

_J, _R, _L = "jax.numpy.", "jax.random.", "jax.lax."

# (JAX202 reports a traced value there; a value passed there is no evidence of an array)
# qualified name -> (positional indices or (ALL_POSITIONS,), keyword names)
SHAPE_ARGUMENTS: Dict[str, Tuple[Tuple[int, ...], Tuple[str, ...]]] = {
    _J + "zeros": ((0,), ("shape",)), _J + "ones": ((0,), ("shape",)), _J + "empty": ((0,), ("shape",)),
    _J + "full": ((0,), ("shape",)),
    _J + "zeros_like": ((), ("shape",)), _J + "ones_like": ((), ("shape",)),
    _J + "empty_like": ((), ("shape",)), _J + "full_like": ((), ("shape",)),
    _J + "arange": ((ALL_POSITIONS,), ("start", "stop", "step")),
    _J + "linspace": ((2,), ("num",)), _J + "logspace": ((2,), ("num",)), _J + "geomspace": ((2,), ("num",)),
    _J + "eye": ((0, 1), ("N", "M")), _J + "identity": ((0,), ("n",)), _J + "tri": ((0, 1), ("N", "M")),
    _J + "reshape": ((1,), ("shape", "newshape")), _J + "broadcast_to": ((1,), ("shape",)),
    _J + "tile": ((1,), ("reps",)), _J + "resize": ((1,), ("new_shape",)),
    _J + "pad": ((1,), ("pad_width",)), _J + "split": ((1,), ("indices_or_sections",)),
    _J + "array_split": ((1,), ("indices_or_sections",)), _J + "indices": ((0,), ("dimensions",)),
    _J + "tril_indices": ((0,), ("n",)), _J + "triu_indices": ((0,), ("n",)),
    _J + "repeat": ((1,), ("repeats",)), _J + "argpartition": ((1,), ("kth",)), _J + "partition": ((1,), ("kth",)),
    _L + "top_k": ((1,), ("k",)),
    "jax.nn.one_hot": ((1,), ("num_classes",)),
    _R + "normal": ((1,), ("shape",)), _R + "uniform": ((1,), ("shape",)), _R + "randint": ((1,), ("shape",)),
    _R + "bernoulli": ((2,), ("shape",)), _R + "truncated_normal": ((3,), ("shape",)),
    _R + "categorical": ((3,), ("shape",)), _R + "gumbel": ((1,), ("shape",)),
    _R + "exponential": ((1,), ("shape",)), _R + "laplace": ((1,), ("shape",)),
    _R + "logistic": ((1,), ("shape",)), _R + "rademacher": ((1,), ("shape",)),
    _R + "cauchy": ((1,), ("shape",)), _R + "gamma": ((2,), ("shape",)), _R + "beta": ((3,), ("shape",)),
    _R + "dirichlet": ((2,), ("shape",)), _R + "poisson": ((2,), ("shape",)),
    _R + "choice": ((2,), ("shape",)), _R + "split": ((1,), ("num",)),
    _L + "iota": ((1,), ("size",)), _L + "full": ((0,), ("shape",)), _L + "broadcast": ((1,), ("sizes",)),
    _L + "broadcast_in_dim": ((1,), ("shape",)), _L + "reshape": ((1,), ("new_sizes",)),
    _L + "dynamic_slice": ((2,), ("slice_sizes",)), _L + "dynamic_slice_in_dim": ((2,), ("slice_size",)),
    _L + "slice": ((1, 2, 3), ("start_indices", "limit_indices", "strides")),
    _L + "slice_in_dim": ((1, 2, 3), ("start_index", "limit_index", "stride")),
}

# JAX's errors that only a tracer raises (concrete values never do): confirmation's evidence,
# and what a ``try`` that handles tracing on purpose catches
TRACER_ERRORS = frozenset({"ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
                           "TracerArrayConversionError", "NonConcreteBooleanIndexError", "UnexpectedTracerError"})

# every public attribute and method of a ``jax.Array`` (and of a tracer), as JAX 0.10.2 lists
# them (``dir(jnp.ones(1))``): a value on which any other method is called is not an array
# (a pytree node: ``args["height"].unwrap()`` of a static wrapper), and what the call returns
# is unknown
ARRAY_ATTRIBUTES = frozenset({
    "T", "addressable_data", "addressable_shards", "all", "any", "argmax", "argmin", "argpartition", "argsort",
    "astype", "at", "aval", "block_until_ready", "byteswap", "choose", "clip", "clone", "committed", "compress",
    "conj", "conjugate", "copy", "copy_to_host_async", "cumprod", "cumsum", "delete", "device", "device_buffer",
    "device_buffers", "devices", "diagonal", "dot", "dtype", "flat", "flatten", "format", "global_shards", "imag",
    "is_deleted", "is_fully_addressable", "is_fully_replicated", "is_ready", "item", "itemsize", "mT", "max",
    "mean", "min", "nbytes", "ndim", "nonzero", "on_device_size_in_bytes", "platform", "prod", "ptp", "ravel",
    "real", "repeat", "reshape", "round", "searchsorted", "shape", "sharding", "size", "sort", "squeeze", "std",
    "sum", "swapaxes", "take", "to_device", "tobytes", "tolist", "trace", "traceback", "transpose",
    "unsafe_buffer_pointer", "var", "view", "weak_type",
    # tracers only
    "dimension_as_value", "full_lower", "get_referent", "to_concrete_value",
})

# methods whose result is a Python value (conversion), not an array
CONCRETIZING_METHODS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__"})
# methods returning Python metadata (NNX Variable metadata, a mapping's keys)
METADATA_METHODS = frozenset({"get_metadata", "keys"})
# iterables of (key path, leaf) pairs: the key path is static
PATH_LEAF_PAIRS = frozenset({"jax.tree_util.tree_leaves_with_path", "jax.tree.leaves_with_path"})
# methods only a string has: their receiver is a Python string (a dict key, a name)
STR_ONLY_METHODS = frozenset({"startswith", "endswith", "lower", "upper", "strip", "lstrip", "rstrip",
                              "isdigit", "isalpha", "isidentifier", "removeprefix", "removesuffix"})
# calls returning a tuple some of whose items are static structure, not arrays:
# ``graphdef, state = nnx.split(model)``, ``leaves, treedef = jax.tree.flatten(x)``
STATIC_RESULT_ITEMS = {
    "flax.nnx.split": (0,),
    "flax.nnx.graph.split": (0,),
    "jax.tree.flatten": (1,),
    "jax.tree_util.tree_flatten": (1,),
    "jax.tree.flatten_with_path": (1,),
    "jax.tree_util.tree_flatten_with_path": (1,),
}
# methods of Python sequences and strings (not of arrays) that return a Python int:
# ``annotations.index("batch")``, ``names.count("x")``
SEQUENCE_INT_METHODS = frozenset({"index", "count", "rindex", "find", "rfind"})

# evidence that a name holds a Python container rather than an array
CONTAINER_METHODS = frozenset({
    "append", "extend", "insert", "pop", "update", "setdefault", "clear",
    "items", "keys", "values", "get", "remove", "add", "discard", "popitem",
})

CONTAINER_ANNOTATIONS = frozenset({
    "dict", "list", "set", "typing.Dict", "typing.List", "typing.Set",
    "typing.MutableMapping", "typing.Mapping", "typing.Sequence",
    "typing.MutableSequence", "collections.abc.Mapping", "collections.abc.MutableMapping",
    "collections.abc.Sequence", "collections.OrderedDict", "collections.defaultdict",
})

# tuples: containers too (``if limits:`` asks for their length), but immutable
TUPLE_ANNOTATIONS = frozenset({"tuple", "typing.Tuple"})
# wrappers of an annotation that also admit None
OPTIONAL_ANNOTATIONS = frozenset({"typing.Optional", "typing.Union"})

ARRAY_ANNOTATIONS = frozenset({
    "jax.Array", "jax.numpy.ndarray", "jax.typing.ArrayLike", "chex.Array",
    "jaxtyping.Array", "jax.numpy.DeviceArray",
})

# annotations of parameters that carry Python configuration, not arrays
SCALAR_ANNOTATIONS = frozenset({"bool", "int", "str", "float",
                                # sharding descriptions: Python objects, never tracers
                                "NamedSharding", "PartitionSpec", "Mesh", "AbstractMesh", "Sharding"})

# module bases
FLAX_LINEN_MODULE = "flax.linen.Module"
NNX_MODULE = "flax.nnx.Module"
EQUINOX_MODULE = "equinox.Module"
MODULE_BASES = {FLAX_LINEN_MODULE: "linen", NNX_MODULE: "nnx", EQUINOX_MODULE: "equinox"}
LINEN_COMPACT = "flax.linen.compact"
LINEN_TRACED_METHODS = frozenset({"__call__", "setup"})
# the linen Module methods that run a method of the module with the arguments after their first
# (the variables, or the keys): ``model.apply(variables, x)`` runs ``model.__call__(x)``
LINEN_RUNNERS = frozenset({"apply", "init", "init_with_output"})
# the methods that return a module's variables (a dict of collections), not an array
VARIABLES_MAKERS = frozenset({"init", "lazy_init"})
# their own keywords, not passed on to the method
LINEN_RUNNER_KEYWORDS = frozenset({"rngs", "mutable", "method", "capture_intermediates", "method_kwargs"})
LINEN_PARAM_METHODS = frozenset({"param", "variable", "make_rng", "sow", "perturb"})

LOGGING_FUNCS = frozenset({
    "logging.debug", "logging.info", "logging.warning", "logging.warn", "logging.error",
    "logging.critical", "logging.exception", "logging.log",
    "absl.logging.debug", "absl.logging.info", "absl.logging.warning", "absl.logging.error",
    "absl.logging.log", "absl.logging.fatal", "absl.logging.vlog",
})
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
LOGGER_FACTORIES = frozenset({"logging.getLogger", "absl.logging.get_absl_logger"})

