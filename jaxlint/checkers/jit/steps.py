"""What a training step looks like: optimizer updates, eager differentiation,
parameter updates with ``jax.tree.map``.

Shared by the jit-placement rules (JAX501, JAX503): they ask whether a
function does the array work of a training step, and whether a jitted
function already contains the optimizer update.
"""
from __future__ import annotations

import ast
import re
from typing import Optional, Tuple

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel

# transforms that differentiate
GRAD_NAMES = K.GRAD_NAMES

TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map_with_path", "jax.tree.map_with_path"})

UPDATE_FUNCS = frozenset({"optax.apply_updates", "optax.incremental_update", "optax.periodic_update"})

_OPERATORS = frozenset({"operator.add", "operator.sub", "operator.mul", "operator.truediv"})

# a receiver named like an optimizer: ``tx``, ``self.optimizer``, ``opt``
_OPT_NAME = re.compile(r"(?:^|_)(?:tx|opt|optim|optimizer|optimiser)$")


def _terminal(e: ast.expr) -> Optional[str]:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    return None


def is_optimizer(m: SemanticModel, e: ast.expr, scope: Function) -> bool:
    """``e`` names an optax optimizer (a ``GradientTransformation``) or an NNX ``Optimizer``."""
    name = _terminal(e)
    if name is None:
        return False
    if _OPT_NAME.search(name.lower()):
        return True
    values = []
    if isinstance(e, ast.Name):
        values = [b.value for b in m.lookup(name, scope) if isinstance(b.node, ast.Assign) and not b.path]
        owner = m.resolve_scope(name, scope) or m.module
    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        owner = scope.enclosing_method()
        if owner is None or owner.cls is None or e.value.id != owner.self_name:
            return False
        values = owner.cls.setup_attrs.get(name, [])
    for v in values:
        if isinstance(v, ast.Call):
            q = m.qualname(v.func, owner)
            if q is not None and (q.startswith("optax.") or q in ("flax.nnx.Optimizer", "flax.nnx.ModelAndOptimizer")):
                return True
    return False




def optimizer_update(m: SemanticModel, fn: Function, min_args: int = 2) -> Optional[Tuple[str, ast.Call]]:
    """A call in ``fn`` that applies an optimizer step: ``tx.update(grads, state, ...)``,
    ``optax.apply_updates``, ``state.apply_gradients(grads=...)``."""
    for call in fn.of_type(ast.Call):
        f = call.func
        if f.__class__ is ast.Attribute:
            if f.attr == "update" and len(call.args) + len(call.keywords) >= min_args \
                    and is_optimizer(m, f.value, fn):
                return f"`{ast.unparse(f)}`", call
            if f.attr == "apply_gradients" and (call.args or any(k.arg == "grads" for k in call.keywords)):
                return f"`{ast.unparse(f)}`", call
        q = m.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
        if q in UPDATE_FUNCS:
            return f"`{q}`", call
    return None


def arithmetic_callable(m: SemanticModel, e: ast.expr, scope: Function) -> bool:
    """A function argument of ``jax.tree.map`` that computes (``lambda p, g: p - lr * g``)."""
    if isinstance(e, ast.Lambda):
        for n in ast.walk(e.body):
            if isinstance(n, ast.BinOp):
                return True
            if isinstance(n, ast.Call):
                q = m.qualname(n.func, scope)
                if q is not None and q.startswith(("jax.numpy.", "jax.lax.", "optax.")):
                    return True
        return False
    q = m.qualname(e, scope)
    if q is not None:
        return q.startswith(("jax.numpy.", "jax.lax.", "optax.")) or q in _OPERATORS
    t = m.resolve_callable(e, scope)
    if t is not None:
        fn = t.function
        for r in fn.of_type(ast.Return):
            if r.value is not None and any(isinstance(n, ast.BinOp) for n in ast.walk(r.value)):
                return True
    return False


def tree_update(m: SemanticModel, fn: Function) -> Optional[ast.Call]:
    """A ``jax.tree.map`` in ``fn`` that combines two or more trees with arithmetic
    (``jax.tree.map(lambda p, g: p - lr * g, params, grads)``): an update, not a summary."""
    for call in fn.of_type(ast.Call):
        f = call.func
        if f.__class__ not in (ast.Name, ast.Attribute) or not call.args:
            continue
        q = m.qualname(f, fn)
        if q in TREE_MAPS and len(call.args) >= 3 and arithmetic_callable(m, call.args[0], fn):
            return call
    return None


def contains_update(m: SemanticModel, fn: Function) -> bool:
    """``fn`` (or a function of this module it calls) applies an optimizer/parameter update."""
    seen = set()
    todo = [(fn, 0)]
    while todo:
        f, depth = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if optimizer_update(m, f, min_args=1) is not None or tree_update(m, f) is not None:
            return True
        for child in f.children:
            todo.append((child, depth))
        if depth < 2:
            for call in f.of_type(ast.Call):
                if call.func.__class__ in (ast.Name, ast.Attribute):
                    t = m.resolve_callable(call.func, f)
                    if t is not None and t.function is not f:
                        todo.append((t.function, depth + 1))
    return False


def eager_grad(m: SemanticModel, fn: Function) -> Optional[Tuple[str, ast.Call]]:
    """``jax.grad(f)(...)`` / ``g = jax.value_and_grad(f); g(...)`` evaluated in ``fn``."""
    local_grads = {}
    for a in fn.of_type(ast.Assign):
        if len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Call):
            q = m.qualname(a.value.func, fn)
            if q in GRAD_NAMES:
                local_grads[a.targets[0].id] = q
    for call in fn.of_type(ast.Call):
        f = call.func
        if f.__class__ is ast.Call:
            q = m.qualname(f.func, fn)
            if q in GRAD_NAMES:
                return f"`{ast.unparse(f.func)}`", call
        elif f.__class__ is ast.Name and f.id in local_grads:
            return f"`{local_grads[f.id]}`", call
    return None
