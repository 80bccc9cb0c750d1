from __future__ import annotations

import ast
from typing import Iterator

from ...analysis import CERTAIN
from .calls import in_traced_code, jit_index
from ..base import Context, Finding, Rule, register


@register
class RedundantNestedJit(Rule):
    """
    ## What it does
    Reports a jitted function of this module that is only ever called from
    code JAX is already tracing (another jitted function, a `grad`/`vmap`
    target, a `lax.scan` body), and a `jax.jit` applied *inside* traced code
    and called there (a nested `@jax.jit` def, `grad_fn = jax.jit(...)` in a
    jitted step). Informational; off by default (enable it with
    `--select JAX503`).

    ## Why is this bad?
    It is not an error. Under an outer `jax.jit`, an inner `jax.jit` is traced
    into the outer program rather than compiled on its own, so the decorator
    only adds noise (and a nested call in the jaxpr). PyTorch users often wrap
    every helper "to make it fast"; in JAX, jitting the outermost function is
    what matters. Functions also called eagerly somewhere in the module, and
    public functions of a library module that other modules may call eagerly,
    keep their jit and are not reported.

    ## Example
    ```python
    @jax.jit
    def _normalize(x):
        return (x - x.mean()) / x.std()

    @jax.jit
    def train_step(params, x):
        return loss(params, _normalize(x))
    ```

    ## Use instead
    ```python
    def _normalize(x):   # traced into train_step's program
        return (x - x.mean()) / x.std()

    @jax.jit
    def train_step(params, x):
        x = _normalize(x)
        return loss(params, x)
    ```

    ## Fix safety
    No automatic fix: the inner jit may be kept on purpose (its
    `static_argnums`, `donate_argnums` or sharding annotations, or eager
    callers in other modules).
    """

    code = "JAX503"
    symbol = "redundant-nested-jit"
    summary = "a jitted function only ever called from traced code: the inner `jax.jit` does nothing"
    default_enabled = False

    def check(self, ctx: Context) -> Iterator[Finding]:
        m = ctx.model
        idx = jit_index(m)
        if idx is None:
            return
        for b in idx.jit_bindings:
            if b.kind not in ("def", "name"):
                continue
            if b.site.call is not None and any(kw.arg in ("donate_argnums", "donate_argnames", "in_shardings",
                                                          "out_shardings", "device", "backend")
                                               for kw in b.site.call.keywords):
                continue
            scope = b.scope
            if in_traced_code(b.created_in):
                # jax.jit applied while tracing (a nested @jax.jit def, grad_fn = jax.jit(...)
                # inside a jitted step): it can only ever be called under that trace
                creator = b.created_in
                while creator is not None and not creator.is_module and not creator.contexts:
                    creator = creator.parent
                if creator is None or creator.confidence != CERTAIN or _escapes(m, b) \
                        or not idx.calls_to(b):
                    continue
                msg = (f"`jax.jit` is applied inside {creator.trace_description()}, which is already traced: "
                       f"the inner jit is inlined into the outer program and has no effect")
                yield ctx.finding(self, b.site.node, msg, confidence=CERTAIN)
                continue
            if scope.is_module and not b.name.startswith("_") and not _is_script(m):
                continue   # a public function: other modules may call it eagerly
            calls = idx.calls_to(b)
            if not calls:
                continue
            if not all(_surely_traced(idx, cs.scope, 0) for cs in calls):
                continue
            # the name must not escape other than through calls (passed as a callback, returned)
            if _escapes(m, b):
                continue
            first = calls[0].scope
            msg = (f"`{b.name}` is jitted but only ever called from traced code, e.g. {first.trace_description()}: "
                   f"the inner `jax.jit` is inlined into the outer program and has no effect")
            yield ctx.finding(self, b.site.node, msg, confidence=first.confidence)


def _surely_traced(idx, fn, depth: int) -> bool:
    """``fn`` only ever runs under a transform: it is jitted/transformed itself, nested in
    such a function, or a private helper all of whose callers in this module surely are."""
    s = fn
    while s is not None and not s.is_module:
        if s.confidence == CERTAIN:
            return True
        s = s.parent
    if not fn.contexts or depth > 3 or fn.is_lambda:
        return False
    if fn.parent is not None and fn.parent.is_module and not fn.name.startswith("_") \
            and not _is_script(idx.model):
        return False   # a public helper: other modules may call it eagerly
    callers = idx.callers_of(fn)
    return bool(callers) and all(_surely_traced(idx, c.scope, depth + 1) for c in callers)


def _is_script(m) -> bool:
    for node in m.tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return True
    return False


def _escapes(m, b) -> bool:
    """The jitted name is read somewhere other than as the callee of a call (passed as a
    callback, returned, stored)."""
    name = b.name
    callees = set()
    for fn in m.functions:
        for c in fn.of_type(ast.Call):
            if isinstance(c.func, ast.Name) and c.func.id == name:
                callees.add(id(c.func))
    for fn in m.functions:
        for n in fn.walk():
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in callees:
                return True
    return False
