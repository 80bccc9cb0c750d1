from __future__ import annotations

import ast
import math as _math
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis import INFERRED, JAX, Function, SemanticModel, proven
from .values import (at_compile_time, culprit, output_nodes, traced_array, traced_value,
                                 unreliable_param)
from ..messages import short
from .schedules import builtin_min_max
from ..base import Context, Finding, TracedCodeRule, register, traced_functions

_ALL = K.ALL_POSITIONS
SHAPE_ARGUMENTS = K.SHAPE_ARGUMENTS

# a keyword that makes a shape argument legitimately traced
_ESCAPES = {"jax.numpy.repeat": "total_repeat_length"}

# a finding and the traced name it needs concrete (None for formatting findings)
_Found = Tuple[Finding, Optional[str]]

_PERCENT_FORMAT = re.compile(r"""['"]\s*%""")

_CONVERSIONS = ("int", "float", "bool", "complex")
_SUGGEST_CONVERSION = {
    "int": "keep it an array (`.astype(jnp.int32)`)",
    "float": "keep it an array (`.astype(jnp.float32)`)",
    "bool": "keep it an array and use `jnp.where`/`lax.cond`",
    "complex": "keep it an array (`.astype(jnp.complex64)`)",
}


# why formatting a tracer in test code belongs to the strict profile
FORMAT_TEST_BASIS = ("a string made of a tracer in test code is the test's own trace-time output or what it "
                     "checks (that formatting a traced value works), not a value anyone relies on")

