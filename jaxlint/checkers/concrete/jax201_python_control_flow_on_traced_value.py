from __future__ import annotations

import ast
from typing import Iterator, Set

from ...analysis import INFERRED, Function, SemanticModel
from ..base import Context, Finding, TracedCodeRule, register, traced_functions
from ..messages import short
from .schedules import branches

_SUGGEST = {
    "if": "use `jnp.where` or `jax.lax.cond`",
    "elif": "use `jnp.where`, `jnp.select` or `jax.lax.switch`",
    "while": "use `jax.lax.while_loop`",
    "assert": "check shapes/dtypes instead, or use `jax.experimental.checkify`",
    "conditional expression": "use `jnp.where`",
    "and": "use `&` (or `jnp.logical_and`)",
    "or": "use `|` (or `jnp.logical_or`)",
    "not": "use `~` (or `jnp.logical_not`)",
    "comprehension filter": "use a boolean mask with `jnp.where`",
}


@register
class PythonControlFlowOnTracedValue(TracedCodeRule):
    """
    ## What it does
    Flags Python control flow whose condition depends on a traced value inside
    a traced function: `if`/`elif`, `while`, `assert`, conditional expressions
    (`a if c else b`), `and`/`or`/`not`, and `if` filters in comprehensions.
    Also a comparison of the step count in a learning-rate schedule given to an
    optax optimizer by position (`optax.adamw(lr)` with `def lr(step): if step
    < warmup: ...`): optax calls the schedule with its step count, an array,
    inside the optimizer's update, which runs under the training step's `jit`.

    ## Why is this bad?
    In PyTorch, `if loss > 10:` just reads the tensor's value. Under
    `jax.jit`, `grad` or `vmap`, the function runs on abstract *tracers* that
    have a shape and dtype but no value yet, so Python cannot decide which
    branch to take: JAX raises `TracerBoolConversionError` (or
    `ConcretizationTypeError`) at trace time. Conditions on static facts —
    `x.shape`, `x.ndim`, `len(x)`, `x is None`, `isinstance`, and arguments
    marked `static_argnums`/`static_argnames` — are fine and are not flagged.

    ## Example
    ```python
    @jax.jit
    def relu(x):
        if x > 0:
            return x
        return 0.0
    ```

    ## Use instead
    ```python
    @jax.jit
    def relu(x):
        return jnp.where(x > 0, x, 0.0)
    ```
    Use `jax.lax.cond`/`lax.switch` to choose between computations,
    `lax.while_loop` for loops whose exit depends on data, or mark a Python
    configuration argument static:
    `@functools.partial(jax.jit, static_argnames="training")`.

    ## Fix safety
    No automatic fix: choosing between `jnp.where` (evaluates both branches),
    `lax.cond` and a static argument depends on intent.
    """

    confirm = ("trace-error", "ConcretizationTypeError", "ValueError: truth value of an array")
    summary = "Python `if`/`while`/`assert`/`and`/`or`/`not` on a traced value fails at trace time"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for fn in traced_functions(ctx):
            covered: Set[int] = set()
            tests = []
            for node in fn.of_type(ast.If):
                line = ctx.source.line_text(node.lineno)
                kw = "elif" if line[ctx.source.char_col(node.lineno, node.col_offset):].startswith("elif") else "if"
                tests.append((node.test, kw))
            for node in fn.of_type(ast.While):
                tests.append((node.test, "while"))
            for node in fn.of_type(ast.Assert):
                tests.append((node.test, "assert"))
            for node in fn.of_type(ast.IfExp):
                tests.append((node.test, "conditional expression"))
            for node in fn.of_type(ast.comprehension):
                for cond in node.ifs:
                    tests.append((cond, "comprehension filter"))
            tests.sort(key=lambda t: (t[0].lineno, t[0].col_offset))
            for test, kw in tests:
                if id(test) in covered:
                    continue
                if not m.truth_traced(test, fn) or m.off_trace(test, fn) or not m.vouched_array(test, fn):
                    continue
                for sub in ast.walk(test):
                    covered.add(id(sub))
                yield self._finding(ctx, fn, test, test, kw)
            for node in sorted(fn.of_type(ast.BoolOp, ast.UnaryOp), key=lambda n: (n.lineno, n.col_offset)):
                if id(node) in covered:
                    continue
                if isinstance(node, ast.BoolOp):
                    culprit = next((v for v in node.values[:-1] if m.truth_traced(v, fn)), None)
                    kw = "and" if isinstance(node.op, ast.And) else "or"
                elif isinstance(node.op, ast.Not):
                    culprit = node.operand if m.truth_traced(node.operand, fn) else None
                    kw = "not"
                else:
                    continue
                if culprit is None or m.off_trace(node, fn) or not m.vouched_array(culprit, fn):
                    continue
                for sub in ast.walk(node):
                    covered.add(id(sub))
                yield self._finding(ctx, fn, node, culprit, kw)
        for sched, node, test in branches(m):
            kw = "while" if isinstance(node, ast.While) else \
                "conditional expression" if isinstance(node, ast.IfExp) else "if"
            yield ctx.finding(self, test, (
                f"Python `{kw}` on `{short(test)}`, computed from the step count, inside {sched.description()}: "
                f"a tracer has no concrete truth value; {_SUGGEST[kw]}"), confidence=INFERRED)

    def _finding(self, ctx: Context, fn: Function, node: ast.AST, test: ast.AST, kw: str) -> Finding:
        m = ctx.model
        culprit = m.traced_culprit(test, fn)
        name = culprit.id if isinstance(culprit, ast.Name) else ast.unparse(culprit)
        if len(name) > 40:
            name = name[:37] + "..."
        hint = _SUGGEST[kw]
        if isinstance(culprit, ast.Name) and culprit.id in fn.traced_params and kw in ("if", "elif", "while", "conditional expression", "not", "and", "or") \
                and fn.confidence == "certain":
            hint += f", or mark `{culprit.id}` static if it is a Python value"
        msg = (f"Python `{kw}` on traced value `{name}` inside {fn.trace_description()}: "
               f"a tracer has no concrete truth value; {hint}")
        return ctx.finding(self, node, msg, confidence=fn.confidence)

