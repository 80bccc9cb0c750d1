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
``model.surely_array(e, fn)``
    stricter, for rules that must not mistake a pytree for an array (a traced
    parameter is ``TRACED | JAX`` even when it holds a list of layers): a
    traced name with evidence that it is one array.

``_args_traced(call, fn)`` (in ``kinds.py``) is a kind helper: the ``TRACED``
bit when any argument of ``call`` is traced.
"""
from __future__ import annotations

import ast
from typing import Optional

from . import knowledge as K
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

    def surely_array(self, e: ast.AST, fn: Function) -> bool:
        """``e`` is surely one traced array, not a pytree of arrays (a list of layers, a
        dict of parameters): its kind is ``TRACED | JAX`` without ``CONTAINER``, and it is
        a name that is either a parameter of ``fn`` annotated as an array or used like one
        in ``fn`` (an arithmetic operand, ``.shape``, ``.T``, ``.reshape``, ...), or a local
        of ``fn`` bound by at least one plain ``name = value`` and all of whose plain
        assignments are arithmetic or a ``jax.numpy``/``lax``/``random``/``nn`` call
        returning one array (``+=``-style updates keep it an array)."""
        k = self.kind(e, fn)
        if not (k & TRACED and k & JAX) or k & CONTAINER or e.__class__ is not ast.Name:
            return False
        name = e.id
        if name in fn.param_nodes:
            ann = fn.param_nodes[name].annotation
            if ann is not None:
                q = self.qualname(ann.value if isinstance(ann, ast.Subscript) else ann, fn.parent)
                if q in K.ARRAY_ANNOTATIONS:
                    return True
            return self._used_as_array(fn, name)
        # the values of its plain assignments and updates (unpacking, loop and other
        # targets add nothing either way)
        bindings = [b for b in self.bindings(name, fn)
                    if b.kind == "aug" or (b.node.__class__ is ast.Assign and not b.path)]
        if not bindings:
            return False
        for b in bindings:
            if b.kind == "aug":
                continue
            v = b.value
            if v.__class__ is ast.BinOp:
                continue
            if v.__class__ is ast.Call and v.func.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(v.func, fn)
                if q is not None and q.startswith(K.SINGLE_ARRAY_MODULES) and q not in K.MULTI_ARRAY_RESULTS:
                    continue
            return False
        return True

    @staticmethod
    def _used_as_array(fn: Function, name: str) -> bool:
        """``name`` is used like an array somewhere in ``fn``: an arithmetic operand, ``.shape``."""
        for n in fn.walk():
            t = n.__class__
            if t is ast.BinOp:
                for side in (n.left, n.right):
                    if side.__class__ is ast.Name and side.id == name:
                        return True
            elif t is ast.Attribute and n.attr in K.ARRAY_ONLY_ATTRS and n.value.__class__ is ast.Name \
                    and n.value.id == name:
                return True
        return False
