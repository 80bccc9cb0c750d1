"""Is it traced?  The one family of tracedness predicates.

Which to use when -- *code* (does this function body run while JAX traces?)
or *values* (does this expression hold a tracer?):

Code, on :class:`~jaxlint.analysis.scopes.Function`:

``fn.is_traced``
    ``fn`` itself is a traced context: a transform applies to it, traced code
    calls it, it is a Flax/NNX/Equinox module method, a library contract or
    another module traces it.  ``fn.contexts`` say why, ``fn.confidence`` how
    sure (``certain`` for a transform seen in this file), ``fn.primary_context``
    the reason to quote.  Rules that report *in* traced functions iterate
    ``model.traced_functions()`` (the functions with ``is_traced``).
``fn.under_trace``
    ``fn`` or a function around it is traced: a closure defined inside a
    jitted function runs traced too.  Use it for "is this statement (in
    ``scope``) traced code?" (JAX50x placement, purity of nested helpers).
``model._directly_traced(fn)``
    (model-internal) the parameters a transform traces itself, as opposed to
    those traced because a traced call site passes a tracer.

Values, on :class:`~jaxlint.analysis.model.SemanticModel`:

``model.kind(e, fn) & TRACED``
    the raw bit: ``e`` would hold a tracer if ``fn`` runs traced.  The kind
    machinery uses it everywhere; rules rarely need it.
``model.is_traced(e, fn)``
    ``e`` holds a tracer: ``fn.under_trace`` and the ``TRACED`` bit.  The
    default question of a rule ("is this argument a tracer?").
``model.truth_traced(e, fn)``
    ``bool(e)`` needs a tracer's value (``if``/``while``/``assert``/``and``/
    ``not`` tests): a traced array, not a container (whose length decides).
    Use for Python control flow and ``bool()``; ``_truthiness_traced(kind)``
    is the same test on a kind already computed.
``model.traced_culprit(e, fn)``
    the sub-expression that makes ``e`` traced, to name in messages.
``model.is_array(e, fn)``
    ``e`` is certainly a JAX array (traced or not), never a NumPy array or a
    container.

``_args_traced(call, fn)`` (in ``kinds.py``) is a kind helper: the ``TRACED``
bit when any argument of ``call`` is traced.
"""
from __future__ import annotations

import ast
from typing import Optional

from .kinds import CONTAINER, JAX, NUMPY, TRACED
from .scopes import Function


class TracednessMixin:
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
        """``e`` holds a tracer: ``fn`` runs traced and ``e`` is a traced value."""
        return fn.under_trace and bool(self.kind(e, fn) & TRACED)

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
