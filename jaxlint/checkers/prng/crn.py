"""Common random numbers: one key given on purpose to two computations that are compared.

Tests check an implementation against a reference by feeding both the same randomness::

    ref = reference_attention(q, k, v, dropout_key)
    out = fused_attention(q, k, v, dropout_key)
    np.testing.assert_allclose(out, ref)

    params_f = float_layer.init(key, x)
    params_q = quantized_layer.init(key, x)
    self.assertAllClose(float_layer.apply(params_f, x), quantized_layer.apply(params_q, x))

The key is consumed twice, and that is the point: the comparison needs the same numbers on
both sides.  :func:`compared_together` recognises the shape: what each consumer returns
(followed through the function's assignments) meets the other in one assertion.
"""
from __future__ import annotations

import ast
from typing import Optional, Set

from ...analysis import knowledge as K
from ...analysis.model import Function

# calls that compare values (by their last name: ``np.testing.assert_allclose``,
# ``self.assertAllClose``, ``chex.assert_trees_all_close``, ``jnp.allclose``)
_COMPARERS = frozenset({"allclose", "array_equal", "isclose", "array_equiv", "tree_all_close"})


def _sides(node: ast.AST) -> Optional[list]:
    """The compared operands of a comparison of values -- an ``assert`` of ``==``/``<``/...,
    or a call like ``assert_allclose``/``assertAllClose``/``array_equal`` -- else None.
    Comparisons of shapes, dtypes, lengths or types compare no random numbers."""
    if node.__class__ is ast.Assert:
        node = node.test
        if node.__class__ is ast.Compare and not any(op.__class__ in (ast.Is, ast.IsNot, ast.In, ast.NotIn)
                                                     for op in node.ops):
            sides = [node.left] + list(node.comparators)
            return sides if not any(_metadata(x) for x in sides) else None
    if node.__class__ is not ast.Call:
        return None
    f = node.func
    name = (f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else "").lower()
    if not (name in _COMPARERS or (name.startswith("assert") and ("close" in name or "equal" in name))):
        return None
    args = [a for a in node.args if a.__class__ is not ast.Starred]
    return args if len(args) >= 2 and not any(_metadata(x) for x in args) else None


def _metadata(e: ast.AST) -> bool:
    """``a.shape``, ``x.dtype``, ``len(xs)``, ``type(v)``: a property of a value, not its numbers."""
    if e.__class__ is ast.Attribute:
        return e.attr in K.SHAPE_ATTRS
    return e.__class__ is ast.Call and e.func.__class__ is ast.Name and e.func.id in ("len", "type", "isinstance")


def _names(node: Optional[ast.AST]) -> Set[str]:
    return {n.id for n in ast.walk(node) if n.__class__ is ast.Name} if node is not None else set()


def _results(stmt: Optional[ast.stmt]) -> Set[str]:
    """The names a consumer's statement binds (``params_f = layer.init(key, x)``)."""
    if stmt.__class__ is ast.Assign:
        return set().union(*(_names(t) for t in stmt.targets))
    if stmt.__class__ in (ast.AnnAssign, ast.AugAssign):
        return _names(stmt.target)
    return set()


def _derived(fn: Function, seeds: Set[str]) -> Set[str]:
    """``seeds`` and every name the function computes from them (flow-insensitive)."""
    out = set(seeds)
    assigns = fn.of_type(ast.Assign)
    for _ in range(8):
        grew = False
        for a in assigns:
            if _names(a.value) & out:
                new = set().union(*(_names(t) for t in a.targets)) - out
                if new:
                    out |= new
                    grew = True
        if not grew:
            break
    return out


def compared_together(fn: Function, first, second) -> bool:
    """What two consumers (:class:`~.states.Use`) of one key produce is compared, one on
    each side, in an assertion of ``fn``: directly (``assert_allclose(f(key), g(key))``) or
    through the names their statements bind and what the function computes from them."""
    s1, s2 = first.stmt, second.stmt
    if s1 is None or s2 is None:
        return False
    if s1 is s2:
        for node in ast.walk(s1):
            sides = _sides(node)
            if sides is not None:
                inside = [{id(n) for n in ast.walk(x)} for x in sides]
                if any(id(first.call) in inside[i] and id(second.call) in inside[j]
                       for i in range(len(sides)) for j in range(len(sides)) if i != j):
                    return True
        return False
    a, b = _results(s1), _results(s2)
    if not a or not b:
        return False
    a, b = _derived(fn, a), _derived(fn, b)
    only_a, only_b = a - b, b - a
    for node in fn.walk():
        sides = _sides(node)
        if sides is None:
            continue
        names = [_names(x) for x in sides]
        if any(names[i] & only_a and names[j] & only_b
               for i in range(len(names)) for j in range(len(names)) if i != j):
            return True
        # ``assert abs(y_f - y_q).max() < tol``: the two sides of a difference
        for x in sides:
            for d in ast.walk(x):
                if d.__class__ is ast.BinOp and d.op.__class__ is ast.Sub:
                    left, right = _names(d.left), _names(d.right)
                    if (left & only_a and right & only_b) or (left & only_b and right & only_a):
                        return True
    return False


def reevaluated(fn: Function, first, second) -> bool:
    """The second consumer (:class:`~.states.Use`) is called on inputs the function computes
    from what the first returned (``g = jax.grad(loss)(params)``, ``perturbed = params + rho * g``,
    ``jax.grad(loss)(perturbed)``): one randomized computation re-evaluated at a point derived
    from its own result -- a sharpness-aware step, a line search -- keeps its randomness so the
    two evaluations differ only by the step."""
    same = getattr(first.arg, "jaxlint_closure", None)
    if not ((same and same == getattr(second.arg, "jaxlint_closure", None)) or
            (first.ident is not None and first.ident == second.ident)):
        return False     # (two different computations: ``init`` then ``apply`` is a reuse)
    a = _results(first.stmt)
    if not a:
        return False
    derived = _derived(fn, a)
    call = second.call
    args = [x.value if x.__class__ is ast.Starred else x for x in call.args] + [k.value for k in call.keywords]
    return any(_names(x) & derived for x in args if x is not second.arg)
