from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import JAX, Function, SemanticModel, proven
from .values import at_compile_time, culprit, traced_operand
from .dtypes import BoolAnalysis, NamedBoolAnalysis
from ..messages import short
from ..base import Context, Finding, TracedCodeRule, register, traced_functions

_JNP = "jax.numpy."

# functions whose output length depends on the data, and that accept ``size=``:
# qualified name -> positional indices of the arguments that decide the length
DATA_DEPENDENT = {
    _JNP + "nonzero": (0,), _JNP + "argwhere": (0,), _JNP + "flatnonzero": (0,),
    _JNP + "unique": (0,), _JNP + "unique_values": (0,), _JNP + "unique_counts": (0,),
    _JNP + "unique_inverse": (0,), _JNP + "unique_all": (0,),
    _JNP + "compress": (0,), _JNP + "extract": (0,),
    _JNP + "setdiff1d": (0, 1), _JNP + "union1d": (0, 1), _JNP + "intersect1d": (0, 1),
    _JNP + "setxor1d": (0, 1),
}
# cheap pre-filter on the last component of the called name
_TERMINALS = frozenset([q.rsplit(".", 1)[1] for q in DATA_DEPENDENT] + ["where", "nonzero"])
# the keyword spellings of those arguments
_ARG_KEYWORDS = ("a", "ar", "x", "condition", "ar1", "ar2")


# why a mask known only by its name is the strict profile's
_NAMED_MASK = ("boolean only by its name: an integer index array named like a mask gathers with a fixed shape, "
               "which JAX allows")


