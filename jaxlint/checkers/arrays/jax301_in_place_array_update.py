from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import CERTAIN, CONTAINER, JAX, TRACED, Function, SemanticModel
from ...analysis import knowledge as K
from ...analysis.objects import held_as_sequence, kernel_ref, mutable_by_design, ref_named
from ...fixes.edits import SAFE, Edit, Fix
from ..base import Context, Finding, FixOffer, Rule, handled_anywhere, register

_AUG_METHODS = {
    ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide", ast.Pow: "power",
}
_OP_TEXT = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.Pow: "**=",
            ast.FloorDiv: "//=", ast.Mod: "%=", ast.MatMult: "@=", ast.BitAnd: "&=", ast.BitOr: "|=",
            ast.BitXor: "^=", ast.LShift: "<<=", ast.RShift: ">>="}


@register
class InPlaceArrayUpdate(Rule):
    """
    ## What it does
    Flags item assignment on a JAX array — `x[i] = v` and augmented forms such
    as `x[i] += v` — where `x` is a traced value or was produced by a
    `jax.numpy`/`jax` call, inside or outside `jax.jit`. NumPy arrays and
    Python lists/dicts mutated in place are not flagged, nor is a traced value
    the function treats as a Python container (iterated, tested with
    `isinstance(x, dict)`, or with items updated by `x[i].at[...]`): a list of
    arrays is traced too, and the rule cannot tell it from one array. Nor is
    an assignment inside a `try` whose `except` catches the `TypeError` (or any
    `Exception`): a demonstration that JAX arrays are immutable.

    ## Why is this bad?
    PyTorch tensors and NumPy arrays can be written in place (`t[0] = 1`,
    `t.add_(1)`). JAX arrays are immutable: `x[i] = v` raises
    `TypeError: JAX arrays are immutable`, eagerly and under `jit` alike.
    JAX's functional update `x.at[i].set(v)` returns a new array; under `jit`
    XLA performs it in place when it can, so it costs no copy.

    ## Example
    ```python
    x = jnp.zeros(10)
    x[0] = 1.0
    x[1:3] += 2.0
    ```

    ## Use instead
    ```python
    x = jnp.zeros(10)
    x = x.at[0].set(1.0)
    x = x.at[1:3].add(2.0)
    ```

    ## Fix safety
    The fix rewrites `x[idx] = v` to `x = x.at[idx].set(v)` and `+=`, `-=`,
    `*=`, `/=`, `**=` to `.add`, `.subtract`, `.multiply`, `.divide`,
    `.power`. It is safe: the original statement always raises, so no working
    behaviour changes; the index and value expressions are kept verbatim
    (comments inside them included) and evaluated once, as before. Other
    operators (`//=`, `%=`, ...) and chained assignments are reported without
    a fix.
    """

    confirm = ("trace-error", "TypeError: immutable", "TypeError: does not support item assignment")
    summary = "item assignment on an immutable JAX array raises `TypeError`"
    fix = FixOffer("Use the functional `.at[...]` update", SAFE)

    def profiled(self, ctx: Context, found):
        """An assignment inside a ``try`` whose handler catches the ``TypeError`` (or any
        ``Exception``) shows the error on purpose: a tutorial's "should raise an error" cell."""
        errors = K.TRACE_ERRORS[self.code]
        return [f for f in found if not handled_anywhere(ctx.model, f.line, errors)]

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for fn in m.functions:
            for node in fn.of_type(ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and self._is_array_target(ctx, t, fn) \
                            and not _functional_twin(m, node, t, fn):
                        fix = self._fix(ctx, node, t, "set") if len(node.targets) == 1 else None
                        yield self._finding(ctx, fn, node, t, "=", fix)
            for node in fn.of_type(ast.AugAssign):
                t = node.target
                if isinstance(t, ast.Subscript) and self._is_array_target(ctx, t, fn):
                    method = _AUG_METHODS.get(type(node.op))
                    fix = self._fix(ctx, node, t, method) if method else None
                    yield self._finding(ctx, fn, node, t, _OP_TEXT.get(type(node.op), "="), fix)

    @staticmethod
    def _is_array_target(ctx: Context, t: ast.Subscript, fn: Function) -> bool:
        sl = t.slice
        if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
            return False
        m = ctx.model
        if isinstance(sl, ast.Name) and sl.id in m.dict_key_names(fn):
            return False   # ``out[k] = v`` for k of ``d.items()``: a dict keyed like ``d``
        base = t.value
        if not fn.under_trace and not _eager_array_candidate(m, base, fn):
            return False   # (cheap: eager code, a plain parameter or a Python display)
        if m.holds_dict(base, fn):
            return False   # ``batch["label"] = {}`` ... ``batch["label"][m] = v``
        if isinstance(base, (ast.Name, ast.Attribute)) and ref_named(base) or kernel_ref(m, t, fn):
            return False   # a Pallas/state ref: written through on purpose
        m = ctx.model
        if mutable_by_design(m, base, fn):
            return False   # an NNX Variable or a jax.Ref: `v[...] += 1` is its update API
        if isinstance(sl, ast.Constant) and sl.value is Ellipsis and not _made_here(m, base, fn):
            return False   # `x[...] = v`: the Variable/Ref idiom, on a value made elsewhere
        if base.__class__ is ast.Attribute:
            seen = m.reaching_attr_value(base, fn)
            if seen is not None and not m.is_array(seen, fn):
                return False   # ``self.cd = np.array(...)`` earlier in this method: what it writes into
        if not m.is_array(base, fn) or (fn.contexts and not m.vouched_array(base, fn)):
            return False
        if fn.contexts and _given_pytree(m, base, fn) and not _array_index(m, sl, fn) \
                and not m.evidently_array(base, fn):
            # a transform's argument is a pytree (a dict of arrays as often as one array): indexed
            # with a key of unknown kind (``_x[R_key]``, ``R_key = prop_keys[...]``) and never used
            # as an array, it may be a dict -- unknown
            return False
        # a pytree of arrays (a list of layer caches, a list's gradient) is traced too:
        # when this function treats it as a Python container, it cannot tell -- silent
        return _made_here(m, base, fn) or not held_as_sequence(base, fn)

    def _finding(self, ctx: Context, fn: Function, node: ast.stmt, t: ast.Subscript, op: str,
                 fix: Optional[Fix]) -> Finding:
        base = ast.unparse(t.value)
        if len(base) > 30:
            base = base[:27] + "..."
        method = {"=": "set", "+=": "add", "-=": "subtract", "*=": "multiply", "/=": "divide",
                  "**=": "power"}.get(op, "set")
        where = f" inside {fn.trace_description()}" if fn.contexts else ""
        msg = (f"`{base}[...] {op} ...` assigns into an immutable JAX array{where}; "
               f"use `{base} = {base}.at[...].{method}(...)`")
        conf = fn.confidence if fn.contexts else CERTAIN
        return ctx.finding(self, node, msg, confidence=conf, fix=fix)

    def _fix(self, ctx: Context, node: ast.stmt, t: ast.Subscript, method: str) -> Optional[Fix]:
        src = ctx.source
        base_text = src.segment(t.value)
        if "\n" in base_text or "\r" in base_text:
            return None
        value_end = src.offset(t.value.end_lineno, t.value.end_col_offset)
        sub_end = src.offset(t.end_lineno, t.end_col_offset)
        index_text = src.text[value_end:sub_end]          # "[i, j]" with any comments inside
        if not index_text.startswith("["):
            return None
        value_text = src.segment(node.value)
        if isinstance(node.value, (ast.Tuple,)) and not value_text.startswith("("):
            value_text = f"({value_text})"
        new = f"{base_text} = {base_text}.at{index_text}.{method}({value_text})"
        start, end = src.node_span(node)
        return self.fix.make([Edit(start, end, new)])


def _eager_array_candidate(m, base: ast.AST, fn: Function) -> bool:
    """Outside traced code, can ``base`` hold a JAX array at all?  Not a parameter
    without an array annotation (nothing traced passes it one), nor a name bound only
    to Python displays (``d = {}``)."""
    if base.__class__ is not ast.Name:
        return True
    if m.reaching_value(base, fn) is not None:
        return True    # ``y = jnp.asarray(y)`` before: the rebinding decides, not the parameter
    a = fn.param_nodes.get(base.id)
    if a is not None:
        return a.annotation is not None and bool(m.annotation_kind(a.annotation, fn.parent) & JAX)
    v = m.single_value(base.id, fn)
    return v is None or v.__class__ not in (ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp,
                                            ast.SetComp, ast.Constant)


def _made_here(m, base: ast.AST, fn: Function) -> bool:
    """``base`` is a name whose binding here (the one that reaches it, or its only one) is a
    call of an array library (``x = jnp.zeros(3)``): a plain array, whatever index writes into it."""
    if not isinstance(base, ast.Name):
        return False
    v = m.reaching_value(base, fn) or m.single_value(base.id, fn)
    if not isinstance(v, ast.Call):
        return False
    q = m.qualname(v.func, fn) or ""
    return q.startswith(("jax.numpy.", "numpy.", "jax.random.", "jax.lax."))


def _functional_twin(m: SemanticModel, stmt: ast.stmt, t: ast.Subscript, fn: Function) -> bool:
    """``if is_numpy: out[i] = v`` / ``else: out = out.at[i].set(v)``: the other branch of the
    ``if`` around the write updates the same name functionally, so this branch is the NumPy path."""
    base = t.value
    if not isinstance(base, ast.Name):
        return False
    for _if, other in m.enclosing_branches(stmt, fn):
        for n in (x for st in other for x in ast.walk(st)):
            if isinstance(n, ast.Assign) and any(isinstance(x, ast.Name) and x.id == base.id for x in n.targets) \
                    and _uses_at(n.value, base.id):
                return True
    return False


def _uses_at(e: ast.AST, name: str) -> bool:
    """``name.at[...]...`` somewhere in ``e``."""
    return any(isinstance(n, ast.Attribute) and n.attr == "at" and isinstance(n.value, ast.Name)
               and n.value.id == name for n in ast.walk(e))


def _given_pytree(m, base: ast.AST, fn: Function) -> bool:
    """``base`` is a parameter of ``fn`` as given (or a ``.copy()`` of one): what the transform or
    the traced caller passes, a pytree whose structure this function does not show -- or a
    constant-key element of one (``state[0]["stacked_obs"]``: a sub-pytree, a list as often as
    an array)."""
    while base.__class__ is ast.Subscript and base.slice.__class__ is ast.Constant \
            and isinstance(base.slice.value, (str, int)):
        base = base.value
    if base.__class__ is not ast.Name:
        return False
    seen = m.reaching_value(base, fn)
    if seen is None:
        return base.id in fn.param_nodes and all(b.kind == "param" for b in m.bindings(base.id, fn))
    return seen.__class__ is ast.Call and not seen.args and seen.func.__class__ is ast.Attribute \
        and seen.func.attr == "copy" and seen.func.value.__class__ is ast.Name \
        and seen.func.value.id in fn.param_nodes


def _array_index(m, sl: ast.AST, fn: Function) -> bool:
    """An index only an array (or a sequence) takes: an int, a slice, ``...``, ``None``, a tuple of
    those, or a traced/array value -- not a key of unknown kind, which a dict takes as well."""
    t = sl.__class__
    if t is ast.Constant:
        return sl.value is Ellipsis or sl.value is None or isinstance(sl.value, int)
    if t is ast.Slice:
        return True
    if t is ast.UnaryOp:
        return _array_index(m, sl.operand, fn)
    if t is ast.Tuple:
        return any(_array_index(m, e, fn) for e in sl.elts)
    if t is ast.BinOp:
        return _array_index(m, sl.left, fn) or _array_index(m, sl.right, fn)
    if t is ast.Name:
        home = m.resolve_scope(sl.id, fn)
        bs = m.bindings(sl.id, home) if home is not None else []
        if bs and all(_int_binding(m, b, home) for b in bs):
            return True     # ``for i in range(n)``, ``i = 0``: an int
    k = m.kind(sl, fn)
    return bool(k & (JAX | TRACED)) and not k & CONTAINER


def _int_binding(m, b, scope: Function) -> bool:
    """A binding that makes its name an int: a loop over ``range(...)``/``enumerate``'s counter, an
    int literal."""
    v = b.value
    if b.kind == "for" and v.__class__ is ast.Call and v.func.__class__ is ast.Name:
        if v.func.id == "range":
            return True
        return v.func.id == "enumerate" and b.path[:1] == (0,)
    return b.kind == "=" and v.__class__ is ast.Constant and type(v.value) is int