@register
class ConcreteConversionOfTracedValue(TracedCodeRule):
    """
    ## What it does
    Flags, inside a traced function, code that needs the concrete Python value
    of a traced array:

    - `int(x)`, `float(x)`, `bool(x)`, `complex(x)`, `x.item()`, `x.tolist()`;
    - `range(n)` and `math.*(x)` (`math.sqrt(x)`, `math.log(x)`, ...);
    - a traced value as a slice bound (`x[:n]`, `x[i:i + k]`) or as a shape /
      size argument (`jnp.zeros(n)`, `x.reshape(n, -1)`, `jnp.arange(n)`,
      `jax.random.normal(key, (n,))`, `jax.nn.one_hot(y, k)`);
    - formatting a traced value into a string (f-string, `str()`, `%`,
      `.format`) other than through `jax.debug.print`;
    - Python `min`/`max` of the step count in a learning-rate schedule given
      to an optax optimizer by position (`optax.adam(schedule)`, a schedule
      factory's product included, and the module's helpers the schedule
      hands the step to) or to `optax.inject_hyperparams(optax.adam)(
      learning_rate=schedule)`: optax calls the schedule with its step
      count, an array, inside the optimizer's update, under the training
      step's `jit`.

    Static facts are fine and never flagged: `int(x.shape[0])`, `len(x)`,
    `float(self.rate)` on a module field, arguments marked
    `static_argnums`/`static_argnames`, and `.item()` / `float(loss)` in
    ordinary eager code such as a training loop outside `jit`. A `print` or
    logging call of a traced value is JAX101's finding. Python `max()`/`min()`
    of values traced only by differentiation applied outside any trace
    (`jax.jacrev(f)(x)` in eager code, also from another module) is not
    flagged: those tracers carry their values and compare.

    ## Why is this bad?
    In PyTorch, `loss.item()`, `int(n)` or `torch.zeros(n)` read the tensor's
    value whenever you like. Under `jax.jit` (and `vmap`, `grad`, `lax.scan`
    bodies, Flax `__call__`) your function runs on abstract *tracers* that
    carry a shape and dtype but no value, so JAX raises
    `ConcretizationTypeError`, `TracerIntegerConversionError` or
    `IndexError: Slice entries must be static` while tracing. XLA also
    compiles for fixed shapes, so a shape or slice length cannot depend on a
    traced value. Formatting a tracer gives text like
    `Traced<ShapedArray(float32[])>` (or a `TypeError` with a format spec),
    never the number.

    ## Profiles
    Formatting a traced value in test code (a `test_*` function, a test
    module) is reported in the strict profile (`--strict`) only: it is the
    test's own trace-time output, or what the test checks (that `str()` of a
    traced value works).

    ## Example
    ```python
    @jax.jit
    def pad_to_longest(seqs, lengths):
        max_len = int(lengths.max())
        return seqs[:, :max_len]
    ```

    ## Use instead
    ```python
    @functools.partial(jax.jit, static_argnames="max_len")
    def pad_to_longest(seqs, max_len):
        return seqs[:, :max_len]

    pad_to_longest(seqs, max_len=int(lengths.max()))   # concrete, outside jit
    ```
    Keep values as arrays (`x.astype(jnp.int32)`, `jnp.sqrt`), move the
    conversion out of the traced function, mark Python configuration static,
    use `lax.dynamic_slice` for a traced start with a static size, and
    `jax.debug.print` to see values.

    ## Fix safety
    No automatic fix: whether to make an argument static, keep a value as an
    array or move code outside `jit` depends on intent.
    """

    confirm = ("trace-error", "ConcretizationTypeError", "TracerIntegerConversionError", "TracerArrayConversionError")
    summary = "`int()`/`.item()`/`range()`/shape or slice from a traced value needs a concrete value under tracing"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for fn in traced_functions(ctx):
            found = list(self._calls(ctx, fn)) + list(self._slices(ctx, fn)) + list(self._formatting(ctx, fn))
            found.sort(key=lambda p: (p[0].line, p[0].col))
            # one root cause, one finding: after ``jnp.zeros(n)`` is reported, ``jnp.arange(n)``,
            # ``x[:n]`` and ``int(n)`` in the same function need the same fix (make ``n`` static).
            # Conversions of different expressions (``float(x.sum())``, ``x.max().item()``) are
            # reported separately.
            seen: Set[str] = set()
            for finding, name in found:
                if name is not None:
                    if name in seen:
                        continue
                    seen.add(name)
                yield finding
        for sched, call, q, arg in builtin_min_max(m):
            yield ctx.finding(self, call, (
                f"Python `{q}()` of `{short(arg)}`, computed from the step count, inside {sched.description()} "
                f"compares tracers, which needs concrete values; use `jnp.{'maximum' if q == 'max' else 'minimum'}`"),
                confidence=INFERRED)

    # ------------------------------------------------------------------ helpers
    def _traced(self, ctx: Context, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """The culprit when ``e`` is a traced array the model can vouch for."""
        m = ctx.model
        if not traced_array(m, e, fn) or not m.vouched_array(e, fn):
            return None
        c = culprit(m, e, fn)
        if unreliable_param(m, c, fn) or at_compile_time(m, e, fn, c) or _module_argument(c, fn):
            return None
        return c

    def _int_culprit(self, ctx: Context, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """Culprit when ``e``, used where Python needs a static int (a shape, a slice
        bound, ``range``), is traced.  A field of a traced PyTree (``cfg.seq_len``,
        ``state.max_len``) is as often a static field as an array: not reported."""
        c = self._traced(ctx, e, fn)
        if c is None or _field_only(ctx, e, fn):
            return None
        return c

    def _shape_culprit(self, ctx: Context, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        if isinstance(e, (ast.Tuple, ast.List)):
            for x in e.elts:
                c = self._shape_culprit(ctx, x.value if isinstance(x, ast.Starred) else x, fn)
                if c is not None:
                    return c
            return None
        return self._int_culprit(ctx, e, fn)

    def _finding(self, ctx: Context, fn: Function, node: ast.AST, msg: str,
                 root: Optional[ast.AST] = None, formats: bool = False) -> _Found:
        """The finding, and the traced name it needs concrete (None for formatting).  Formatting
        a tracer in test code (``formats``) is the strict profile's (:data:`FORMAT_TEST_BASIS`)."""
        name = root.id if isinstance(root, ast.Name) else None   # see check()
        strict = FORMAT_TEST_BASIS if formats and ctx.model.in_test_code(fn) else None
        return ctx.finding(self, node, msg, confidence=fn.confidence, strict=strict), name

    # -------------------------------------------------------------------- calls
    def _calls(self, ctx: Context, fn: Function) -> Iterator[_Found]:
        m = ctx.model
        where = fn.trace_description()
        for call in fn.of_type(ast.Call):
            func = call.func
            terminal = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
            if terminal not in _TERMINALS:
                continue
            q = m.qualname(func, fn)
            if q in _CONVERSIONS:
                if len(call.args) != 1 or call.keywords:
                    continue
                c = self._traced(ctx, call.args[0], fn)
                if c is None:
                    continue
                yield self._finding(ctx, fn, call, (
                    f"`{q}()` of traced value `{short(call.args[0])}` inside {where} needs a concrete value; "
                    f"{_SUGGEST_CONVERSION[q]}{_static_hint(c, fn, ' or ')}"), _bare(call.args[0]))
            elif q == "range":
                c = next((c for c in (self._int_culprit(ctx, a, fn) for a in call.args) if c is not None), None)
                if c is None:
                    continue
                yield self._finding(ctx, fn, call, (
                    f"`range()` of traced value `{short(c)}` inside {where} needs a concrete int; "
                    f"use `jax.lax.fori_loop`{_static_hint(c, fn, ' or ')}"), c)
            elif q is not None and q.startswith("math.") and q != "math.prod":
                c = next((c for c in (self._traced(ctx, a, fn) for a in call.args) if c is not None), None)
                if c is None:
                    continue
                jnp_name = q[len("math."):]
                yield self._finding(ctx, fn, call, (
                    f"`{q}` of traced value `{short(c)}` inside {where} converts it to a Python float; "
                    f"use `jnp.{jnp_name}`" if jnp_name in _MATH_IN_JNP else
                    f"`{q}` of traced value `{short(c)}` inside {where} converts it to a Python number; "
                    f"use a `jax.numpy` function"), None)
            elif q in ("max", "min"):
                # Python's max/min compare with ``>``/``<`` and ask ``bool()`` of the result
                args = call.args
                if any(isinstance(a, ast.Starred) for a in args) or not args:
                    continue
                if m.concrete_primal(fn):
                    continue    # under differentiation alone ``bool()`` of a tracer has its value (run)
                if len(args) == 1 and not m.is_array(args[0], fn):
                    continue
                c = next((c for c in (self._traced(ctx, a, fn) for a in args) if c is not None), None)
                if c is None:
                    continue
                yield self._finding(ctx, fn, call, (
                    f"Python `{q}()` of traced value `{short(c)}` inside {where} compares tracers, which needs "
                    f"concrete values; use `jnp.{'maximum' if q == 'max' else 'minimum'}`"
                    + (f" or `jnp.{q}`" if len(args) == 1 else "")), None)
            elif q in SHAPE_ARGUMENTS:
                f = self._shape_call(ctx, fn, call, q)
                if f is not None:
                    yield f
            elif q in ("str", "repr"):
                if len(call.args) == 1 and id(call) not in output_nodes(m, fn):
                    c = self._formatted(ctx, call.args[0], fn)
                    if c is not None:
                        yield self._finding(ctx, fn, call, _format_message(f"`{q}()`", call.args[0], where),
                                            formats=True)
            elif q is None and isinstance(func, ast.Attribute):
                name = func.attr
                if name in ("item", "tolist") and (name == "tolist" and not call.args or name == "item"):
                    c = self._traced(ctx, func.value, fn)
                    if c is None:
                        continue
                    yield self._finding(ctx, fn, call, (
                        f"`.{name}()` on traced value `{short(func.value)}` inside {where} needs a concrete value; "
                        f"keep it an array, or call `.{name}()` outside the traced function"), _bare(func.value))
                elif name == "reshape" and call.args and m.kind(func.value, fn):
                    # (a receiver of no value kind is a module alias: ``np_backend.reshape(x, shape)``)
                    args = call.args
                    if len(args) == 1:
                        c = self._shape_culprit(ctx, args[0], fn)
                    else:
                        c = next((c for c in (self._int_culprit(ctx, a, fn) for a in args) if c is not None), None)
                    if c is None:
                        continue
                    yield self._finding(ctx, fn, call, (
                        f"traced value `{short(c)}` used as a shape in `.reshape` inside {where}; "
                        f"shapes must be static: derive them from `.shape`{_static_hint(c, fn, ' or ')}"), c)
                elif name == "format" and isinstance(func.value, (ast.Constant, ast.JoinedStr)) \
                        and id(call) not in output_nodes(m, fn):
                    for a in list(call.args) + [k.value for k in call.keywords]:
                        c = self._formatted(ctx, a, fn)
                        if c is not None:
                            yield self._finding(ctx, fn, call, _format_message("`str.format`", a, where))
                            break

    def _shape_call(self, ctx: Context, fn: Function, call: ast.Call, q: str) -> Optional[_Found]:
        positions, keywords = SHAPE_ARGUMENTS[q]
        escape = _ESCAPES.get(q)
        if escape is not None and any(k.arg == escape for k in call.keywords):
            return None
        args: List[ast.AST] = []
        if positions == (_ALL,):
            args.extend(a for a in call.args if not isinstance(a, ast.Starred))
        else:
            for i in positions:
                if i < len(call.args):
                    if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                        break
                    args.append(call.args[i])
        args.extend(k.value for k in call.keywords if k.arg in keywords)
        for a in args:
            c = self._shape_culprit(ctx, a, fn)
            if c is not None:
                short_q = q.replace("jax.numpy.", "jnp.").replace("jax.lax.", "lax.")
                return self._finding(ctx, fn, call, (
                    f"traced value `{short(c)}` used as a shape/size argument of `{short_q}` inside "
                    f"{fn.trace_description()}; shapes must be static: derive them from `.shape`"
                    f"{_static_hint(c, fn, ' or ')}"), c)
        return None

    # ------------------------------------------------------------------- slices
    def _slices(self, ctx: Context, fn: Function) -> Iterator[_Found]:
        for sub in fn.of_type(ast.Subscript):
            if sub.ctx.__class__ is not ast.Load:
                continue
            sl = sub.slice
            parts = sl.elts if isinstance(sl, ast.Tuple) else (sl,)
            for p in parts:
                if not isinstance(p, ast.Slice):
                    continue
                c = None
                for bound in (p.lower, p.upper, p.step):
                    if bound is not None:
                        c = self._int_culprit(ctx, bound, fn)
                        if c is not None:
                            break
                if c is not None:
                    yield self._finding(ctx, fn, sub, (
                        f"traced value `{short(c)}` used as a slice bound inside {fn.trace_description()}; "
                        f"slice sizes must be static: use `jax.lax.dynamic_slice` with a static size"
                        f"{_static_hint(c, fn, ', or ')}"), c)
                    break

    # --------------------------------------------------------------- formatting
    def _formatted(self, ctx: Context, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """Culprit when formatting ``e`` shows a tracer (arrays and containers of them)."""
        m = ctx.model
        if not traced_value(m, e, fn) or not m.kind(e, fn) & JAX or not m.vouched_array(e, fn):
            # without the array bit the value is an element of a traced container (a loop
            # variable over ``sorted(params.items())`` may be a dict key), not surely an array
            return None
        c = culprit(m, e, fn)
        if unreliable_param(m, c, fn) or at_compile_time(m, e, fn, c):
            return None
        return c

    def _formatting(self, ctx: Context, fn: Function) -> Iterator[_Found]:
        m = ctx.model
        where = fn.trace_description()
        strs = fn.of_type(ast.JoinedStr)
        if strs:
            nested: Set[int] = set()
            for js in strs:
                for v in js.values:
                    if isinstance(v, ast.FormattedValue) and v.format_spec is not None:
                        nested.add(id(v.format_spec))
            outputs = output_nodes(m, fn)
            for js in strs:
                if id(js) in nested or id(js) in outputs:
                    continue
                for v in js.values:
                    if not isinstance(v, ast.FormattedValue):
                        continue
                    c = self._formatted(ctx, v.value, fn)
                    if c is not None:
                        yield self._finding(ctx, fn, js, _format_message("an f-string", v.value, where), formats=True)
                        break
        # "..." % value: BinOp is not indexed; only walk functions whose text has a string followed by '%'
        if not fn.is_module and _PERCENT_FORMAT.search(ctx.source.segment(fn.node)):
            outputs = output_nodes(m, fn)
            for node in fn.walk():
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) \
                        and isinstance(node.left, (ast.Constant, ast.JoinedStr)) \
                        and isinstance(getattr(node.left, "value", ""), str) and id(node) not in outputs:
                    right = node.right
                    vals = right.elts if isinstance(right, ast.Tuple) else [right]
                    for v in vals:
                        c = self._formatted(ctx, v, fn)
                        if c is not None:
                            yield self._finding(ctx, fn, node, _format_message("`%` formatting", v, where),
                                                formats=True)
                            break


def _module_argument(c: ast.AST, fn: Function) -> bool:
    """``c`` is an argument of a Flax/Equinox module method that no transform is known
    to trace: ``model.apply(params, x, num_steps=4)`` may well pass a Python number, so
    ``range(num_steps)`` or ``int(num_steps)`` there is not reported."""
    if not isinstance(c, ast.Name) or c.id not in fn.param_nodes or c.id in fn.param_kinds:
        return False
    return all(ctx.transform.endswith(".Module") for ctx in fn.contexts)


def _field_only(ctx: Context, e: ast.AST, fn: Function) -> bool:
    """Every traced name in ``e`` is only read through a field: ``cfg.seq_len``, ``state.n + 1``."""
    m = ctx.model
    parents = {}
    for node in ast.walk(e):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    traced_names = [n for n in ast.walk(e) if isinstance(n, ast.Name) and proven(m.kind(n, fn))]
    if not traced_names:
        return False
    for n in traced_names:
        p = parents.get(id(n))
        if not isinstance(p, ast.Attribute) or p.attr in _ARRAY_ATTRS:
            return False
        up = parents.get(id(p))
        if isinstance(up, ast.Call) and up.func is p:
            return False   # a method call: ``x.sum()``
    return True


# attributes that are arrays of an array
_ARRAY_ATTRS = frozenset({"T", "mT", "real", "imag", "at"})


def _static_hint(c: ast.AST, fn: Function, sep: str) -> str:
    """``" or mark `n` static"`` when the culprit is a parameter a transform traces."""
    if isinstance(c, ast.Name) and c.id in fn.traced_params:
        return f"{sep}mark `{c.id}` static"
    return ""


def _bare(e: ast.AST) -> Optional[ast.AST]:
    """A value converted as a whole (``int(n)``) shares its root cause with other uses of ``n``."""
    return e if isinstance(e, ast.Name) else None


def _format_message(how: str, c: ast.AST, where: str) -> str:
    return (f"{how} of traced value `{short(c)}` inside {where} formats a tracer, not its value; "
            f"use `jax.debug.print(\"{{}}\", {short(c)})` to see it at run time")


# cheap pre-filter on the last component of a called name
_TERMINALS = frozenset(
    {"int", "float", "bool", "complex", "range", "max", "min", "str", "repr", "item", "tolist", "reshape",
     "format"}
    | {q.rsplit(".", 1)[1] for q in SHAPE_ARGUMENTS}
    | {n for n in dir(_math) if not n.startswith("_")}
)

_MATH_IN_JNP = frozenset({
    "sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan",
    "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor", "ceil", "trunc", "fabs", "hypot",
    "isnan", "isinf", "isfinite", "copysign", "fmod", "degrees", "radians", "pow", "gcd", "lcm", "ldexp",
    "frexp", "modf", "cbrt", "exp2", "isclose",
})