@register
class DataDependentShape(TracedCodeRule):
    """
    ## What it does
    Flags, inside a traced function, operations whose result *shape* depends on
    the values of a traced array:

    - boolean-mask indexing with a traced mask: `x[x > 0]`, `x[mask]`,
      `x[:, jnp.isnan(y)]`, `x.at[mask].set(v)`;
    - `jnp.nonzero`, `jnp.argwhere`, `jnp.flatnonzero`, `jnp.unique` (and
      `unique_*`), `jnp.compress`/`jnp.extract`, the set operations
      (`setdiff1d`, `union1d`, ...) and one-argument `jnp.where(cond)` called
      on a traced array without `size=`.

    Integer gathers (`x[idx]`, `x[jnp.argmax(y)]`), three-argument
    `jnp.where(mask, a, b)` and masks that are concrete NumPy constants are
    fine and not flagged. Whether a mask is boolean is read from the code: a
    comparison, `~`/`&`/`|`, `jnp.isnan`/`isfinite`/`logical_*`,
    `.astype(bool)`, a `bool` annotation, or a name bound from those. A value
    boolean only by its name (`mask`, `is_valid`) is reported in the strict
    profile: an integer index array named `reindex_mask` gathers with a fixed
    shape.

    ## Why is this bad?
    In PyTorch, `t[t > 0]` returns however many elements pass the test.
    XLA compiles programs for fixed array shapes, and under `jax.jit` (or
    `vmap`, `grad`, a `lax.scan`/`fori_loop` body) the mask's values are not
    known while the program is built, so neither is the result's length: JAX
    raises `NonConcreteBooleanIndexError` (for indexing) or
    `ConcretizationTypeError` (for `nonzero`/`unique`/...) at trace time.

    ## Example
    ```python
    @jax.jit
    def masked_mean(x, mask):
        return x[mask].mean()

    @jax.jit
    def active(x):
        return jnp.nonzero(x > 0)
    ```

    ## Use instead
    ```python
    @jax.jit
    def masked_mean(x, mask):
        return jnp.where(mask, x, 0.0).sum() / jnp.maximum(mask.sum(), 1)

    @jax.jit
    def active(x):
        return jnp.nonzero(x > 0, size=x.shape[0], fill_value=-1)
    ```
    Keep the shape fixed and mask the values (`jnp.where(mask, x, 0)`,
    `jnp.sum(x, where=mask)`), or give `size=` (and `fill_value=`) so the
    result has a static length.

    ## Fix safety
    No automatic fix: replacing the selection with `jnp.where` changes the
    result's shape, and choosing `size=` needs a bound only you know.
    """

    confirm = ("trace-error", "NonConcreteBooleanIndexError", "ConcretizationTypeError")
    summary = "boolean-mask indexing or `nonzero`/`unique`/... without `size=` on a traced value: the shape is unknown"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        bools = None
        for fn in traced_functions(ctx):
            if m.concrete_primal(fn):
                continue   # grad alone: tracers carry concrete values, masks work
            for sub in fn.of_type(ast.Subscript):
                if sub.ctx.__class__ is not ast.Load:
                    continue
                sl = sub.slice
                parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
                for p in parts:
                    if isinstance(p, (ast.Slice, ast.Constant, ast.Starred)):
                        continue
                    if not traced_operand(m, p, fn) or at_compile_time(m, p, fn, p):
                        continue
                    if bools is None:
                        bools = BoolAnalysis.for_model(m), NamedBoolAnalysis.for_model(m)
                    if bools[0].is_bool(p, fn):
                        yield self._mask_finding(ctx, fn, sub, p)
                    elif bools[1].is_bool(p, fn):
                        yield self._mask_finding(ctx, fn, sub, p, strict=_NAMED_MASK)
                    else:
                        continue
                    break
            for call in fn.of_type(ast.Call):
                f = self._call_finding(ctx, fn, call)
                if f is not None:
                    yield f

    def _mask_finding(self, ctx: Context, fn: Function, sub: ast.Subscript, mask: ast.AST,
                      strict: Optional[str] = None) -> Finding:
        base = sub.value
        b, mk = short(base, 30), short(mask, 30)
        if isinstance(base, ast.Attribute) and base.attr == "at":
            b = short(base.value, 30)
            msg = (f"boolean mask `{mk}` in `{b}.at[...]` inside {fn.trace_description()}: a traced mask has no "
                   f"static number of selected elements; use `jnp.where({mk}, new_value, {b})`")
        else:
            msg = (f"boolean mask `{mk}` indexes `{b}` inside {fn.trace_description()}: the result's shape "
                   f"depends on traced values; use `jnp.where({mk}, {b}, 0)` or a `where=` argument")
        return ctx.finding(self, sub, msg, confidence=fn.confidence, strict=strict)

    def _call_finding(self, ctx: Context, fn: Function, call: ast.Call) -> Optional[Finding]:
        m = ctx.model
        func = call.func
        terminal = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if terminal not in _TERMINALS:
            return None
        if any(kw.arg == "size" or kw.arg is None for kw in call.keywords):
            return None
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        name = None
        decisive = []
        if isinstance(func, (ast.Name, ast.Attribute)):
            q = m.qualname(func, fn)
            if q in DATA_DEPENDENT:
                positions = DATA_DEPENDENT[q]
                decisive = [call.args[i] for i in positions if i < len(call.args)]
                decisive += [kw.value for kw in call.keywords if kw.arg in _ARG_KEYWORDS]
                name = "jnp." + q[len(_JNP):]
            elif q == _JNP + "where":
                if len(call.args) != 1 or any(kw.arg in ("x", "y") for kw in call.keywords):
                    return None
                decisive = [call.args[0]]
                name = "jnp.where"
            elif q is None and isinstance(func, ast.Attribute) and func.attr == "nonzero" and not call.args:
                k = m.kind(func.value, fn)
                if proven(k) and k & JAX and traced_operand(m, func.value, fn):
                    decisive = [func.value]
                    name = ".nonzero()"
        if name is None:
            return None
        arg = next((a for a in decisive if traced_operand(m, a, fn) and not at_compile_time(m, a, fn, a)), None)
        if arg is None:
            return None
        shown = short(culprit(m, arg, fn), 30)
        one_arg = " (one-argument form)" if name == "jnp.where" else ""
        msg = (f"`{name}`{one_arg} on traced `{shown}` inside {fn.trace_description()} has a data-dependent output "
               f"shape; pass `size=` (and `fill_value=`) or use `jnp.where(mask, x, 0)`")
        return ctx.finding(self, call, msg, confidence=fn.confidence)
