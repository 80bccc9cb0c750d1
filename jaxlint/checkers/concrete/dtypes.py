"""Which expressions hold *boolean* arrays, judged from the shape of the code.

JAX204 needs to tell a boolean-mask index (``x[x > 0]``, data-dependent
shape) from an integer gather (``x[idx]``, fine under ``jit``).  Nothing is
imported or evaluated: an expression is boolean when it is a comparison, a
``~``/``&``/``|``/``^`` of booleans, a call of a predicate such as
``jnp.isnan`` or ``jnp.logical_and``, an ``.astype(bool)``, a reshaping of a
boolean, or a name every binding of which is boolean.  A helper's parameter
is boolean when a traced call site passes a boolean into it.  Names whose
bindings say nothing (a parameter of a jitted function, ``batch["mask"]``)
fall back to their spelling: ``mask``, ``*_mask``, ``is_*``/``has_*``.

:meth:`BoolAnalysis.of` answers ``True`` (boolean), ``False`` (known not
boolean: arithmetic, ``argmax``, an integer literal...) or ``None`` (unknown).
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

from ...analysis.bindings import ASSIGN, AUG, FOR, WITH
from ...analysis.model import Function, SemanticModel

_JNP = "jax.numpy."

# calls whose result is a boolean array
BOOL_FUNCTIONS = frozenset(
    [_JNP + n for n in (
        "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isclose", "isin", "isreal", "iscomplex",
        "signbit", "logical_and", "logical_or", "logical_not", "logical_xor", "equal", "not_equal",
        "greater", "greater_equal", "less", "less_equal", "any", "all", "in1d",
    )]
    + ["jax.lax." + n for n in ("lt", "le", "gt", "ge", "eq", "ne", "is_finite")]
    + ["jax.random.bernoulli"]
)

# calls that keep the dtype of their first argument (unless given ``dtype=``)
PASSTHROUGH_FUNCTIONS = frozenset(_JNP + n for n in (
    "reshape", "broadcast_to", "expand_dims", "squeeze", "tile", "repeat", "ravel", "transpose",
    "flip", "fliplr", "flipud", "roll", "moveaxis", "swapaxes", "asarray", "array", "atleast_1d",
    "atleast_2d", "atleast_3d", "tril", "triu", "diagonal", "take", "take_along_axis",
))

# array constructors whose dtype comes from a ``dtype`` argument
DTYPE_CONSTRUCTORS = {
    _JNP + "zeros": 1, _JNP + "ones": 1, _JNP + "empty": 1, _JNP + "full": 2,
    _JNP + "zeros_like": 1, _JNP + "ones_like": 1, _JNP + "empty_like": 1, _JNP + "full_like": 2,
    _JNP + "array": 1, _JNP + "asarray": 1, _JNP + "eye": 3, _JNP + "tri": 3,
}

BOOL_DTYPES = frozenset({"bool", "jax.numpy.bool_", "jax.numpy.bool", "numpy.bool_", "numpy.bool"})

BOOL_METHODS = frozenset({"any", "all"})
PASSTHROUGH_METHODS = frozenset({
    "reshape", "squeeze", "flatten", "ravel", "transpose", "copy", "repeat", "swapaxes", "T", "mT",
    "block_until_ready",
})

_MASK_SUFFIXES = ("mask", "masks")
_BOOL_PREFIXES = ("is", "has")


def mask_like_name(name: str) -> bool:
    """``mask``, ``attn_mask``, ``padding_masks``, ``is_valid``, ``has_label``."""
    parts = [p for p in name.lower().split("_") if p]
    if not parts:
        return False
    if parts[-1] in _MASK_SUFFIXES:
        return True
    return len(parts) > 1 and parts[0] in _BOOL_PREFIXES


class BoolAnalysis:
    """Per-model cache of which names hold boolean arrays -- proven by the code (a comparison,
    ``~``/``&``, ``jnp.isnan``, ``.astype(bool)``, a bool annotation, names bound from those).
    :class:`NamedBoolAnalysis` also takes a name for evidence (``mask``, ``is_valid``): a guess, as
    an integer index array can be called ``reindex_mask`` too, which JAX gathers with a fixed
    shape."""

    _MAX_DEPTH = 12
    names = False

    def __init__(self, model: SemanticModel):
        self.m = model
        self._memo: Dict[Tuple[int, str], Optional[bool]] = {}
        self._active: Set[Tuple[int, str]] = set()

    @classmethod
    def for_model(cls, model: SemanticModel) -> "BoolAnalysis":
        return model.facts(cls)

    # ------------------------------------------------------------ queries
    def is_bool(self, e: ast.AST, fn: Function) -> bool:
        return self.of(e, fn) is True

    def of(self, e: ast.AST, fn: Function, depth: int = 0) -> Optional[bool]:
        if depth > self._MAX_DEPTH or e is None:
            return None
        t = e.__class__
        if t is ast.Compare:
            return True
        if t is ast.Name:
            return self._name(e.id, fn, depth)
        if t is ast.UnaryOp:
            op = e.op.__class__
            if op is ast.Invert:
                return self.of(e.operand, fn, depth + 1)
            if op is ast.Not:
                return True
            return False
        if t is ast.BinOp:
            op = e.op.__class__
            if op in (ast.BitAnd, ast.BitOr, ast.BitXor):
                left = self.of(e.left, fn, depth + 1)
                right = self.of(e.right, fn, depth + 1)
                if left is True or right is True:
                    return True
                if left is False and right is False:
                    return False
                return None
            return False
        if t is ast.Subscript:
            return self.of(e.value, fn, depth + 1)
        if t is ast.IfExp:
            return _both(self.of(e.body, fn, depth + 1), self.of(e.orelse, fn, depth + 1))
        if t is ast.Call:
            return self._call(e, fn, depth)
        if t is ast.Attribute:
            if e.attr in ("T", "mT", "real"):
                return self.of(e.value, fn, depth + 1)
            return True if self.names and mask_like_name(e.attr) else None
        if t is ast.Constant:
            return isinstance(e.value, bool)
        if t is ast.NamedExpr:
            return self.of(e.value, fn, depth + 1)
        return None

    # ------------------------------------------------------------- pieces
    def _is_bool_dtype(self, e: ast.AST, fn: Function) -> bool:
        if isinstance(e, ast.Constant):
            return e.value == "bool"
        if isinstance(e, (ast.Name, ast.Attribute)):
            return self.m.qualname(e, fn) in BOOL_DTYPES
        return False

    def _dtype_arg(self, call: ast.Call, pos: Optional[int]) -> Optional[ast.AST]:
        for kw in call.keywords:
            if kw.arg == "dtype":
                return kw.value
        if pos is not None and len(call.args) > pos:
            return call.args[pos]
        return None

    def _call(self, call: ast.Call, fn: Function, depth: int) -> Optional[bool]:
        func = call.func
        q = self.m.qualname(func, fn) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if q is not None:
            if q in BOOL_FUNCTIONS:
                return True
            if q in ("jax.numpy.where", "jax.lax.select") and len(call.args) == 3:
                return _both(self.of(call.args[1], fn, depth + 1), self.of(call.args[2], fn, depth + 1))
            if q in DTYPE_CONSTRUCTORS or q in PASSTHROUGH_FUNCTIONS:
                dt = self._dtype_arg(call, DTYPE_CONSTRUCTORS.get(q))
                if dt is not None:
                    return self._is_bool_dtype(dt, fn)
                if q in PASSTHROUGH_FUNCTIONS and call.args:
                    return self.of(call.args[0], fn, depth + 1)
                return False
            if q == "bool":
                return True
            if q.startswith(("jax.", "numpy.", "optax.", "flax.")) or q in ("int", "float", "len", "range"):
                return False
            return None
        returned = self._returns(call, fn, depth)
        if returned is not None:
            return returned
        if isinstance(func, ast.Attribute):
            name = func.attr
            if name in BOOL_METHODS:
                return True
            if name == "astype" and call.args:
                return self._is_bool_dtype(call.args[0], fn)
            if name in PASSTHROUGH_METHODS:
                return self.of(func.value, fn, depth + 1)
            if name in ("get", "pop") and call.args and isinstance(call.args[0], ast.Constant) \
                    and isinstance(call.args[0].value, str):
                return True if self.names and mask_like_name(call.args[0].value) else None
            return None
        return None

    def _returns(self, call: ast.Call, fn: Function, depth: int) -> Optional[bool]:
        """A call of a function of this module whose every ``return`` is boolean."""
        target = self.m.resolve_callable(call.func, fn)
        if target is None or target.transforms:
            return None
        callee = target.function

        def compute() -> Optional[bool]:
            if callee.is_lambda:
                values = [callee.node.body]
            else:
                values = [r.value for r in callee.of_type(ast.Return)]
            results = [self.of(v, callee, depth + 1) if v is not None else False for v in values]
            return True if results and all(r is True for r in results) else None

        return self._memoized((id(callee), "<return>"), compute)

    def _memoized(self, key: Tuple[int, str], compute) -> Optional[bool]:
        """``compute()`` once per key; ``None`` (unknown) while it is being
        computed, so that recursive functions and self-referencing names end."""
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            return None
        self._active.add(key)
        try:
            out = compute()
        finally:
            self._active.discard(key)
        self._memo[key] = out
        return out

    def _name(self, name: str, fn: Function, depth: int) -> Optional[bool]:
        s = self.m.resolve_scope(name, fn)
        if s is None or s.is_module:
            return None

        def compute() -> Optional[bool]:
            results: List[Optional[bool]] = []
            for value in self._bound_values(name, s):
                results.append(None if value is None else self.of(value, s, depth + 1))
            if name in s.param_nodes:
                results.append(self._param(s, name, depth))
            if any(r is False for r in results):
                return False
            if results and all(r is True for r in results):
                return True
            return True if self.names and mask_like_name(name) else None

        return self._memoized((id(s), name), compute)

    def _param(self, fn: Function, name: str, depth: int) -> Optional[bool]:
        a = fn.param_nodes.get(name)
        if a is not None and a.annotation is not None:
            ann = a.annotation
            head = ann.value if isinstance(ann, ast.Subscript) else ann
            if isinstance(head, (ast.Name, ast.Attribute)):
                last = head.id if isinstance(head, ast.Name) else head.attr
                if last == "Bool":      # jaxtyping.Bool[Array, "..."]
                    return True
                if last == "bool":
                    return True
        found: List[Optional[bool]] = []
        for ctx in fn.contexts:
            call = ctx.node
            if ctx.transform != "call" or ctx.caller is None or not isinstance(call, ast.Call):
                continue
            target = self.m.resolve_callable(call.func, ctx.caller)
            if target is None or target.function is not fn:
                continue
            pairs, _ = self.m.bind_arguments(target, call)
            for p, arg in pairs:
                if p == name:
                    found.append(self.of(arg, ctx.caller, depth + 1))
        if any(r is True for r in found):
            return True
        if found and all(r is False for r in found):
            return False
        return None

    def _bound_values(self, name: str, s: Function) -> List[Optional[ast.AST]]:
        """The expressions ``name`` is bound from in scope ``s`` (parameters aside):
        the matching element of a tuple display for ``=``; the operand of
        ``|=``/``&=``/``^=`` (boolean-preserving) and a number for other
        augmented assignments; ``None`` for loop, ``with`` and opaque bindings."""
        out: List[Optional[ast.AST]] = []
        for b in self.m.bindings(name, s):
            if b.kind == ASSIGN:
                out.append(b.element)
            elif b.kind == AUG:
                bitwise = isinstance(b.node.op, (ast.BitAnd, ast.BitOr, ast.BitXor))
                out.append(b.value if bitwise else ast.Constant(0))
            elif b.kind in (FOR, WITH):
                out.append(None)
        return out


def _both(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    if a is True and b is True:
        return True
    if a is False or b is False:
        return False
    return None


class NamedBoolAnalysis(BoolAnalysis):
    """:class:`BoolAnalysis` that also reads a mask-like name as boolean (the strict profile's)."""

    names = True
