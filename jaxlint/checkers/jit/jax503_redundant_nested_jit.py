from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import CERTAIN, SemanticModel
from .calls import JIT_NAMES, JitBinding, in_traced_code, jit_index
from ..base import Context, Finding, Rule, register
from ..messages import short


@register
class RedundantNestedJit(Rule):
    """
    ## What it does
    Reports a jitted function of this module that is only ever called from
    code JAX is already tracing (another jitted function, a `grad`/`vmap`
    target, a `lax.scan` body), a `jax.jit` applied *inside* traced code
    and called there (a nested `@jax.jit` def, `grad_fn = jax.jit(...)` in a
    jitted step), and a `jax.jit` applied directly inside `jax.vmap` or
    `jax.pmap` (`jax.vmap(jax.jit(f))`), where the jit should wrap the whole
    batched function. Informational; off by default (enable it with
    `--select JAX503`).

    ## Why is this bad?
    It is not an error. Under an outer `jax.jit`, an inner `jax.jit` is traced
    into the outer program rather than compiled on its own, so the decorator
    only adds noise (and a nested call in the jaxpr). PyTorch users often wrap
    every helper "to make it fast"; in JAX, jitting the outermost function is
    what matters: `jax.pmap` compiles its function already, and
    `jax.vmap(jax.jit(f))` compiles only `f` while the batching around it runs
    again in Python on every call — `jax.jit(jax.vmap(f))` compiles it all once.
    Functions also called eagerly somewhere in the module, and
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

    summary = "a jitted function only ever called from traced code: the inner `jax.jit` does nothing"
    default_enabled = False

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        idx = jit_index(m)
        if idx is None:
            return
        batching = None
        for b in idx.jit_bindings:
            if b.kind == "other" and b.site.call is not None:
                if batching is None:
                    batching = _batching_calls(m)
                outer = batching.get(id(b.site.call))
                if outer is not None:
                    f = self._jit_inside_batching(ctx, b, outer)
                    if f is not None:
                        yield f
                continue
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

    def _jit_inside_batching(self, ctx: Context, b: JitBinding, outer) -> Optional[Finding]:
        """``jax.vmap(jax.jit(f))`` / ``jax.pmap(jax.jit(f))``: the jit should wrap the whole."""
        call = b.site.call
        if call.keywords or len(call.args) != 1:
            return None   # static arguments, donation, shardings: moving the jit is a design choice
        jit, fun, batch = short(call.func), short(call.args[0]), short(outer.call.func)
        whole = _enclosing_jit(ctx.model, outer)
        if outer.transform.kind == "pmap":
            msg = (f"`{jit}` inside `{batch}(...)` is inlined into the program `{batch}` compiles and has no "
                   f"effect; pass `{fun}` to `{batch}` directly")
        elif whole is not None or in_traced_code(outer.scope):
            where = f"`{whole}(...)`" if whole is not None else outer.scope.trace_description()
            msg = (f"`{jit}` inside `{batch}(...)` is already under {where}: the inner jit is inlined into "
                   f"the outer program and has no effect; drop it")
        else:
            msg = (f"`{jit}` wraps only `{fun}` inside `{batch}(...)`: the batching around it is not compiled "
                   f"and runs again in Python on every call; jit the whole instead: "
                   f"`{jit}({batch}({fun}, ...))`")
        return ctx.finding(self, call, msg, confidence=CERTAIN)


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

def _batching_calls(m: SemanticModel) -> dict:
    """id of the function argument of every ``vmap``/``pmap`` call -> that transform site."""
    out = {}
    for site in m.transform_sites:
        if site.transform.kind in ("vmap", "pmap") and site.call is not None:
            fun = SemanticModel.transform_function_arg(site.call, site.transform)
            if isinstance(fun, ast.Call):
                out[id(fun)] = site
    return out


def _enclosing_jit(m: SemanticModel, outer) -> Optional[str]:
    """The spelling of a jit applied directly around the ``vmap`` call (``jax.jit(jax.vmap(jax.jit(f)))``)."""
    for site in m.transform_sites:
        if site.call is not None and site.transform.name in JIT_NAMES \
                and SemanticModel.transform_function_arg(site.call, site.transform) is outer.call:
            return short(site.call.func)
    return None
