"""Shared facts for the concrete-value rules (JAX202 / JAX203 / JAX204).

Questions these rules ask on top of the semantic model:

* :func:`traced_value` / :func:`traced_array`: does an expression hold a
  tracer while its function is traced?  A value that became "traced" only by
  passing through a NumPy conversion (``y = np.asarray(x)``) is not counted:
  the conversion itself is reported, and everything downstream of it would be
  a cascade of the same mistake.  Neither is the result of a call the model
  cannot see into (:func:`opaque`: ``self._shapes(x)``, ``helper(x)``), which
  is as often a static shape as an array.  :func:`traced_operand` drops that
  last condition for operands whose role is already certain (a mask proven
  boolean, the argument of ``jnp.nonzero``).
* :func:`unreliable_param`: a parameter the model calls traced although the
  code says otherwise often enough to matter: one with a numeric literal
  default (a transform only traces the arguments a caller passes; defaults
  stay Python values), or a parameter of a transform applied with
  ``static_argnums``/``static_argnames`` that are not literals (the model
  cannot tell which parameters they name).
* :func:`output_nodes`: the nodes under ``print``/logging arguments (JAX101's
  territory), ``raise`` statements, ``assert`` messages and
  ``warnings.warn`` — formatting a tracer there is not a concrete-value bug.
* :func:`at_compile_time`: code under ``with jax.ensure_compile_time_eval():``
  runs eagerly on concrete values.
"""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis.bindings import ASSIGN, CLASS, DEF, IMPORT
from ...analysis.model import CONTAINER, JAX, NUMPY, TRACED, Function, SemanticModel, proven

_WARN_FUNCS = frozenset({"warnings.warn", "absl.logging.log_first_n", "absl.logging.log_every_n"})


def traced_value(model: SemanticModel, e: ast.AST, fn: Function) -> bool:
    """``e`` may hold a tracer (array or container of arrays) while ``fn`` is traced."""
    k = model.kind(e, fn)
    if not proven(k):
        return False
    if k & NUMPY and not k & JAX:
        return False   # traced only through a NumPy conversion, reported at its source
    if not k & JAX and opaque(model, e, fn):
        return False
    return True


def traced_array(model: SemanticModel, e: ast.AST, fn: Function) -> bool:
    """``e`` is a traced array (or scalar), not a Python container that may hold
    one, nor an opaque value whose kind is only guessed."""
    if not traced_operand(model, e, fn):
        return False
    return bool(model.kind(e, fn) & JAX) or not opaque(model, e, fn)


def traced_operand(model: SemanticModel, e: ast.AST, fn: Function) -> bool:
    """Like :func:`traced_array`, but trusting the results of helper calls: for
    operands whose *role* is already certain (a boolean mask, the argument of
    ``jnp.nonzero``) the only question left is whether the value is traced."""
    k = model.kind(e, fn)
    if not proven(k):
        return False
    if k & NUMPY and not k & JAX:
        return False
    if k & CONTAINER and not k & (JAX | NUMPY):
        return False
    return True


def opaque(model: SemanticModel, e: ast.AST, fn: Function, depth: int = 0) -> bool:
    """``e`` is traced only because it is the result of a call the model cannot see
    into (``self._get_bias_shape(x, k)``, ``helper(x)``): such a result is as often a
    static shape or a Python number as an array, so the rules do not guess."""
    if depth > 6:
        return True
    t = e.__class__
    if t is ast.Call:
        func = e.func
        if func.__class__ in (ast.Name, ast.Attribute):
            q = model.qualname(func, fn)
            if q is not None and q.startswith(_LIBRARIES):
                return False
        if _library_object(model, func, fn):
            return False   # a layer or transformed function: ``nn.Dense(4)(x)``, ``self.dense(x)``
        if func.__class__ is ast.Attribute:
            rk = model.kind(func.value, fn)
            if rk & JAX:
                return False   # a method of an array
            if rk & TRACED and not rk & CONTAINER:
                return opaque(model, func.value, fn, depth + 1)   # a method of a traced value
        return not _returns_arrays(model, e, fn)
    if t is ast.Subscript or t is ast.Attribute or t is ast.Starred:
        return opaque(model, e.value, fn, depth + 1)
    if t is ast.Name:
        s, values = _bound_values(model, e.id, fn)
        if s is None or s.is_module:
            return False
        return bool(values) and all(v is not None and opaque(model, v, s, depth + 1) for v in values)
    return False


