from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Tuple

from ...analysis import Function, SemanticModel
from ...fixes.edits import UNSAFE, Edit, Fix
from ...fixes.imports import module_alias
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short
from .axes import REPLICATING, axis_index, collective_axis, iter_collectives, literal_names
from .gradflow import GradFlow, Unsynced


@register
class UnsynchronizedGradientsInPmap(Rule):
    """
    ## What it does
    Inside a function mapped over devices with `jax.pmap(..., axis_name=...)`,
    flags gradients (from `jax.grad` / `jax.value_and_grad`) that reach the
    optimizer update (`tx.update`, `optax.apply_updates`,
    `state.apply_gradients`, a hand-written `jax.tree.map(lambda p, g: p - lr * g, ...)`,
    or `return w - lr * grads` on a parameter of the step)
    without passing through `lax.pmean` / `lax.psum` over that axis -- also
    gradients accumulated over micro-batches on the device (a Python loop, as
    `acc + jax.grad(f)(...) / n` too, a `lax.scan`/`fori_loop` body that makes
    them, also as one element of a carry tuple, per-example
    `jax.vmap(jax.grad(...))` averaged with `.mean(0)`) and handed to a helper
    of the module (a function, or a method of an object made once from a
    class of the module) that applies them (reported at the helper's call in the mapped step),
    or made by a helper that returns `jax.value_and_grad(...)(...)` itself; the
    axis name may be a module constant (`AXIS = "dp"`) or a factory's parameter
    (`def make_step(axis="hosts")`: its default, or the literal the module's calls pass); and, in a
    `jax.pmap` with no `axis_name` given a state replicated on every device
    (`flax.jax_utils.replicate`, `jax.device_put_replicated`), gradients that
    nothing can average (without the replicated state, one model per device
    is an ensemble, on purpose). Also flags
    a collective (`lax.pmean(x, axis_name="x")`, `psum`, `all_gather`, ...)
    whose axis name no enclosing `pmap` / `vmap` binds. Gradients that pass
    through a function of another module are synchronised when that function
    applies a reducing collective (the project says which do); through a
    function of a package jaxlint does not analyse, they are unknown and the
    rule stays silent; a function of the module handed to `jax.tree.map` that
    reduces on some path (`return grad if frozen else lax.pmean(grad, "batch")`)
    averages the leaves it is meant to.

    ## Why is this bad?
    In PyTorch, `DistributedDataParallel` all-reduces the gradients during
    `loss.backward()`, so every replica applies the same averaged update.
    `jax.pmap` does no such thing: each device computes the gradient of its own
    shard of the batch, and if the step applies it as is, every device takes a
    different step. The parameters, replicated at the start, silently drift
    apart (run on 4 CPU devices, one SGD step already leaves them differing by
    0.45), and the model you save from device 0 was trained on a quarter of
    the data. Averaging the *loss* with `lax.pmean` inside the loss function
    does not help: the gradient of each replica is still its own. A collective
    over an axis name that no transform binds raises
    `NameError: unbound axis name` when the function is traced.

    ## Example
    ```python
    @partial(jax.pmap, axis_name="batch")
    def train_step(state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
        return state.apply_gradients(grads=grads), loss
    ```

    ## Use instead
    ```python
    @partial(jax.pmap, axis_name="batch")
    def train_step(state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
        grads = jax.lax.pmean(grads, axis_name="batch")
        loss = jax.lax.pmean(loss, axis_name="batch")
        return state.apply_gradients(grads=grads), loss
    ```
    For a collective whose axis is not bound, name the axis the enclosing
    `pmap`/`vmap` declares (`axis_name=`), or apply the transform that binds it.
    `shard_map` is not flagged: JAX reduces the gradients of replicated inputs
    of a `shard_map` itself.

    ## Fix safety
    The fix inserts `grads = jax.lax.pmean(grads, axis_name=...)` right after
    the line that computes the gradients. It is unsafe: it changes the
    numbers the step computes (that is its purpose), and a step that trains
    independent replicas on purpose (an ensemble) or synchronizes elsewhere
    (a `psum` followed by a division, updates averaged after `tx.update`)
    must not get it. Unbound axis names get no fix.
    """

    confirm = "pmap-sync"
    summary = "gradients applied inside `pmap` without `lax.pmean` over the axis; collective over an unbound axis"
    fix = FixOffer("Average the gradients over the devices with `jax.lax.pmean`", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        if not m.transform_sites:
            return
        axes = axis_index(m)
        # 1. gradients applied without a reduction inside a replicating pmap
        seen = set()
        for fn, names in self._pmapped(ctx):
            for u in GradFlow(m, fn).run():
                where = _where(u)
                if id(where) not in seen:   # a helper shared by two pmapped steps: once
                    seen.add(id(where))
                    yield self._unsynced(ctx, fn, names, u)
        # 2. collectives over an axis name that nothing binds
        for fn in m.functions:
            if not fn.contexts:
                continue
            for call, q in iter_collectives(m, fn):
                axis = collective_axis(call, q)
                wanted = literal_names(axis)
                if not wanted:
                    continue
                bound = axes.bound(fn)
                if bound is None:
                    break
                missing = [n for n in wanted if n not in bound]
                if not missing:
                    continue
                spelled = q.replace("jax.lax.", "lax.")
                have = (", ".join(f"`{n}`" for n in sorted(bound)) if bound else "none")
                msg = (f"`{spelled}` over axis `{missing[0]}` in {fn.trace_description()}: no enclosing "
                       f"`pmap`/`vmap` binds that axis name (bound here: {have}); JAX raises "
                       f"`NameError: unbound axis name`")
                yield ctx.finding(self, axis, msg, confidence=fn.confidence)

    # ----------------------------------------------------------------- pmap
    def _pmapped(self, ctx: Context) -> Iterator[Tuple[Function, Tuple[str, ...]]]:
        """Functions a replicating transform maps with a literal axis name, and the names."""
        m = ctx.model
        axes = axis_index(m)
        per: Dict[int, Tuple[Function, List[str]]] = {}
        unnamed: Dict[int, Function] = {}
        for site in m.transform_sites:
            if site.transform.name not in REPLICATING or site.target is None:
                continue
            fn = site.target.function
            if fn.is_lambda:
                continue
            binds, names = axes.site_names(site)
            if not binds:
                # ``@jax.pmap`` with no axis name: no collective can reduce over the devices
                unnamed.setdefault(id(fn), fn)
                continue
            if not names:
                per.setdefault(id(fn), (fn, []))[1].append(None)   # names unknown here: silent
                continue
            entry = per.setdefault(id(fn), (fn, []))
            entry[1].extend(n for n in names if n not in entry[1])
        for fn, names in per.values():
            if None not in names:
                yield fn, tuple(names)
        for key, fn in unnamed.items():
            # no axis name is an ensemble (one model per device) unless the step is given a state
            # replicated across the devices (meant to stay identical): then it is data parallel
            if key not in per and self._only_replicated(ctx, fn) and self._given_replicas(ctx, fn):
                yield fn, ()

    @staticmethod
    def _given_replicas(ctx: Context, fn: Function) -> bool:
        """Some call of this module passes ``fn`` a value every binding of which is replicated
        across the devices (``state = jax_utils.replicate(state)``)."""
        m = ctx.model
        for scope in m.functions:
            for call in scope.of_type(ast.Call):
                if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
                    continue
                target = m.resolve_callable(call.func, scope)
                if target is None or target.function is not fn:
                    continue
                for a in call.args:
                    if _replicated(m, a, scope):
                        return True
        return False

    @staticmethod
    def _only_replicated(ctx: Context, fn: Function) -> bool:
        """``fn`` runs only under the replicating transforms that name no axis (no other trace
        context binds one around it: a ``shard_map``, an outer ``pmap``)."""
        return all(c.transform != "call" for c in fn.contexts) and \
            all(site.transform.name in REPLICATING or not axis_index(ctx.model).site_names(site)[0]
                for site in ctx.model.transform_sites if site.target is not None and site.target.function is fn)

    @staticmethod
    def _how(ctx: Context, fn: Function) -> str:
        """"pmapped with `jax.pmap`": the replicating transform, even when another one
        (a `jax.jit` decorator) is the function's first trace context."""
        for site in ctx.model.transform_sites:
            if site.target is not None and site.target.function is fn and site.transform.name in REPLICATING:
                return f"{site.transform.verb} `{site.transform.label}`"
        return fn.primary_context.description if fn.primary_context else "pmapped"

    def _unsynced(self, ctx: Context, fn: Function, names: Tuple[str, ...], u: Unsynced) -> Finding:
        origin = u.origin
        where = _where(u)
        what = short(where.func) if isinstance(where, ast.Call) else short(where)
        grads = f"`{origin.name}`" if origin.name else "the gradients"
        pmapped = f"`{fn.qualname}` ({self._how(ctx, fn)})"
        where_fn = pmapped if u.fn is fn else f"`{u.fn.qualname}`, called from {pmapped},"
        if not names:
            msg = (f"{grads} reach `{what}` in {where_fn}, whose pmap names no `axis_name`, so nothing "
                   f"averages them across devices: each device applies its own shard's gradients and the "
                   f"replicas drift apart (PyTorch's DDP averages them for you; pmap does not); give the "
                   f"pmap an `axis_name` and `lax.pmean` the gradients over it")
            return ctx.finding(self, where, msg, confidence=fn.confidence)
        axis = names[0]
        msg = (f"{grads} reach `{what}` in {where_fn} without `lax.pmean` over axis "
               f"`{axis}`: each device applies its own shard's gradients and the replicas drift apart "
               f"(PyTorch's DDP averages them for you; pmap does not)")
        fix = self._fix(ctx, origin, axis) if len(names) == 1 else None
        return ctx.finding(self, where, msg, confidence=fn.confidence, fix=fix)

    def _fix(self, ctx: Context, origin, axis: str) -> Optional[Fix]:
        src, m = ctx.source, ctx.model
        st = origin.stmt
        if origin.name is None or not isinstance(st, ast.Assign):
            return None
        indent = src.indentation(st.lineno)
        if len(indent) != src.char_col(st.lineno, st.col_offset):
            return None   # not the first statement on its line
        line = src.line_text(st.end_lineno)
        rest = line[src.char_col(st.end_lineno, st.end_col_offset):].strip()
        if rest and not rest.startswith("#"):
            return None   # `a = ...; b = ...`
        if st.end_lineno >= src.line_count:
            return None
        at = src.offset(st.end_lineno + 1, 0)
        local = m.imports.local_name_for("jax.lax")
        edits: List[Edit] = []
        if local is None:
            jax_name, edits = module_alias(m, src, "jax", "jax")
            local = f"{jax_name}.lax"
        quoted = f'"{axis}"' if '"' not in axis and "\\" not in axis else repr(axis)
        text = f"{indent}{origin.name} = {local}.pmean({origin.name}, axis_name={quoted}){src.newline()}"
        return self.fix.make([Edit.insert(at, text)] + edits)


def _where(u) -> ast.Call:
    """Where to report an unreduced gradient: the optimizer update that consumes it, when that
    is in the function holding the sink; else the sink -- for gradients handed to a helper of
    the module that updates with them, the call of that helper in the mapped step."""
    where = u.origin.tx_call if u.origin.tx_call is not None else u.sink
    if where is not u.sink and not any(n is where for n in ast.walk(u.fn.node)):
        where = u.sink
    return where


# calls that put one copy of a value on every device: data-parallel replicas
REPLICATE = frozenset({"flax.jax_utils.replicate", "jax.device_put_replicated"})


def _replicated(m, e: ast.expr, scope, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(e, ast.Call) and isinstance(e.func, (ast.Name, ast.Attribute)):
        return m.qualname(e.func, scope) in REPLICATE
    if isinstance(e, ast.Name):
        owner = m.resolve_scope(e.id, scope)
        if owner is None:
            return False
        bs = m.bindings(e.id, owner)
        made = [b for b in bs if b.kind == "=" and b.element is not None and
                _replicated(m, b.element, owner, depth + 1)]
        # the first binding replicates; the others are the step's own results
        return bool(made) and all(b.kind == "=" for b in bs)
    return False
