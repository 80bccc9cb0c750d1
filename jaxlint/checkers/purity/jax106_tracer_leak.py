from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import Function, SemanticModel
from ...analysis.objects import kernel_ref, ref_named, tuple_tree
from .bindings import AMBIGUOUS_METHODS, LIST_METHODS
from .idioms import scoped_state
from .facts import (PurityFacts, STORING_METHODS, Write, attribute_observed, depends_on_locals, reset_before_return,
                    traced_writes, value_traced)
from ..messages import short
from ..base import Context, Finding, TracedCodeRule, register


@register
class TracerLeak(TracedCodeRule):
    """
    ## What it does
    Flags a traced value that is stored somewhere that outlives the trace:
    on `self.<attr>` outside a Flax `setup` (for example in a method wrapped
    by `jax.jit(self._method)`), into a module-level or closed-over
    container (`activations.append(x)`, `cache[k] = y`), into a `global` or
    `nonlocal` name, or on a class attribute. Storing the value of an inner
    transform (a `lax.scan` body, a function under `jax.grad`) into a
    container of the jitted function around it is flagged too. Writes into a
    Pallas or state ref (`o_ref[i] = v`, the parameters `pallas_call` hands
    a kernel, `buf.at[i][...] = v`; names ending in `ref`/`refs`) are how
    kernels produce output, and are not; nor is a module-level dict that a
    context manager of the module sets up and restores around the trace
    (`with capturing(names): ... capture(name, x)`), nor a place the traced
    function itself resets before it returns (`previous = self.state`,
    `self.state = update(x)`, ..., `self.state = previous`; `model.signals =
    None` after use; a reset in a `finally:`): no tracer is left there when
    the trace ends, so nothing can use one later. Nor is `self` of an object
    every construction of which is local to one call (`interpreter =
    Seed(key)`, `return interpreter.run(f)`: made, used only as the receiver
    of its own methods, dropped when the call returns): what it stores dies
    with the call.

    A tracer left on an attribute that no visible code can read stale is
    reported only in the strict profile (`--strict`): the error needs a
    later use of the leaked value. Reported by default: the attribute is
    read by code that runs outside every trace (an eager method, a
    script), or by the writing function before it writes (`self.mean =
    0.9 * self.mean + ...`: the next trace reads the last one's tracer).
    A read in another traced function may run after the write in the same
    trace (a stateful object that sets its parameters and reads them back
    with `get_params()` inside one jitted loss): not evidence; nor is a
    read that runs before the writer exists (above its `def`, in no loop
    around it), or a read of another function's object of the same name.

    ## Why is this bad?
    In PyTorch, `self.running_mean = ...` inside `forward` just keeps a
    tensor. Under `jax.jit`, `grad`, `vmap` or a `lax` loop, the values your
    function sees are *tracers*: placeholders that only exist while JAX
    records the computation. A tracer kept in `self`, a global list or a
    cache outlives that recording; the next time it is used JAX raises
    `UnexpectedTracerError` (or silently computes with a stale placeholder),
    and the stored value never updates on later calls because the Python
    code no longer runs.

    ## Example
    ```python
    class RunningNormalizer:
        def __init__(self):
            self.mean = jnp.zeros(3)
            self.normalize = jax.jit(self._normalize)

        def _normalize(self, x):
            self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
            return x - self.mean
    ```

    ## Use instead
    ```python
    @jax.jit
    def normalize(mean, x):
        mean = 0.9 * mean + 0.1 * x.mean(0)
        return x - mean, mean

    out, stats_mean = normalize(stats_mean, x)
    ```
    Return the value and keep state explicitly (a Flax `self.variable`
    collection or an NNX `Variable` where the framework tracks it).

    ## Fix safety
    No automatic fix: returning the value changes the function's outputs and
    its callers.
    """

    confirm = "tracer-leak"
    summary = "a traced value stored on `self`, a global, an outer container or a class escapes the trace"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for facts, fn, writes in traced_writes(m):
            g, n = facts.bindings.declarations(fn)
            for w in writes:
                if w.kind == "del":
                    continue
                values = w.values[:1] if w.kind != "call" else w.values
                if w.kind == "call" and w.method not in STORING_METHODS:
                    continue
                if w.kind == "item" and m.is_array(w.target.value, fn):
                    continue   # item assignment on an array: JAX301
                if w.kind == "item" and (ref_named(w.target) or kernel_ref(m, w.target, fn)):
                    continue   # a Pallas/state ref (or a field of one), written in place on purpose
                where = self._escape(facts, fn, w, g, n, values)
                if where is None:
                    continue
                culprit = value_traced(m, fn, values)
                if culprit is None:
                    continue
                if w.kind == "attr" and tuple_tree(m, fn, values[0]):
                    continue   # ``tree_map(lambda x: tuple(x.names), tree)``: axis-name tuples, no tracer
                if w.kind in ("attr", "item", "name") and reset_before_return(m, fn, w):
                    continue   # put back before the trace ends: no tracer outlives it
                shown = ast.unparse(culprit)
                if len(shown) > 30:
                    shown = shown[:27] + "..."
                msg = (f"traced value `{shown}` is stored {where} inside {fn.trace_description()}; it escapes "
                       f"the trace (`UnexpectedTracerError` when used later) — return it instead")
                strict = None
                if w.kind == "attr" and isinstance(w.target, ast.Attribute) \
                        and not attribute_observed(m, fn, w, self._outer_receiver(facts, fn, w)):
                    strict = NO_STALE_READ_BASIS
                yield ctx.finding(self, w.node, msg, confidence=fn.confidence, strict=strict)

    def _escape(self, facts: PurityFacts, fn: Function, w: Write, g, n, values) -> Optional[str]:
        b = facts.bindings
        root = w.root
        # --- on self
        owner = facts.self_root(fn, root)
        if owner is not None:
            if w.target is root:
                return None   # rebinding the name ``self``
            info = owner.cls
            if facts.frozen_class(info) or facts.nnx_rooted(fn) or facts.built_per_trace(info):
                return None
            if info.module_kind == "linen" and facts.setup_like(owner):
                return None
            if info.module_kind == "linen" and w.kind == "attr":
                return None   # a linen module is frozen outside setup: JAX611 names that failure, once (as JAX105)
            if facts.variable_write(info, w.target):
                return None   # a Flax variable update
            if fn is owner and owner.name in ("__init__", "__post_init__", "__new__"):
                return None   # building the object
            if w.kind == "call" and not self._container_call(facts, fn, w, owner):
                return None
            return f"on `{short(w.target)}`"
        # --- on a class
        info = facts.class_root(fn, root)
        if info is not None:
            if w.target is root or facts.frozen_class(info):
                return None
            if w.kind == "call" and w.method not in LIST_METHODS:
                return None
            return f"on class attribute `{short(w.target)}`"
        # --- global / nonlocal rebinding
        if w.kind == "name":
            if root.id in g:
                return f"in global `{root.id}`"
            if root.id in n:
                scope = b.resolve(root.id, fn)
                if scope is None:
                    return None
                if facts.in_traced(scope) and not self._inner_leak(facts, fn, values):
                    return None
                return f"in nonlocal `{root.id}`"
            return None
        # --- into a module-level or closed-over object
        scope = b.outer_variable(root.id, fn)
        if scope is None:
            return None
        if scope.is_module:
            if any(scoped_state(facts.model, f, root.id) for f in facts.model.functions if f.decorators or f.cls):
                return None   # reset by the module's context manager: state scoped to a ``with`` block
            owner_text = "module-level"
        else:
            if facts.in_traced(scope) and not self._inner_leak(facts, fn, values):
                return None
            owner_text = "closed-over"
        if w.kind == "call":
            if w.method in AMBIGUOUS_METHODS and not (w.direct and b.container_bound(scope, root.id)):
                return None
        elif w.kind == "item":
            if not (b.container_bound(scope, root.id) or not w.direct):
                return None
        return f"in {owner_text} `{root.id}`"

    @staticmethod
    def _outer_receiver(facts: PurityFacts, fn: Function, w: Write) -> Optional[str]:
        """``model.params = p`` on a module-level or closed-over ``model`` (not ``self``, not a
        class): the name through which later reads reach that object."""
        t = w.target
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)) or t.value is not w.root:
            return None
        if facts.self_root(fn, w.root) is not None or facts.class_root(fn, w.root) is not None:
            return None
        return w.root.id

    @staticmethod
    def _inner_leak(facts: PurityFacts, fn: Function, values) -> bool:
        """Inside a trace: only values of an inner transform's own tracers escape."""
        return facts.own_transform(fn) and depends_on_locals(facts.model, fn, values)

    @staticmethod
    def _container_call(facts: PurityFacts, fn: Function, w: Write, owner: Function) -> bool:
        """``self.<attr>.append(v)``: a container attribute (``update``/``add`` need the
        attribute bound to a list/dict/set in ``__init__``/``setup``)."""
        if w.method in LIST_METHODS:
            return True
        t = w.target
        if not (isinstance(t, ast.Attribute) and t.value is w.root):
            return False
        info = owner.cls
        for v in info.setup_attrs.get(t.attr, ()):
            if facts.bindings.is_container_value(v, info.scope):
                return True
        return False


# why a leaked attribute that no code can read stale belongs to the strict profile
NO_STALE_READ_BASIS = ("no code that runs outside a trace reads the attribute here, nor does the writing function "
                       "before it writes: whether anything uses the tracer left there is not known (a traced reader "
                       "may run after the write in the same trace; another module might read it)")
