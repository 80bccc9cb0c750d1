"""Is it traced?  The family of tracedness predicates (a part of
:class:`~jaxlint.analysis.model.SemanticModel`); see :class:`TracednessMixin`."""
from __future__ import annotations

import ast
from typing import Optional

from .kinds import CONTAINER, JAX, NUMPY, TRACED
from .scopes import Function


class TracednessMixin:
    @staticmethod
    def _in_traced(fn: Function) -> bool:
        return fn.parent is not None and fn.parent.under_trace

    @staticmethod
    def _truthiness_traced(k: int) -> bool:
        """``bool(v)`` needs a tracer's value: not for a container (its length decides)."""
        return bool(k & TRACED) and bool(k & JAX) and not (k & CONTAINER)

    def truth_traced(self, e: ast.AST, fn: Function) -> bool:
        """Does ``bool(e)`` (an ``if``/``while``/``and``/``not`` test) need a traced value?"""
        if isinstance(e, ast.BoolOp):
            return any(self.truth_traced(v, fn) for v in e.values)
        return self._truthiness_traced(self.kind(e, fn))

    def is_traced(self, e: ast.AST, fn: Function) -> bool:
        return bool(fn.contexts or self._in_traced(fn)) and bool(self.kind(e, fn) & TRACED)

    def traced_culprit(self, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """The innermost-leftmost sub-expression that makes ``e`` traced.

        Used in messages: "`if` on traced value `x`".  Returns a Name when
        one carries the taint, else the smallest traced call or attribute.
        """
        if not self.kind(e, fn) & TRACED:
            return None
        t = e.__class__
        if t is ast.Name:
            return e
        if t is ast.Call:
            if isinstance(e.func, ast.Attribute):
                c = self.traced_culprit(e.func.value, fn)
                if c is not None:
                    return c
            for a in list(e.args) + [k.value for k in e.keywords]:
                c = self.traced_culprit(a, fn)
                if c is not None:
                    return c
            return e
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                c = self.traced_culprit(child, fn)
                if c is not None:
                    return c
        return e

    def is_array(self, e: ast.AST, fn: Function) -> bool:
        """A JAX array for sure: traced array or bound from a jax call, never a NumPy array or container."""
        k = self.kind(e, fn)
        return bool(k & JAX) and not (k & (NUMPY | CONTAINER))