def _returns_arrays(model: SemanticModel, call: ast.Call, fn: Function) -> bool:
    """``call`` calls a function of this module whose every ``return`` is a JAX array."""
    target = model.resolve_callable(call.func, fn)
    if target is None or target.transforms:
        return False
    callee = target.function
    if callee.is_lambda:
        values = [callee.node.body]
    else:
        values = [r.value for r in callee.of_type(ast.Return)]
    if not values or any(v is None for v in values):
        return False
    for v in values:
        k = model.kind(v, callee)
        if not k & JAX or k & (CONTAINER | NUMPY):
            return False
    return True


_LIBRARIES = ("jax.", "numpy.", "optax.", "flax.", "equinox.")


def _library_call(model: SemanticModel, v: Optional[ast.AST], fn: Function) -> bool:
    if not isinstance(v, ast.Call) or not isinstance(v.func, (ast.Name, ast.Attribute)):
        return False
    q = model.qualname(v.func, fn)
    return q is not None and q.startswith(_LIBRARIES)


def _library_object(model: SemanticModel, func: ast.AST, fn: Function) -> bool:
    """``func`` is an object built by a JAX-ecosystem call: ``nn.Dense(4)``,
    ``jax.vmap(f)``, a name bound to one, or ``self.dense`` from ``setup``."""
    if isinstance(func, ast.Call):
        return _library_call(model, func, fn)
    if isinstance(func, ast.Name):
        s, values = _bound_values(model, func.id, fn)
        if s is None:
            return False
        return bool(values) and all(_library_call(model, v, s) for v in values)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner: Optional[Function] = fn
        while owner is not None and not owner.is_module and (owner.cls is None or owner.is_lambda):
            owner = owner.parent
        if owner is None or owner.cls is None or func.value.id != owner.self_name:
            return False
        values = owner.cls.setup_attrs.get(func.attr)
        init = owner.cls.methods.get("setup") or owner.cls.methods.get("__init__")
        return bool(values) and init is not None and all(_library_call(model, v, init) for v in values)
    return False


def _bound_values(model: SemanticModel, name: str, fn: Function) -> Tuple[Optional[Function], list]:
    """The scope ``name`` resolves to from ``fn`` and the expressions it is bound
    from there: the matching element of a tuple display, else the whole value;
    ``None`` for parameters, loop, ``with`` and augmented bindings."""
    s = model.resolve_scope(name, fn)
    if s is None:
        return None, []
    values = []
    for b in model.bindings(name, s):
        if b.kind in (DEF, CLASS, IMPORT):
            continue
        if b.kind == ASSIGN:
            element = b.element
            values.append(element if element is not None else b.value)
        else:
            values.append(None)
    return s, values


def culprit(model: SemanticModel, e: ast.AST, fn: Function) -> ast.AST:
    c = model.traced_culprit(e, fn)
    return c if c is not None else e


# ----------------------------------------------------------- parameters
def _numeric_default(fn: Function, name: str) -> bool:
    d = fn.defaults.get(name)
    if isinstance(d, ast.UnaryOp) and isinstance(d.op, (ast.USub, ast.UAdd)):
        d = d.operand
    return isinstance(d, ast.Constant) and isinstance(d.value, (int, float)) and not isinstance(d.value, bool)


def _nonliteral_static(model: SemanticModel, fn: Function) -> bool:
    cache = model.facts(_Memo).nonliteral_static
    key = id(fn)
    if key in cache:
        return cache[key]
    out = False
    for ctx in fn.contexts:
        node = ctx.node
        # ``jax.jit(f, static_argnums=...)`` or a ``partial(jax.jit, ...)`` decorator
        for call in ([node] if isinstance(node, ast.Call) else []):
            for kw in call.keywords:
                if kw.arg is None:
                    out = True
                elif kw.arg.startswith("static_arg") or kw.arg.startswith("nondiff_arg") \
                        or kw.arg == "static_broadcasted_argnums":
                    if model._literal_ints(kw.value) is None and model._literal_strs(kw.value) is None:
                        out = True
    cache[key] = out
    return out


