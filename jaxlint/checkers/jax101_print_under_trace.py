from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Tuple

from ..analysis import TRACED, Function
from ..analysis import knowledge as K
from ..fixes.edits import SAFE, Edit, Fix
from ..fixes.imports import module_alias
from .base import Context, Finding, Rule, register, traced_functions


@register
class PrintUnderTrace(Rule):
    """
    ## What it does
    Flags `print(...)`, and `logging` / `logger` calls, that show a traced value
    inside a function that JAX traces (`jax.jit`, `vmap`, `grad`, a `lax.scan`
    body, a Flax module's `__call__`, or a helper called from one).

    ## Why is this bad?
    In PyTorch, `print(loss)` inside the training step prints the loss every
    step. Under `jax.jit` your Python function body runs only once, while JAX
    *traces* it to build a compiled program; later calls run the compiled
    program and never execute the `print` again. What that one `print` shows is
    a tracer such as `Traced<ShapedArray(float32[])>`, not a number. The same
    holds for `logging.info(...)`. A `print` that shows only static facts
    (`print("compiling", x.shape)`) is a legitimate way to see retracing and is
    not flagged.

    ## Example
    ```python
    @jax.jit
    def train_step(params, x, y):
        loss = loss_fn(params, x, y)
        print(f"loss {loss:.3f}")
        return loss
    ```

    ## Use instead
    ```python
    @jax.jit
    def train_step(params, x, y):
        loss = loss_fn(params, x, y)
        jax.debug.print("loss {loss:.3f}", loss=loss)
        return loss
    ```
    `jax.debug.print` is staged into the compiled program and prints the
    runtime value on every call.

    ## Fix safety
    The fix rewrites `print(...)` to `jax.debug.print(...)` with an equivalent
    format string (positional arguments, f-strings with format specs and
    conversions, constant `sep=`). It is safe: the original `print` could only
    ever show a tracer, so no working output is lost, and arguments are
    evaluated exactly as before. Calls with `file=`, a non-default `end=`, a
    non-constant `sep=` or `*args` are left for you to rewrite; logging calls
    are reported without a fix.
    """

    code = "JAX101"
    symbol = "print-under-trace"
    summary = "`print`/logging of a traced value inside a traced function runs once, at trace time"
    fix_title = "Use `jax.debug.print`"
    fix_applicability = SAFE

    def check(self, ctx: Context) -> Iterator[Finding]:
        m = ctx.model
        loggers = None
        for fn in traced_functions(ctx):
            for call in fn.of_type(ast.Call):
                func = call.func
                q = m.qualname(func, fn) if isinstance(func, (ast.Name, ast.Attribute)) else None
                if q == "print":
                    what = "`print`"
                elif q in K.LOGGING_FUNCS:
                    what = f"`{q}`"
                elif isinstance(func, ast.Attribute) and func.attr in K.LOGGER_METHODS:
                    if loggers is None:
                        loggers = m.loggers()
                    base = func.value
                    name = base.id if isinstance(base, ast.Name) else (
                        base.attr if isinstance(base, ast.Attribute) else None)
                    if name is None or name not in loggers:
                        continue
                    what = f"`{name}.{func.attr}`"
                else:
                    continue
                culprit = self._traced_argument(call, fn, ctx)
                if culprit is None:
                    continue
                shown = _short(ctx, culprit)
                msg = (f"{what} of traced value `{shown}` inside {fn.trace_description()} runs once at "
                       f"trace time and shows a tracer, not the value")
                fix = build_debug_print_fix(ctx, call, fn) if q == "print" else None
                yield ctx.finding(self, call, msg, confidence=fn.confidence, fix=fix)

    @staticmethod
    def _traced_argument(call: ast.Call, fn: Function, ctx: Context) -> Optional[ast.AST]:
        m = ctx.model
        values = list(call.args) + [k.value for k in call.keywords if k.arg not in ("sep", "end", "file", "flush")]
        for a in values:
            if isinstance(a, ast.JoinedStr):
                for v in a.values:
                    if isinstance(v, ast.FormattedValue) and m.kind(v.value, fn) & TRACED:
                        return m.traced_culprit(v.value, fn)
            elif m.kind(a, fn) & TRACED:
                return m.traced_culprit(a, fn)
        return None


def _short(ctx: Context, node: ast.AST) -> str:
    text = ast.unparse(node) if not isinstance(node, ast.Name) else node.id
    return text if len(text) <= 40 else text[:37] + "..."


_RESERVED = {"fmt", "ordered", "partitioned"}


def _escape(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _field(value: ast.expr, conversion: int, spec: Optional[ast.AST], args: List[str],
           kwargs: List[Tuple[str, str]], source_text: Optional[str]) -> Optional[str]:
    conv = "" if conversion in (-1, None) else "!" + chr(conversion)
    spec_text = ""
    if spec is not None:
        if not isinstance(spec, ast.JoinedStr) or any(not isinstance(v, ast.Constant) for v in spec.values):
            return None   # nested replacement fields in the format spec
        spec_text = ":" + "".join(v.value for v in spec.values)
    if isinstance(value, ast.Name) and value.id not in _RESERVED and value.id.isidentifier():
        if (value.id, value.id) not in kwargs:
            kwargs.append((value.id, value.id))
        return "{" + value.id + conv + spec_text + "}"
    args.append(source_text if source_text is not None else ast.unparse(value))
    return "{" + conv + spec_text + "}"


def build_debug_print_fix(ctx: Context, call: ast.Call, fn: Function) -> Optional[Fix]:
    sep = " "
    for kw in call.keywords:
        if kw.arg == "sep":
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                sep = kw.value.value
            elif not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                return None
        elif kw.arg == "end":
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in ("\n", None)):
                return None
        elif kw.arg == "flush":
            continue
        else:
            return None
    pieces: List[str] = []
    args: List[str] = []
    kwargs: List[Tuple[str, str]] = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            return None
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            pieces.append(_escape(a.value))
        elif isinstance(a, ast.JoinedStr):
            out = []
            for v in a.values:
                if isinstance(v, ast.Constant):
                    out.append(_escape(v.value))
                elif isinstance(v, ast.FormattedValue):
                    f = _field(v.value, v.conversion, v.format_spec, args, kwargs, None)
                    if f is None:
                        return None
                    out.append(f)
                else:
                    return None
            pieces.append("".join(out))
        else:
            pieces.append(_field(a, -1, None, args, kwargs, ctx.source.segment(a)))
    fmt = sep.join(pieces)
    jax_name, import_edits = module_alias(ctx.model, ctx.source, "jax", "jax")
    parts = [repr(fmt)] + args + [f"{k}={v}" for k, v in kwargs]
    new = f"{jax_name}.debug.print({', '.join(parts)})"
    start, end = ctx.source.node_span(call)
    return Fix(PrintUnderTrace.fix_title, tuple([Edit(start, end, new)] + import_edits), SAFE)
