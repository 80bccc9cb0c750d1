"""Straight-line rebinding: which assignment a load of a name sees.

Value kinds are flow-insensitive: a name's kind joins every binding of it in
its scope.  That is wrong in one common, easy case -- a name rebound in the
straight-line code of a function::

    x = jax.tree_util.tree_structure(x)   # x was a traced pytree, now a PyTreeDef
    if x == y: ...                         # a Python comparison

    group = int(length / m)                # a Python int ...
    if group % offset: ...                 # ... here
    for group in jnp.split(inputs, n):     # ... an array only from here on

A load sees exactly one binding when the nearest binding before it is a plain
``name = value`` statement in the function's own top-level block, no binding of
the name lies between the two, and no loop around the load rebinds the name
(a later binding would reach the load through the loop's back edge).  The
kind of such a load is the kind of that value.  Everything else keeps the
flow-insensitive answer.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from .scopes import Function

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Rebinding:
    """The bindings of the names a function binds more than once."""

    __slots__ = ("stores", "top_assign", "loops")

    def __init__(self, fn: Function):
        # name -> [(end position of the binding statement, is a top-level plain assign, value)]
        self.stores: Dict[str, List[Tuple[Tuple[int, int], bool, Optional[ast.expr]]]] = {}
        # loops of the function: (start, end, names bound inside)
        self.loops: List[Tuple[Tuple[int, int], Tuple[int, int], set]] = []
        body = getattr(fn.node, "body", None)
        if not isinstance(body, list):
            return
        stores: Dict[str, list] = {p: [((0, 0), False, None)] for p in fn.param_nodes}
        for stmt in body:
            top = stmt.__class__ is ast.Assign and len(stmt.targets) == 1 \
                and stmt.targets[0].__class__ is ast.Name
            self._collect(stmt, stmt, top, stores)
        self.stores = {n: sorted(v, key=lambda t: t[0]) for n, v in stores.items() if len(v) > 1}

    def _collect(self, node: ast.AST, stmt: ast.stmt, top: bool, stores: Dict[str, list]) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n.__class__ is ast.Name and n.ctx.__class__ is not ast.Load:
                end = (stmt.end_lineno, stmt.end_col_offset)
                stores.setdefault(n.id, []).append((end, top, stmt.value if top else None))
            elif n.__class__ in _LOOPS and n is not node or (n is node and n.__class__ in _LOOPS):
                names = {x.id for x in ast.walk(n) if x.__class__ is ast.Name and x.ctx.__class__ is not ast.Load}
                self.loops.append(((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset), names))
            if n.__class__ in _NESTED:
                continue
            for child in ast.iter_child_nodes(n):
                if child.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    # its name is a binding of this function; its body is not
                    stores.setdefault(child.name, []).append(
                        ((child.end_lineno, child.end_col_offset), False, None))
                    continue
                stack.append(child)


class FlowMixin:
    def reaching_value(self, e: ast.Name, fn: Function) -> Optional[ast.expr]:
        """The value of the one straight-line assignment the load ``e`` (in ``fn``)
        sees, when the name is bound more than once in ``fn``; else None."""
        cache = getattr(self, "_rebinding_cache", None)
        if cache is None:
            cache = self._rebinding_cache = {}
        rb = cache.get(id(fn))
        if rb is None:
            rb = cache[id(fn)] = _Rebinding(fn)
        stores = rb.stores.get(e.id)
        if not stores:
            return None
        at = (e.lineno, e.col_offset)
        before = [s for s in stores if s[0] <= at]
        if not before:
            return None
        end, top, value = before[-1]
        if not top or value is None:
            return None
        for start, stop, names in rb.loops:
            if start <= at <= stop and e.id in names:
                return None   # a binding later in the loop reaches this load again
        return value
