"""Writes that are Python idioms, not trace-time pitfalls: a lazily built singleton
(set once, from None) and state scoped to a ``with`` block (set in a context manager,
restored in its ``finally``).  Asked by JAX102 and JAX103."""
from __future__ import annotations

import ast

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel


def lazy_init(model: SemanticModel, fn: Function, node: ast.AST, name: str) -> bool:
    """``node`` (in ``fn``) rebinds ``name`` only while it is unset: it sits in the
    body of ``if name is None`` / ``if not name`` (alone or in an ``and`` chain) --
    a lazily built singleton (``global _mgr; if _mgr is None: _mgr = Manager()``).
    Building it once, at trace time or not, is the point."""
    for t in model.guarding_tests(node, fn):
        if t.__class__ is ast.Compare and len(t.ops) == 1 and t.ops[0].__class__ is ast.Is \
                and t.left.__class__ is ast.Name and t.left.id == name \
                and t.comparators[0].__class__ is ast.Constant and t.comparators[0].value is None:
            return True
        if t.__class__ is ast.UnaryOp and t.op.__class__ is ast.Not \
                and t.operand.__class__ is ast.Name and t.operand.id == name:
            return True
    return _returned_when_set(fn, node, name)


def reached_lazily(model: SemanticModel, fn: Function, name: str) -> bool:
    """Every call through which ``fn`` runs under a trace is guarded by a test that the global
    ``name`` is unset, or lacks the entry (``backend = _BACKEND; if backend is None:
    set_backend(...)``, ``if key not in _REGISTRY: register(key, ...)``): the helper fills the
    global once -- the lazy singleton or memo of :func:`lazy_init`, one call away."""
    ctxs = getattr(fn, "contexts", None)
    if not ctxs:
        return False
    for c in ctxs:
        caller = c.caller
        if caller is None or c.node.__class__ is not ast.Call:
            return False
        aliases = {name}
        for a in caller.of_type(ast.Assign):
            if len(a.targets) == 1 and a.targets[0].__class__ is ast.Name and a.value.__class__ is ast.Name \
                    and a.value.id == name:
                aliases.add(a.targets[0].id)
        if not any(_unset_test(t, aliases) for t in model.guarding_tests(c.node, caller)):
            return False
    return True


def _unset_test(t: ast.AST, names) -> bool:
    """``X is None``, ``not X``, ``k not in X`` for ``X`` one of ``names``."""
    if t.__class__ is ast.Compare and len(t.ops) == 1:
        op, right = t.ops[0].__class__, t.comparators[0]
        if op is ast.Is and t.left.__class__ is ast.Name and t.left.id in names \
                and right.__class__ is ast.Constant and right.value is None:
            return True
        if op is ast.NotIn and right.__class__ is ast.Name and right.id in names:
            return True
    return t.__class__ is ast.UnaryOp and t.op.__class__ is ast.Not \
        and t.operand.__class__ is ast.Name and t.operand.id in names


def _returned_when_set(fn: Function, node: ast.AST, name: str) -> bool:
    """``if _CACHED is not None: return _CACHED`` (or ``if _CACHED: return ...``) as a statement
    of ``fn``'s body before ``node``: past it, ``name`` is unset -- the same lazy singleton."""
    line = getattr(node, "lineno", 0)
    for stmt in getattr(fn.node, "body", ()):
        if stmt.lineno >= line:
            return False
        if stmt.__class__ is not ast.If or stmt.orelse or not stmt.body \
                or stmt.body[-1].__class__ is not ast.Return:
            continue
        t = stmt.test
        if t.__class__ is ast.Compare and len(t.ops) == 1 and t.ops[0].__class__ is ast.IsNot \
                and t.left.__class__ is ast.Name and t.left.id == name \
                and t.comparators[0].__class__ is ast.Constant and t.comparators[0].value is None:
            return True
        if t.__class__ is ast.Name and t.id == name:
            return True
    return False


def scoped_state(model: SemanticModel, fn: Function, name: str) -> bool:
    """``fn`` is a context manager (``@contextlib.contextmanager``) whose ``finally``
    writes ``name`` again, or the ``__enter__``/``__exit__`` of a class whose other half
    writes it too (``_STACK.append(self)`` ... ``_STACK.pop()``): state set for the
    duration of a ``with`` block and restored (a nesting counter, a stack of effect
    handlers, of settings) -- bookkeeping around the trace, not state the trace was
    meant to update."""
    if fn.cls is not None and fn.name in _WITH_HALVES:
        other = fn.cls.methods.get(_WITH_HALVES[fn.name])
        return other is not None and any(_writes(n, name) for n in ast.walk(other.node))
    if not any(model.qualname(d, fn.parent) in _CONTEXT_MANAGERS for d in fn.decorators):
        return False
    for t in fn.of_type(ast.Try):
        for stmt in t.finalbody:
            for n in ast.walk(stmt):
                if n.__class__ is ast.Name and n.id == name:
                    return True
    return False


def _writes(n: ast.AST, name: str) -> bool:
    """``n`` rebinds ``name`` or calls a mutating method on it (``_STACK.pop()``)."""
    if n.__class__ is ast.Name:
        return n.id == name and n.ctx.__class__ is ast.Store
    return n.__class__ is ast.Call and n.func.__class__ is ast.Attribute \
        and n.func.value.__class__ is ast.Name and n.func.value.id == name \
        and n.func.attr in ("append", "pop", "extend", "insert", "remove", "clear", "add", "discard", "update")


_WITH_HALVES = {"__enter__": "__exit__", "__exit__": "__enter__",
                "__aenter__": "__aexit__", "__aexit__": "__aenter__"}
_CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})


# calls whose result is shape metadata, a Python value even while tracing
_SHAPE_CALLS = frozenset({"jax.numpy.shape", "numpy.shape", "jax.numpy.ndim", "numpy.ndim", "len"})


def shape_metadata(model: SemanticModel, fn: Function, e: ast.AST) -> bool:
    """``e`` computes shape metadata only (``jnp.shape(x)``, ``x.shape``, ``len(xs)``, a list or
    generator of them): recording it at trace time is bookkeeping, not a lost side effect."""
    t = e.__class__
    if t is ast.Call:
        f = e.func
        q = model.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
        return q in _SHAPE_CALLS
    if t is ast.Attribute:
        return e.attr in K.SHAPE_ATTRS
    if t in (ast.List, ast.Tuple):
        return all(shape_metadata(model, fn, x) for x in e.elts)
    if t in (ast.ListComp, ast.GeneratorExp):
        return shape_metadata(model, fn, e.elt)
    return False


def metadata_log(model: SemanticModel, call: ast.AST, fn: Function) -> bool:
    """``log.append(<shape metadata>)``: a container of shapes filled at trace time."""
    return call.__class__ is ast.Call and call.func.__class__ is ast.Attribute \
        and call.func.attr in ("append", "extend") and len(call.args) == 1 \
        and shape_metadata(model, fn, call.args[0])