def unreliable_param(model: SemanticModel, node: ast.AST, fn: Function) -> bool:
    """``node`` names a parameter whose tracedness the model cannot vouch for."""
    if not isinstance(node, ast.Name):
        return False
    s: Optional[Function] = fn
    while s is not None and not s.is_module:
        if node.id in s.locals:
            if node.id not in s.param_nodes:
                return False
            if node.id in s.param_kinds:
                return False   # traced because a traced call site passes a traced value
            if _numeric_default(s, node.id):
                return True
            return _nonliteral_static(model, s)
        s = s.parent
    return False


# ----------------------------------------------------------- output sinks
class _Memo:
    """This module's per-model memo tables (``model.facts(_Memo)``)."""

    def __init__(self, model: SemanticModel):
        self.nonliteral_static: Dict = {}
        self.output_nodes: Dict = {}
        self.compile_time: Dict = {}


def is_output_call(model: SemanticModel, call: ast.Call, fn: Function) -> bool:
    """``print``/logging/``warnings.warn`` call (a string shown to a person)."""
    func = call.func
    if isinstance(func, (ast.Name, ast.Attribute)):
        q = model.qualname(func, fn)
        if q == "print" or q in K.LOGGING_FUNCS or q in _WARN_FUNCS:
            return True
    if isinstance(func, ast.Attribute) and func.attr in K.LOGGER_METHODS:
        base = func.value
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        if name is not None and (name in model.loggers() or name in ("logger", "log", "logging", "_logger")):
            return True
    return False


def output_nodes(model: SemanticModel, fn: Function) -> Set[int]:
    """ids of the nodes inside print/logging arguments, ``raise`` statements and ``assert`` messages."""
    cache = model.facts(_Memo).output_nodes
    got = cache.get(id(fn))
    if got is not None:
        return got
    out: Set[int] = set()
    roots = []
    for call in fn.of_type(ast.Call):
        if is_output_call(model, call, fn):
            roots.extend(call.args)
            roots.extend(k.value for k in call.keywords)
    for r in fn.of_type(ast.Raise):
        if r.exc is not None:
            roots.append(r.exc)
    for a in fn.of_type(ast.Assert):
        if a.msg is not None:
            roots.append(a.msg)
    for r in roots:
        for n in ast.walk(r):
            out.add(id(n))
    # `msg = "... {}".format(x); raise ValueError(msg)`: a message built first and only ever
    # raised or printed is output too
    names = {n.id for r in roots for n in ast.walk(r) if isinstance(n, ast.Name)}
    if names:
        uses: Dict[str, list] = {}
        for n in fn.walk():
            if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load):
                uses.setdefault(n.id, []).append(n)
        for name, found in uses.items():
            value = model.single_value(name, fn)
            if value is not None and all(id(u) in out for u in found):
                for n in ast.walk(value):
                    out.add(id(n))
    cache[id(fn)] = out
    return out


# ------------------------------------------------------ compile-time blocks
_COMPILE_TIME = frozenset({"jax.ensure_compile_time_eval", "jax.core.ensure_compile_time_eval"})


def compile_time(model: SemanticModel, fn: Function) -> Tuple[Set[int], Set[str]]:
    """Nodes inside ``with jax.ensure_compile_time_eval():`` blocks of ``fn``, and the
    names bound there: JAX evaluates such code eagerly on concrete values, so what
    the model calls traced may well be concrete."""
    cache = model.facts(_Memo).compile_time
    got = cache.get(id(fn))
    if got is not None:
        return got
    nodes: Set[int] = set()
    names: Set[str] = set()
    for w in fn.of_type(ast.With):
        if not any(isinstance(i.context_expr, ast.Call)
                   and model.qualname(i.context_expr.func, fn) in _COMPILE_TIME for i in w.items):
            continue
        for stmt in w.body:
            for n in ast.walk(stmt):
                nodes.add(id(n))
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    names.add(n.id)
    got = (nodes, names)
    cache[id(fn)] = got
    return got


def at_compile_time(model: SemanticModel, node: ast.AST, fn: Function, c: Optional[ast.AST] = None) -> bool:
    """``node`` runs with concrete values: under ``jax.ensure_compile_time_eval()`` (or its
    culprit ``c`` was bound there), or on a path no trace of ``fn`` takes (``model.off_trace``:
    behind an ``is None`` test that is never true while ``fn`` is traced)."""
    if model.off_trace(node, fn):
        return True
    if not fn.of_type(ast.With):
        return False
    nodes, names = compile_time(model, fn)
    return id(node) in nodes or (isinstance(c, ast.Name) and c.id in names)
