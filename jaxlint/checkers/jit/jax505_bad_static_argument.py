from __future__ import annotations

import ast
import math as _math
import re
from typing import Dict, Iterator, List, Optional, Set

from ...analysis import CONTAINER, JAX, NUMPY, CallTarget, ClassInfo, Function, SemanticModel
from ...analysis import knowledge as K
from .calls import JIT_NAMES, call_index, derived_names
from ..base import Context, Finding, Rule, register
from ..messages import short
from ..prng.vocabulary import KEY_PRODUCERS, RANDOM, RANDOM_NON_CONSUMING
from ..pytree.boundary import class_self_assignments, constructed_class, instance_class

# transforms whose static arguments must be hashable and exist
_STATIC_TRANSFORMS = K.STATIC_CHECKED

# class decorators / registration calls that make a class a pytree (or static)
_PYTREE_DECORATORS = frozenset({
    "jax.tree_util.register_pytree_node_class", "jax.tree_util.register_pytree_with_keys_class",
    "jax.tree_util.register_dataclass", "jax.tree_util.register_static", "flax.struct.dataclass",
    "chex.dataclass", "chex.mappable_dataclass", "equinox.Module", "simple_pytree.Pytree",
})
_PYTREE_REGISTRATIONS = frozenset({
    "jax.tree_util.register_pytree_node", "jax.tree_util.register_pytree_with_keys",
    "jax.tree_util.register_pytree_node_class", "jax.tree_util.register_pytree_with_keys_class",
    "jax.tree_util.register_dataclass", "jax.tree_util.register_static",
})
# bases that are pytrees (or tuples, which are)
_PYTREE_BASES = frozenset({
    "flax.struct.PyTreeNode", "equinox.Module", "flax.nnx.Module", "flax.nnx.Object", "flax.nnx.Pytree",
    "typing.NamedTuple", "NamedTuple", "tuple", "collections.namedtuple", "simple_pytree.Pytree",
    "chex.ArrayTree", "flax.nnx.Variable",
})
# bases that are known *not* to be pytrees
_PLAIN_BASES = frozenset({"object", "flax.linen.Module", "abc.ABC"})

_UNHASHABLE = {
    ast.List: "a list", ast.ListComp: "a list", ast.Dict: "a dict", ast.DictComp: "a dict",
    ast.Set: "a set", ast.SetComp: "a set",
}
_UNHASHABLE_CALLS = {"list": "a list", "dict": "a dict", "set": "a set"}


@register
class BadStaticArgument(Rule):
    """
    ## What it does
    Checks the static arguments of `jax.jit` (and `jax.pmap`):
    `static_argnums`/`static_argnames` that name a parameter the function does
    not have; a static parameter that receives an array, a list or a dict at a
    call site in this module (directly, through a local or module-level
    constant, a `self.<attr>` set in `__init__`, or a parameter of the
    calling function that one of its callers here gives a list) -- or an instance of a
    `@dataclass` of the module that is not frozen, or an attribute of an
    object of the module's class that its constructor sets to a list or dict
    (`cfg.sizes` with `main(Config())`) (the dataclass decorator sets its
    `__hash__` to None; also a dict given to a class's constructor and kept on
    `self`: `Loader(data, {"flip": True})`, `ops=self.ops`); a static parameter that
    receives a loop counter (`for step in range(n)`, `enumerate`, `step += 1`,
    an object of the module whose `__iter__` hands out a `range`)
    or a value the loop recomputes -- from its counter, also through a parameter
    every call passes it for (`trainer.epoch(epoch, ...)` with `lr = base * decay
    ** idx` inside) (an annealed temperature
    `max(0.1, t0 * 0.95 ** epoch)`, also through a helper or a schedule object's
    `__call__`: `float(cosine_temperature(step, total))`, `anneal(t, total=n)`,
    `self.current_lr(epoch)`, `schedule(epoch)` with
    `schedule = Schedule(0.5, 0.8)`), as the item of a loop over a schedule --
    a list a comprehension over `range` builds with values that change with
    the counter (`for t in self.schedule` with `self.schedule = [t0 * r ** i
    for i in range(n)]`, `enumerate(anneal(4.0, 1.0, 6))`), the loop's body
    calling once per value (a loop that runs a whole inner loop per value
    reuses each program; a literal display is a few configurations on
    purpose) --, from its own previous value (a decayed
    learning rate, `lr = lr * decay`, its start also unpacked from a tuple
    display: `temperature, decay = 2.0, 0.9`) or as a maximum over each batch
    (`max(len(s) for s in batch)`, in any loop over data -- not a literal
    display of configurations --, also the batch a strided loop selects:
    `for i in range(0, len(data), bs)` ... `int(lengths.max())` of
    `data[i:i + bs]`) or over data the loop draws at random anew
    (`lengths = rng.integers(...)`; `max_len = int(lengths.max())`, in a loop
    named for steps or one whose body runs no inner loop: one call per new
    value -- a loop that runs a whole inner loop per value reuses each
    program), or an
    element a generator of the module draws for each item it yields (`for
    tokens, max_len in batches(rng)` with `length = int(rng.integers(5, 32))`
    yielded, or a `jax.random` draw from a key the generator's loop splits
    anew; a pick among a few values, `rng.choice([16, 32])`, is not
    reported), or a maximum a helper of the module returns for the batch the
    loop hands it (`tokens, longest = collate(corpus[i:i + 4])` with `return
    batch, max(len(s) for s in sentences)`) -- or a new instance of a class of the
    module that hashes by identity (no `__eq__`/`__hash__`:
    `run(x, cfg=Config(3))` in a loop), or a `self.<attr>` that the method
    passing it recomputes from its previous value after the call
    (`self.tau = self.tau * 0.99`) while a loop of the module runs the method
    on one object, or an attribute of an object whose method the loop calls
    and that method rebinds it so (`scaler.scale` with `scaler.adjust(...)`
    in the loop) -- so it changes on every call (where the
    loop's bounds and the numbers are literals, the message says how many
    programs the loop builds; fewer than three distinct values are left
    alone); and `@jax.jit` applied directly to a method
    whose class is not a registered pytree, so `self` is passed as an array
    argument.

    ## Why is this bad?
    A static argument is part of the compilation cache key: JAX hashes it and
    compiles a new program for every new value. PyTorch has no such notion,
    so it is easy to mark the wrong thing static. Arrays, lists and dicts are
    not hashable and raise `ValueError: Non-hashable static arguments are not
    supported`; a name or index that matches no parameter raises `ValueError`
    when the function is wrapped. A static argument fed from a loop counter is
    a new cache key on every iteration: JAX traces and compiles the function
    again on every call (five calls with `step` = 0..4, five compilations), so
    the "compiled" step is slower than plain Python. A `range` with a literal
    bound below the unrolled-loop threshold is left alone (a few specialised
    programs are often on purpose) unless its counter names training steps
    (`for epoch in range(5)`: a short run is still one program per epoch),
    and so are values that repeat
    (`step % 2`). A plain method under `@jax.jit` receives
    `self` as its first, traced argument, and JAX cannot turn an arbitrary
    object into an array: `TypeError: Error interpreting argument ... as an
    abstract array`.

    ## Example
    ```python
    @partial(jax.jit, static_argnames=("sizes",))
    def mlp(params, x, sizes):
        ...

    mlp(params, x, sizes=[128, 64])

    for step in range(num_steps):       # train_step has static_argnums=(2,)
        state = train_step(state, batch, step)

    class Model:
        @jax.jit
        def predict(self, x):
            return x @ self.w
    ```

    ## Use instead
    ```python
    mlp(params, x, sizes=(128, 64))      # a tuple is hashable

    for step in range(num_steps):       # step is traced: one compilation
        state = train_step(state, batch, step)

    class Model:
        @partial(jax.jit, static_argnums=0)   # self is static (hashed by identity)
        def predict(self, x):
            return x @ self.w
    ```
    Or register the class as a pytree (`@jax.tree_util.register_pytree_node_class`,
    `flax.struct.dataclass`, `equinox.Module`) so its arrays are traced.

    ## Fix safety
    No automatic fix: whether to pass a tuple, make the argument dynamic, or
    register the class as a pytree depends on intent.
    """

    # the errors JAX raises for three of the four shapes (a static argument that changes every
    # iteration raises nothing: it recompiles, which JAX502's compile counting shows)
    confirm = ("trace-error", "ValueError: static_argnums", "ValueError: static_argnames",
               "ValueError: Non-hashable static arguments", "TypeError: as an abstract array")
    # a static value that changes on every iteration raises nothing: a run of the program shows the
    # function traced again for each new value (jaxlint.confirm's `recompiles`)
    confirm_shapes = (("compiles a new program for every new value", "recompiles"),
                      ("compiles it again for every new value", "recompiles"))
    summary = "static argument that is unhashable, changes every loop iteration, or names no parameter; non-static `self`"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        sites = [s for s in m.transform_sites if s.transform.name in _STATIC_TRANSFORMS and s.target is not None]
        if not sites:
            return
        idx = None
        for site in sites:
            tr = site.transform
            target = site.target
            fn = target.function
            call = site.call
            # (keywords bound by ``partial`` are constants of the callable, not static
            # arguments: passed again at a call, they are traced like any other)
            static: Set[str] = set()
            params = fn.params[target.bound_positional:]
            # under another decorator (``@jit(static_argnames=...)`` over ``@add_with_summary``)
            # the jitted callable is the wrapper, whose signature is unknown here
            signature_known = not _wrapped_below(m, site, fn)
            if call is not None and signature_known:
                for kw in call.keywords:
                    if kw.arg in tr.static_nums_kw:
                        nums = SemanticModel.literal_ints(kw.value)
                        if nums is None:
                            continue
                        for i in nums:
                            if -len(params) <= i < len(params):
                                static.add(params[i])
                            elif fn.vararg is None:
                                yield ctx.finding(self, kw.value, (
                                    f"`{kw.arg}` includes {i}, but {fn.display()} takes only {len(params)} "
                                    f"positional argument{'s' if len(params) != 1 else ''}: JAX raises `ValueError`"))
                    elif kw.arg in tr.static_names_kw:
                        names = SemanticModel.literal_strs(kw.value)
                        if names is None:
                            continue
                        for n in names:
                            if n in fn.param_nodes and n not in (fn.vararg, fn.kwarg) \
                                    and n not in fn.params[:target.bound_positional]:
                                static.add(n)
                            elif fn.kwarg is None:
                                yield ctx.finding(self, kw.value, (
                                    f"`{kw.arg}` names `{n}`, but {fn.display()} has no parameter `{n}`: "
                                    f"JAX raises `ValueError`"))
            if site.is_decorator and fn.is_method and target.bound_positional == 0 and signature_known:
                # (under a decorator jaxlint cannot see into, which parameters the static spec
                # names is unknown -- ``static_argnames=('self',)`` reaches through functools.wraps)
                f = self._method_self(ctx, site, fn, static)
                if f is not None:
                    yield f
            if static and tr.name in JIT_NAMES | {"jax.pmap"}:
                if idx is None:
                    idx = call_index(m)
                    # jit and pmap bindings (``bindings``), or jit only where the index has no pmap;
                    # the first binding of each site, found once (not once per site: quadratic)
                    by_site: Dict[int, object] = {}
                    for b in getattr(idx, "bindings", None) or idx.jit_bindings:
                        by_site.setdefault(id(b.site), b)
                yield from self._call_sites(ctx, idx, site, static, by_site)

    # ------------------------------------------------------ jitted methods
    def _method_self(self, ctx: Context, site, fn: Function, static: Set[str]) -> Optional[Finding]:
        m = ctx.model
        selfname = fn.self_name
        if selfname is None or selfname in static:
            return None
        for d in fn.decorators:
            q = m.qualname(d, fn.parent) if isinstance(d, (ast.Name, ast.Attribute)) else None
            if q in ("classmethod", "property", "functools.cached_property", "staticmethod"):
                return None
        info = fn.cls
        if not self._plain_class(ctx, info, set()):
            return None
        spelling = ctx.source.segment(site.node)
        if len(spelling) > 30:
            spelling = site.transform.name
        msg = (f"`@{spelling}` on method {fn.display()}: `self` is passed as a traced argument, but "
               f"`{info.name}` is not a registered pytree (JAX raises `TypeError`); make `self` static with "
               f"`static_argnums=0` or register the class as a pytree")
        return ctx.finding(self, site.node, msg)

    def _plain_class(self, ctx: Context, info: ClassInfo, seen: Set[int]) -> bool:
        """``info`` is surely not a pytree: only plain (or linen) bases, no registration."""
        m = ctx.model
        if id(info) in seen:
            return False
        seen.add(id(info))
        if info.module_kind in ("nnx", "equinox"):
            return False
        scope = info.scope
        for d in info.node.decorator_list:
            e = d.func if isinstance(d, ast.Call) else d
            q = m.qualname(e, scope)
            text = ast.unparse(e).lower()
            if q in _PYTREE_DECORATORS or "pytree" in text or "dataclass" in text and q != "dataclasses.dataclass":
                return False
        if any(kw.arg == "metaclass" for kw in info.node.keywords):
            return False
        for b in info.node.bases:
            q = m.qualname(b, scope)
            if q in _PLAIN_BASES or (q is not None and q.startswith("flax.linen.") and info.module_kind == "linen"):
                continue
            if isinstance(b, ast.Name) and b.id in m.classes:
                if not self._plain_class(ctx, m.classes[b.id], seen):
                    return False
                continue
            return False   # an imported base: it may be a pytree
        names = {"tree_flatten", "tree_unflatten", "__jax_array__"}
        if names & set(info.methods):
            return False
        if self._registered(ctx, info.name):
            return False
        return True

    def _fresh_object(self, ctx: Context, a: ast.expr, scope: Function, call: ast.Call):
        """(class, loop) when ``a`` constructs, on every iteration of a loop around ``call``
        (directly, or through a name the loop body binds once to the construction), an instance
        of a class of this module that hashes by identity: no decorator, no metaclass, only
        plain bases of this module or ``object``, no ``__eq__``/``__hash__``."""
        m = ctx.model
        loops = _enclosing_loops(scope, call)
        if not loops:
            return None
        value = a
        if isinstance(a, ast.Name):
            binds = _bindings(scope, a.id)
            if not binds or len(binds) != 1 or not isinstance(binds[0], ast.Assign) or \
                    not _inside(loops[0], binds[0]) or binds[0].lineno > call.lineno:
                return None
            value = binds[0].value
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)) or \
                m.qualname(value.func, scope) is not None or m.resolve_scope(value.func.id, scope) is not m.module:
            return None
        info = m.classes.get(value.func.id)
        if info is None or not self._identity_hashed(ctx, info, set()):
            return None
        n = _literal_iterations(loops[0], scope, m)
        if n is not None and n < ctx.settings.unrolled_loop_threshold:
            return None     # a few programs
        return info, loops[0]

    def _identity_hashed(self, ctx: Context, info: ClassInfo, seen: Set[int]) -> bool:
        m = ctx.model
        if id(info) in seen or info.module_kind is not None or info.node.decorator_list or info.node.keywords:
            return False
        seen.add(id(info))
        if {"__eq__", "__hash__", "__new__", "__init_subclass__"} & set(info.methods):
            return False
        if any(isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id in ("__hash__", "__eq__")
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target])) for st in info.node.body):
            return False
        for b in info.node.bases:
            if m.qualname(b, info.scope) == "object":
                continue
            if isinstance(b, ast.Name) and b.id in m.classes and self._identity_hashed(ctx, m.classes[b.id], seen):
                continue
            return False
        return True

    def _registered(self, ctx: Context, name: str) -> bool:
        """A pytree registration call names the class (the names, collected once per model:
        asked per jitted method, a scan of every call each time was quadratic)."""
        m = ctx.model
        memo = m._memo("_jax505_registered")
        names = memo.get("names")
        if names is None:
            names = memo["names"] = set()
            for fn in m.functions:
                for call in fn.of_type(ast.Call):
                    if call.args and isinstance(call.args[0], ast.Name):
                        q = m.qualname(call.func, fn) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
                        if q in _PYTREE_REGISTRATIONS or (q is not None and "register" in q):
                            names.add(call.args[0].id)
        return name in names

    # ---------------------------------------------------------- call sites
    def _call_sites(self, ctx: Context, idx, site, static: Set[str], by_site) -> Iterator[Finding]:
        m = ctx.model
        binding = by_site.get(id(site))
        if binding is None:
            return
        target = site.target
        fn = target.function
        for cs in idx.calls_to(binding):
            call = cs.call
            bound = target.bound_positional
            if binding.kind == "def" and binding.cls is not None and fn.is_method:
                bound = 1   # self.method(...): self is bound
            pairs, _ = m.bind_arguments(CallTarget(fn, bound, target.bound_keywords), call)
            starred = {id(a.value) for a in call.args if isinstance(a, ast.Starred)}
            starred |= {id(k.value) for k in call.keywords if k.arg is None}
            reported = False
            for p, a in pairs:
                if p not in static or id(a) in starred:
                    continue
                what = self._unhashable(ctx, a, cs.scope)
                if what is None:
                    continue
                text = short(a, 30)
                hint = "pass a tuple" if what.startswith(("a list", "a set")) else (
                    "pass a hashable value (a tuple of pairs, a frozen dataclass)" if what.startswith("a dict") else
                    "declare it `@dataclass(frozen=True)`" if "dataclass" in what else
                    "make it a regular (traced) argument")
                msg = (f"`{text}` is {what} passed to static argument `{p}` of {fn.display()}: static "
                       f"arguments must be hashable (JAX raises `ValueError`); {hint}")
                reported = True
                yield ctx.finding(self, a, msg)
            if reported:
                continue
            for p, a in pairs:
                if p not in static or id(a) in starred:
                    continue
                loop = _changing_in_loop(ctx, a, cs.scope, call)
                if loop is None:
                    change = _derived_change(ctx, a, cs.scope, call) or _changed_per_call(ctx, a, cs.scope, call) \
                        or _counter_through_parameter(ctx, a, cs.scope, call)
                    if change is None:
                        fresh = self._fresh_object(ctx, a, cs.scope, call)
                        if fresh is not None:
                            info, lp = fresh
                            n = _literal_iterations(lp, cs.scope, ctx.model)
                            count = f": the loop builds {n} programs" if n is not None else ""
                            msg = (f"`{short(a, 30)}` is a new `{info.name}` object on every iteration of the "
                                   f"loop at line {lp.lineno}, and `{info.name}` defines no `__eq__`/`__hash__` (it "
                                   f"hashes by identity): as static argument `{p}` of {fn.display()} every call "
                                   f"misses the compilation cache and compiles again{count}; build it once before "
                                   f"the loop, or make it a `@dataclass(frozen=True)`")
                            yield ctx.finding(self, a, msg)
                            break
                        continue
                    how, programs = change
                    msg = (f"`{short(a, 30)}` {how}, but is static argument `{p}` of {fn.display()}: JAX "
                           f"compiles a new program for every new value{programs}; pass `{p}` as a regular "
                           f"(traced) argument")
                    yield ctx.finding(self, a, msg)
                    break
                kind = "loop" if not isinstance(loop, ast.While) else "`while` loop"
                n = _literal_iterations(loop, cs.scope, ctx.model)
                count = f": the loop builds {n} programs" if n is not None else " (each call recompiles)"
                msg = (f"`{short(a, 30)}` changes on every iteration of the {kind} at line {loop.lineno} but is "
                       f"static argument `{p}` of {fn.display()}: JAX compiles it again for every new value"
                       f"{count}; pass `{p}` as a regular (traced) argument")
                yield ctx.finding(self, a, msg)
                break

    @staticmethod
    def _passed_unhashable(ctx: Context, fn: Function, param: str, depth: int) -> Optional[str]:
        """What a call of ``fn`` in this module passes for ``param`` that is unhashable (a list
        display, a local list, or one handed on again by its own caller), said with the line of
        that call; None when no visible call does -- nor when ``param`` is a static argument of a
        transform of ``fn`` itself: the call raises there (reported at it), and inside ``fn`` the
        value is always one that hashed."""
        m = ctx.model
        if param in fn.static_params and param not in fn.inferred_static and \
                any(site.transform.name in _STATIC_TRANSFORMS for site in m.decorator_sites(fn)):
            return None     # (decorated: every call goes through that jit)
        for call, s, target in _calls_of(m, fn):
            pairs, _ = m.bind_arguments(target, call)
            for p, a in pairs:
                if p != param:
                    continue
                what = BadStaticArgument._unhashable(ctx, a, s, depth + 1)
                if what is not None and "passed" not in what:
                    return f"{what} (passed for `{param}` on line {call.lineno})"
                if what is not None:
                    return what
        return None

    @staticmethod
    def _constructed_unhashable(ctx: Context, init: Function, param: str, depth: int) -> Optional[str]:
        """What a construction of ``init``'s class in this module (``Loader(data, 4, {...})``)
        passes for ``param`` that is unhashable, said with the line of that call."""
        m = ctx.model
        info = init.cls
        params = [p for p in init.params if p != init.self_name]
        for s in m.functions:
            for call in s.of_type(ast.Call):
                if not isinstance(call.func, ast.Name) or call.func.id != info.name or \
                        m.resolve_scope(info.name, s) is not info.scope:
                    continue
                a = next((k.value for k in call.keywords if k.arg == param), None)
                if a is None and param in params and params.index(param) < len(call.args) and \
                        not any(isinstance(x, ast.Starred) for x in call.args[:params.index(param) + 1]):
                    a = call.args[params.index(param)]
                if a is None:
                    continue
                what = BadStaticArgument._unhashable(ctx, a, s, depth + 1)
                if what is not None:
                    return what if "passed" in what else \
                        f"{what} (passed for `{param}` to `{info.name}` on line {call.lineno})"
        return None

    @staticmethod
    def _unhashable(ctx: Context, a: ast.expr, scope: Function, depth: int = 0) -> Optional[str]:
        m = ctx.model
        what = _UNHASHABLE.get(type(a))
        if what is not None:
            return what
        owner = m.resolve_scope(a.id, scope) if isinstance(a, ast.Name) and a.id not in scope.locals else scope
        if isinstance(a, ast.Name) and owner is not None and not owner.is_module and a.id in owner.param_nodes \
                and depth < 2 and not any(b.kind != "param" for b in m.bindings(a.id, owner)):
            # a parameter handed on as is (also one a nested function reads from its enclosing
            # function): what the module's callers pass for it (the call that passes a list raises)
            what = BadStaticArgument._passed_unhashable(ctx, owner, a.id, depth)
            if what is not None:
                return what
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Name):
            q = m.qualname(a.func, scope)
            if q in _UNHASHABLE_CALLS:
                return _UNHASHABLE_CALLS[q]
        values = None
        if isinstance(a, ast.Name):
            values = _local_values(scope, a.id)
        elif isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name):
            values = _self_values(scope, a) or (_object_values(m, scope, a) if depth < 2 else [])
        if isinstance(a, ast.Call):
            w = _unhashable_dataclass(m, a, scope)
            if w is not None:
                return w
        if values and isinstance(a, ast.Attribute) and depth < 2:
            # ``self.ops = ops`` in ``__init__``: what the module's constructor calls pass for ``ops``
            init = _init_of(scope)
            if init is not None and all(isinstance(v, ast.Name) and v.id in init.param_nodes for v in values) \
                    and len({v.id for v in values}) == 1:
                what = BadStaticArgument._constructed_unhashable(ctx, init, values[0].id, depth)
                if what is not None:
                    return what
        if values:
            kinds = set()
            for v in values:
                w = _UNHASHABLE.get(type(v))
                if w is None and isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
                    w = _UNHASHABLE_CALLS.get(m.qualname(v.func, scope) or "") or \
                        _unhashable_dataclass(m, v, scope)
                kinds.add(w)
            if len(kinds) == 1 and None not in kinds:
                return kinds.pop()
        k = m.kind(a, scope)
        if k & CONTAINER:
            return None
        if m.is_array(a, scope):
            return "a JAX array"
        if k & NUMPY and not k & JAX:
            return "a NumPy array"
        return None


def _calls_of(m: SemanticModel, fn: Function) -> List[tuple]:
    """The calls of ``fn`` in this module, not through a transform: (call, calling scope, target)."""
    out = []
    for c in call_index(m).callers_of(fn):
        target = m.resolve_callable(c.call.func, c.scope)
        if target is not None and not target.transforms:
            out.append((c.call, c.scope, target))
    return out


def _unhashable_dataclass(m: SemanticModel, call: ast.Call, scope: Function) -> Optional[str]:
    """``Config(...)`` of a class of this module decorated ``@dataclasses.dataclass`` with
    ``eq`` left on and neither ``frozen=True`` nor ``unsafe_hash=True``, and no ``__hash__`` of
    its own or a base's: the decorator sets ``__hash__ = None`` (JAX: "Non-hashable static
    arguments are not supported")."""
    if not isinstance(call.func, ast.Name) or m.qualname(call.func, scope) is not None:
        return None
    info = m.classes.get(call.func.id)
    if info is None or m.resolve_scope(call.func.id, scope) is not m.module or info.node.bases or \
            info.node.keywords or "__hash__" in info.methods:
        return None
    if any(isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(t, ast.Name) and t.id == "__hash__"
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target])) for st in info.node.body):
        return None
    decs = info.node.decorator_list
    if len(decs) != 1:
        return None
    d = decs[0]
    e = d.func if isinstance(d, ast.Call) else d
    if m.qualname(e, info.scope) != "dataclasses.dataclass":
        return None
    if isinstance(d, ast.Call):
        if d.args:
            return None
        for kw in d.keywords:
            if kw.arg is None or not isinstance(kw.value, ast.Constant):
                return None
            if kw.arg in ("frozen", "unsafe_hash") and kw.value.value:
                return None
            if kw.arg == "eq" and not kw.value.value:
                return None
    return f"an instance of `{info.name}`, a `@dataclass` that is not frozen (its `__hash__` is None)"


def _local_values(scope: Function, name: str) -> List[ast.expr]:
    """Values of a name bound only by plain assignments in the scope that owns it
    (this function, or an enclosing one / the module for a closed-over constant)."""
    while scope is not None and name not in scope.locals:
        scope = scope.parent
    if scope is None or name not in scope.locals or name in scope.param_nodes \
            or name in scope.globals_declared:
        return []
    if scope.is_module and any(name in f.globals_declared for f in scope.children):
        return []   # rebound through `global` somewhere
    out = []
    for a in scope.of_type(ast.Assign):
        for t in a.targets:
            if isinstance(t, ast.Name) and t.id == name:
                out.append(a.value)
            elif not isinstance(t, (ast.Attribute, ast.Subscript)) and any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                elt = _unpacked_element(t, a.value, name)
                if elt is None:
                    return []   # unpacked from an opaque value: unknown
                out.append(elt)
    for a in scope.of_type(ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr, ast.withitem):
        t = getattr(a, "target", None) or getattr(a, "optional_vars", None)
        if t is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
            return []
    return out


def _init_of(scope: Function) -> Optional[Function]:
    """The constructor (``__init__``, or a linen module's ``setup``) of the class whose method
    ``scope`` is."""
    method = scope.enclosing_method()
    if method is None or method.cls is None:
        return None
    info = method.cls
    return info.methods.get("setup" if info.module_kind == "linen" else "__init__")


def _self_values(scope: Function, attr: ast.Attribute) -> List[ast.expr]:
    """``self.sizes`` inside a method: the values ``__init__`` assigns to it (if it is
    assigned nowhere else)."""
    method = scope.enclosing_method()
    if method is None or attr.value.id != method.self_name or method.cls is None:
        return []
    return _init_values(method.cls, attr.attr)


def _object_values(m: SemanticModel, scope: Function, attr: ast.Attribute) -> List[ast.expr]:
    """``cfg.sizes`` where ``cfg`` surely holds an object of a plain class of this module -- a
    local made once from it (``cfg = Config()``), or a parameter every call of this module
    fills with one (``main(Config())``) --: the values its ``__init__`` assigns to ``sizes`` (if
    no other method assigns it, and nothing here sets ``cfg.sizes``)."""
    name = attr.value.id
    owner = m.resolve_scope(name, scope)
    if owner is None:
        return []
    classes = []
    if name in owner.param_nodes and not owner.is_module:
        if any(b.kind != "param" for b in m.bindings(name, owner)):
            return []
        for call, s, target in _calls_of(m, owner):
            pairs, _ = m.bind_arguments(target, call)
            got = [a for p, a in pairs if p == name]
            if len(got) != 1:
                return []
            a = got[0]     # ``main(Config())``, or ``cfg = Config(); main(cfg)``
            classes.append(instance_class(m, a, s) if isinstance(a, ast.Name) and a.id in s.locals
                           else constructed_class(m, a, s))
    else:
        classes.append(instance_class(m, attr.value, scope))
    info = classes[0] if classes else None
    if info is None or any(c is not info for c in classes):
        return []
    if attr.attr in _attributes_set_outside_methods(m, info):
        return []   # ``cfg.sizes = (6, 16, 2)`` (through any name) somewhere: not followed
    return _init_values(info, attr.attr)


def _attributes_set_outside_methods(m: SemanticModel, info) -> Set[str]:
    """The attribute names this module stores anywhere but in ``info``'s own methods (``c.sizes =
    ...``, ``cfg.sizes, depth = ...``): computed once per module and class."""
    memo = m.__dict__.setdefault("_jax505_attr_stores", {})
    got = memo.get(id(info))
    if got is None:
        own = {id(f) for f in info.methods.values()}
        got = set()
        for f in m.functions:
            if id(f) in own:
                continue
            for n in f.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Store):
                            got.add(x.attr)
        memo[id(info)] = got
    return got


def _init_values(info, attr: str) -> List[ast.expr]:
    """The values the constructor (``setup`` of a linen module) assigns to ``self.<attr>``,
    when no other method assigns it."""
    values = list(info.setup_attrs.get(attr, ()))
    if not values:
        return []
    init = info.methods.get("setup" if info.module_kind == "linen" else "__init__")
    for other in info.methods.values():
        if other is init:
            continue
        selfname = other.self_name
        for node in other.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Attribute) and n.attr == attr and \
                            isinstance(n.value, ast.Name) and n.value.id == selfname:
                        return []
    return values


# arithmetic that keeps a changing loop counter changing (``step + 1``, ``2 * i``);
# ``i % 2`` and ``i // 10`` repeat values and are left alone
_STILL_CHANGING = (ast.Add, ast.Sub, ast.Mult)


def _changing_in_loop(ctx: Context, a: ast.expr, scope: Function, call: ast.Call) -> Optional[ast.AST]:
    """The loop around ``call`` in ``scope`` whose every iteration gives ``a`` a new value:
    ``a`` is (arithmetic on) the counter of a ``for ... in range(n)`` / ``enumerate(...)``
    loop, or a name the loop body increments (``step += 1``).  A ``range`` with a literal
    bound below the unrolled-loop threshold (a few specialised programs, on purpose) is
    not reported."""
    name = _counter_name(a)
    if name is None:
        return None
    pos = (call.lineno, call.col_offset)
    best = None
    for loop in scope.of_type(ast.For, ast.AsyncFor, ast.While):
        if not loop.body:
            continue
        first, last = loop.body[0], loop.body[-1]
        if not ((first.lineno, first.col_offset) <= pos <= (last.end_lineno, last.end_col_offset)):
            continue
        if _loop_changes(ctx, loop, name, scope) and (best is None or loop.lineno > best.lineno):
            best = loop
    return best


def _counter_name(a: ast.expr) -> Optional[str]:
    """``step``, ``step + 1``, ``2 * i``: the counter whose value the expression follows."""
    if isinstance(a, ast.Name):
        return a.id
    if isinstance(a, ast.BinOp) and isinstance(a.op, _STILL_CHANGING):
        for var, const in ((a.left, a.right), (a.right, a.left)):
            if isinstance(var, ast.Name) and isinstance(const, ast.Constant) and \
                    isinstance(const.value, (int, float)) and not isinstance(const.value, bool):
                if isinstance(a.op, ast.Mult) and const.value == 0:
                    return None
                if isinstance(a.op, ast.Sub) and var is a.right:
                    return var.id   # n - i still changes with i
                return var.id
    return None


# a loop that runs training steps, epochs or batches: its counter takes a new value on
# every call, forever.  A loop over layers or stages (``for i in range(num_layers)``)
# compiles a few programs once and reuses them: it is left alone.
_STEP_LOOP = re.compile(r"step|epoch|iter|batch|loader|data|episode|round|update|sample|^t$|^it$", re.I)


# a counter named for the steps of training (``epoch``, ``step``, ``it``): a literal bound below
# the threshold is a short demo run, a program per step all the same
_EPOCH_COUNTER = re.compile(r"^(epoch|epochs|step|steps|it|iter|iteration|global_step|ep|n_iter)$", re.I)


def _names_in(node: ast.AST) -> List[str]:
    return [n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))]


def _loop_changes(ctx: Context, loop: ast.AST, name: str, scope: Function) -> bool:
    m = ctx.model
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it, tgt = loop.iter, loop.target
        if not any(_STEP_LOOP.search(n) for n in _names_in(it) + _names_in(tgt)):
            return False
        q = m.qualname(it.func, scope) if isinstance(it, ast.Call) else None
        if q == "range" and isinstance(tgt, ast.Name) and tgt.id == name:
            bounds = [SemanticModel.literal_ints(x) for x in it.args]
            if bounds and all(b is not None and len(b) == 1 for b in bounds):
                n = len(range(*[b[0] for b in bounds]))
                if n < ctx.settings.unrolled_loop_threshold and not _EPOCH_COUNTER.search(name):
                    return False   # (``for epoch in range(5)``: a demo's short training run still is one)
            return True
        if q == "enumerate" and isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 and \
                isinstance(tgt.elts[0], ast.Name) and tgt.elts[0].id == name:
            return True
        if isinstance(tgt, ast.Name) and tgt.id == name and _iterates_range(m, it, scope):
            return True   # ``for epoch in schedule`` whose class iterates a ``range``
    elif not any(_STEP_LOOP.search(n) for n in _names_in(loop.test) + [name]):
        return False
    # a counter the body increments: ``step += 1`` (and nothing else binds it in the loop)
    inc = False
    for node in ast.walk(loop):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            if not isinstance(node.op, (ast.Add, ast.Sub)) or not (
                    isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)
                    and node.value.value != 0):
                return False
            inc = True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                v = node.value
                if len(targets) == 1 and isinstance(targets[0], ast.Name) and isinstance(v, ast.BinOp) and \
                        isinstance(v.op, (ast.Add, ast.Sub)) and isinstance(v.left, ast.Name) and \
                        v.left.id == name and isinstance(v.right, ast.Constant) and \
                        isinstance(v.right.value, int) and v.right.value != 0:
                    inc = True   # step = step + 1
                    continue
                return False
    return inc


def _iterates_range(m: SemanticModel, it: ast.expr, scope: Function) -> bool:
    """``it`` is an object of a plain class of this module (made here: ``schedule =
    Schedule(5)``, or ``for epoch in Schedule(5)``) whose ``__iter__`` hands out the integers of a ``range`` -- ``return
    iter(range(...))``, ``yield from range(...)`` --: a loop over it counts like one over the
    range (Python's iteration protocol)."""
    if isinstance(it, ast.Call):
        info = constructed_class(m, it, scope)      # ``for epoch in Schedule(5)``
    elif isinstance(it, ast.Name) and it.id in scope.locals:
        info = instance_class(m, it, scope)
    else:
        return False
    meth = info.methods.get("__iter__") if info is not None else None
    if meth is None:
        return False
    body = [st for st in meth.node.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(body) != 1:
        return False
    v = body[0].value if isinstance(body[0], ast.Return) else \
        body[0].value.value if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.YieldFrom) else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "iter" and len(v.args) == 1:
        v = v.args[0]
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "range" \
        and m.qualname(v.func, meth) == "range"


def _wrapped_below(m: SemanticModel, site, fn) -> bool:
    """The transform decorates ``fn`` above a decorator that is no transform: what it receives
    is that decorator's result, not ``fn``."""
    if not site.is_decorator or fn.is_lambda:
        return False
    decs = getattr(fn.node, "decorator_list", [])
    at = next((i for i, d in enumerate(decs) if d is site.node), None)
    if at is None:
        return False
    for d in decs[at + 1:]:
        e = d.func if isinstance(d, ast.Call) else d
        q = m.qualname(e, fn.parent) if isinstance(e, (ast.Name, ast.Attribute)) else None
        if q in K.PARTIAL and isinstance(d, ast.Call) and d.args:
            q = m.qualname(d.args[0], fn.parent) if isinstance(d.args[0], (ast.Name, ast.Attribute)) else None
        if q is None or K.transform_for(q) is None:
            return True
    return False


# ----------------------------------------------------------------- values derived in a loop
# A static argument whose value the loop recomputes: from the counter (``temp = t0 * 0.95 **
# epoch``), from its own previous value (``lr = lr * decay``), or from each batch (``max_len =
# max(len(s) for s in batch)``).  Where every number is a literal and the loop is a literal
# ``range``, the values are computed and the programs counted; otherwise only arithmetic that
# keeps changing (+, -, *, /, ** on non-literal operands, max/min clamps) is reported.
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_EVAL_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b, ast.FloorDiv: lambda a, b: a // b,
             ast.Mod: lambda a, b: a % b}
_EVAL_CALLS = {"max": max, "min": min, "abs": abs, "float": float, "int": int, "round": round}
# reductions over a batch: each batch's maximum (or minimum) length
_REDUCTIONS = frozenset({"max", "min"})
_MAX_SIMULATED = 100_000
# fewer distinct values than this are a few specialised programs (a two-stage schedule, a
# warm-up flag), often on purpose, as ``step % 2`` is
_FEW_PROGRAMS = 3
# iterations simulated for a loop of unknown length whose arithmetic is all literal
_PROXY_ITERATIONS = 10_000


class _Unknown(Exception):
    pass


def _enclosing_loops(scope: Function, call: ast.Call) -> List[ast.stmt]:
    """The loops of ``scope`` whose body holds ``call``, innermost first."""
    pos = (call.lineno, call.col_offset)
    out = []
    for loop in scope.of_type(ast.For, ast.AsyncFor, ast.While):
        if not loop.body:
            continue
        first, last = loop.body[0], loop.body[-1]
        if (first.lineno, first.col_offset) <= pos <= (last.end_lineno, last.end_col_offset):
            out.append(loop)
    return sorted(out, key=lambda lp: -lp.lineno)


def _inside(loop: ast.stmt, node: ast.AST) -> bool:
    node = getattr(node, "_jaxlint_stmt", node)     # an element of an unpacking: its statement
    return any(n is node for stmt in loop.body for n in ast.walk(stmt))


def _unpacked_element(target: ast.expr, value: ast.expr, name: str) -> Optional[ast.expr]:
    """The element of the tuple/list display ``value`` that the flat unpacking ``target``
    binds to ``name`` (``a, b = 1.0, 2.0``); None for anything else."""
    if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, (ast.Tuple, ast.List)) or \
            len(target.elts) != len(value.elts) or \
            any(isinstance(x, ast.Starred) for x in list(target.elts) + list(value.elts)):
        return None
    hits = [v for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name) and t.id == name]
    if len(hits) != 1 or any(not isinstance(t, ast.Name) and any(isinstance(n, ast.Name) and n.id == name
                                                                 for n in ast.walk(t)) for t in target.elts):
        return None
    return hits[0]


def _bindings(scope: Function, name: str) -> Optional[List[ast.stmt]]:
    """The statements of ``scope`` binding ``name`` by ``name = v``, ``name op= v`` or
    ``name: T = v``; None when anything else binds it (a loop target, an unpacking, ``with``,
    a parameter, ``global``)."""
    if name in scope.param_nodes or name in scope.globals_declared:
        return None
    out = []
    for node in ast.walk(scope.node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and \
                node is not scope.node:
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    out.append(node)
                elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                    elt = _unpacked_element(t, node.value, name)
                    if elt is None:
                        return None
                    # ``temperature, decay = 2.0, 0.9``: one plain binding of the element, standing
                    # at the statement's place
                    one = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=elt)
                    ast.copy_location(one, node)
                    one.end_lineno, one.end_col_offset = node.end_lineno, node.end_col_offset
                    one._jaxlint_stmt = node
                    out.append(one)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                if node.value is None:
                    return None
                out.append(node)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem, ast.NamedExpr)):
            t = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            if t is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                return None
    return out


def _bound_value(node: ast.stmt) -> ast.expr:
    if isinstance(node, ast.AugAssign):
        return ast.BinOp(left=node.target, op=node.op, right=node.value)
    return node.value


def _key(e: ast.expr) -> Optional[str]:
    """What a loop's value is followed by: a name, or ``self.attr`` (``obj.attr`` of a name)."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return f"{e.value.id}.{e.attr}"
    return None


def _attribute_bindings(scope: Function, key: str) -> Optional[List[ast.stmt]]:
    """The statements of ``scope`` assigning the attribute ``key`` (``self.temperature = ...``,
    ``self.temperature *= 0.9``); None when it is also bound inside an unpacked target."""
    out = []
    for node in scope.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if _key(t) == key and isinstance(t, ast.Attribute):
                if node.value is None:
                    return None
                out.append(node)
            elif any(isinstance(n, ast.Attribute) and _key(n) == key for n in ast.walk(t)):
                return None
    return out


def _loop_targets(loop: ast.stmt) -> Set[str]:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return set()


def _range_values(loop: ast.stmt, scope: Function, m: SemanticModel) -> Optional[range]:
    """The literal ``range`` a ``for`` loop runs over (through literal module constants)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call) or \
            m.qualname(loop.iter.func, scope) != "range" or loop.iter.keywords or not loop.iter.args:
        return None
    try:
        bounds = [_evaluate(x, _defaults_kept(m, scope), scope) for x in loop.iter.args]
    except _Unknown:
        return None
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) or len(bounds) > 3:
        return None
    try:
        return range(*bounds)
    except ValueError:
        return None


def _defaults_kept(m: SemanticModel, scope: Function) -> Dict[str, object]:
    """``def train(epochs=5)`` that every call of this module (at least one) calls without
    ``epochs``: ``{"epochs": 5}`` -- the literal numeric defaults the function runs with."""
    if scope.is_module or scope.is_lambda or not scope.defaults:
        return {}
    calls = _calls_of(m, scope)
    if not calls:
        return {}
    out: Dict[str, object] = {}
    for p, d in scope.defaults.items():
        if not (isinstance(d, ast.Constant) and isinstance(d.value, int) and not isinstance(d.value, bool)):
            continue
        if any(b.kind != "param" for b in m.bindings(p, scope)):
            continue    # ``epochs = epochs * 50`` in the body: not the default any more
        if all(p not in {q for q, _ in m.bind_arguments(target, call)[0]} for call, _, target in calls):
            out[p] = d.value
    return out


def _literal_iterations(loop: ast.stmt, scope: Function, m: SemanticModel) -> Optional[int]:
    r = _range_values(loop, scope, m)
    return len(r) if r is not None else None


def _constant(name: str, scope: Function) -> object:
    """The literal number a name bound once, by a plain assignment, holds (seen from ``scope``)."""
    values = _local_values(scope, name)
    if len(values) != 1:
        raise _Unknown
    v = values[0]
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
        v = v.operand
        if isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
            return -v.value
    if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return v.value
    raise _Unknown


def _evaluate(e: ast.expr, env: Dict[str, object], scope: Function) -> object:
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.Name):
        if e.id in env:
            return env[e.id]
        return _constant(e.id, scope)
    if isinstance(e, ast.Attribute) and _key(e) in env:
        return env[_key(e)]
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return -_evaluate(e.operand, env, scope)
    if isinstance(e, ast.BinOp) and type(e.op) in _EVAL_OPS:
        a, b = _evaluate(e.left, env, scope), _evaluate(e.right, env, scope)
        try:
            got = _EVAL_OPS[type(e.op)](a, b)
        except (ArithmeticError, ValueError):
            raise _Unknown
        if isinstance(got, complex) or (isinstance(got, float) and got != got):
            raise _Unknown
        return got
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in _EVAL_CALLS and \
            not e.keywords and e.args and not any(isinstance(a, ast.Starred) for a in e.args):
        args = [_evaluate(a, env, scope) for a in e.args]
        try:
            return _EVAL_CALLS[e.func.id](*args)
        except (ArithmeticError, ValueError, TypeError):
            raise _Unknown
    math_fn = _math_name(e.func) if isinstance(e, ast.Call) else None
    if math_fn in _EVAL_MATH and len(e.args) == 1 and not e.keywords:
        # ``np.cos(np.pi * step / total)`` of a cosine schedule: the same number NumPy computes
        try:
            return float(_EVAL_MATH[math_fn](_evaluate(e.args[0], env, scope)))
        except (ArithmeticError, ValueError, TypeError):
            raise _Unknown
    if isinstance(e, ast.Attribute) and _math_name(e) in _MATH_CONSTANTS:
        return _MATH_CONSTANTS[_math_name(e)]
    raise _Unknown


# the elementwise functions and constants of ``math``/``numpy`` a schedule writes on Python
# numbers (``np.cos(np.pi * step / total)``), by the name after the module
_EVAL_MATH = {"cos": _math.cos, "sin": _math.sin, "exp": _math.exp, "log": _math.log, "sqrt": _math.sqrt,
              "tanh": _math.tanh}
_MATH_CONSTANTS = {"pi": _math.pi, "e": _math.e}


def _math_name(f: ast.AST) -> Optional[str]:
    """``cos`` of ``np.cos``/``numpy.cos``/``math.cos``/``jnp.cos``; None for anything else."""
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy", "math", "jnp"):
        return f.attr
    return None


def _keeps_changing(e: ast.expr, var: str) -> bool:
    """``e`` is built from ``var`` by arithmetic that gives a new value for a new ``var``:
    +, -, *, / and ** with other operands that are not literal zeros or ones where that would
    cancel ``var``, and ``max``/``min`` clamps of such an expression."""
    if isinstance(e, (ast.Name, ast.Attribute)):
        return _key(e) == var
    if isinstance(e, ast.BinOp) and isinstance(e.op, _ARITH):
        left = _keeps_changing(e.left, var)
        right = _keeps_changing(e.right, var)
        if left == right:
            return False    # var on both sides (or neither): not followed
        other = e.right if left else e.left
        if any(isinstance(n, (ast.Name, ast.Attribute)) and _key(n) == var for n in ast.walk(other)):
            return False
        if isinstance(other, ast.Constant):
            c = other.value
            if not isinstance(c, (int, float)) or isinstance(c, bool):
                return False
            # an operand that cancels ``var`` (x * 0, 0 ** x, 1 ** x) or leaves it as it is
            # (x * 1, x + 0, x / 1, x ** 1): no new value from this step
            if isinstance(e.op, ast.Mult) and c in (0, 1):
                return False
            if isinstance(e.op, (ast.Add, ast.Sub)) and c == 0:
                return False
            if isinstance(e.op, ast.Pow) and c in (0, 1):
                return False
            if isinstance(e.op, ast.Div) and ((left and c in (0, 1)) or (right and c == 0)):
                return False
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("max", "min", "float") and \
            not e.keywords:
        changing = [a for a in e.args if _keeps_changing(a, var)]
        rest = [a for a in e.args if a not in changing]
        return len(changing) == 1 and not any(isinstance(n, (ast.Name, ast.Attribute)) and _key(n) == var
                                              for a in rest for n in ast.walk(a))
    return False


def _reduces_over(e: ast.expr, names: Set[str], m: SemanticModel, scope: Function) -> bool:
    """``e`` holds a maximum (or minimum) taken over something the loop variable ``names``
    holds: ``max(len(s) for s in batch)``, ``int(lengths.max())``, ``np.max(batch['len'])``."""
    for n in ast.walk(e):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id in _REDUCTIONS and m.qualname(f, scope) in (None, f.id):
            args = list(n.args)
        elif isinstance(f, ast.Attribute) and f.attr in _REDUCTIONS:
            q = m.qualname(f, scope)
            args = list(n.args) if q in ("numpy.max", "numpy.min", "jax.numpy.max", "jax.numpy.min",
                                         "numpy.amax", "numpy.amin") else [f.value] + list(n.args)
        else:
            continue
        if any(isinstance(x, ast.Name) and x.id in names for a in args for x in ast.walk(a)):
            return True
    return False


def _derived_change(ctx: Context, a: ast.expr, scope: Function, call: ast.Call):
    """(how it changes, the programs it builds) for a static argument the loop around ``call``
    recomputes on its iterations; None when that is not shown."""
    loops = _enclosing_loops(scope, call)
    if not loops:
        return None
    key = _key(a)
    if key is not None:
        binds = _bindings(scope, a.id) if isinstance(a, ast.Name) else _attribute_bindings(scope, key)
        if not binds:
            if not isinstance(a, ast.Name):
                return _advanced_by_method(ctx, a, scope, loops)
            return _scheduled_item(ctx, a, scope, loops) or _yielded_draw(ctx, a, scope, loops) or \
                _returned_reduction(ctx, a, scope, loops)
        for loop in loops:
            inside = [b for b in binds if _inside(loop, b)]
            if not inside:
                continue
            if len(inside) != 1:
                return None
            outside = [b for b in binds if b not in inside]
            return _classify(ctx, _bound_value(inside[0]), loop, scope, key, outside, inside[0])
        return None
    for loop in loops:
        got = _classify(ctx, a, loop, scope, None, [], None)
        if got is not None:
            return got
    return None


def _scheduled_item(ctx: Context, a: ast.Name, scope: Function, loops: List[ast.stmt]):
    """(how it changes, programs) for the item of a loop over a schedule (``for t in
    self.schedule``, ``for step, temp in enumerate(anneal(4.0, 1.0, 5))``, see :func:`_schedule`)
    whose body runs no inner loop: every iteration calls with the next value."""
    m = ctx.model
    for loop in loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        t = loop.target
        it = loop.iter
        if t.__class__ is ast.Tuple and it.__class__ is ast.Call and it.func.__class__ is ast.Name \
                and it.func.id == "enumerate" and len(t.elts) == 2:
            t = t.elts[1]
        if t.__class__ is not ast.Name or t.id != a.id:
            continue
        sched = _schedule(m, it, scope)
        if sched is None or not _stepping(loop):
            return None
        comp, n = sched
        count = f": the schedule's {n} values build {n} programs" if n is not None else " (one per value)"
        return (f"takes the next value of the schedule `{short(comp, 40)}` on every iteration of the loop at "
                f"line {loop.lineno}, one call per value", count)
    return None


def _advanced_by_method(ctx: Context, a: ast.expr, scope: Function, loops: List[ast.stmt]):
    """(how it changes, programs) for ``scaler.scale`` passed as a static argument in a loop that
    also calls a method of ``scaler`` -- an object of a plain class of this module made once here
    (``scaler = LossScaler()``) -- which rebinds ``self.scale`` from its previous value
    (``self.scale = self.scale * factor``): every iteration passes a new value."""
    m = ctx.model
    if not (isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)):
        return None
    obj, attr = a.value.id, a.attr
    info = instance_class(m, a.value, scope) if obj in scope.locals else None
    if info is None:
        return None
    for loop in loops:
        for c in ast.walk(loop):
            if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == obj):
                continue
            meth = info.methods.get(c.func.attr)
            if meth is None or meth.name in ("__init__", "setup", "__post_init__"):
                continue
            if not _step_loop(loop):
                continue
            for st in ast.walk(meth.node):
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute) \
                        and isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == meth.self_name \
                        and st.targets[0].attr == attr \
                        and _keeps_changing(st.value, f"{meth.self_name}.{attr}"):
                    return (f"is rebound from its previous value by `{obj}.{c.func.attr}()` (`{short(st, 40)}`) on "
                            f"every iteration of the loop at line {loop.lineno}", "")
    return None


def _counter_through_parameter(ctx: Context, a: ast.expr, scope: Function, call: ast.Call):
    """(how it changes, programs) for a static argument computed from a parameter ``p`` of the
    function passing it (``lr = self.base_lr * self.decay ** idx`` in ``def epoch(self, idx,
    ...)``), with no loop of its own around the call, where every call of the function in this
    module passes for ``p`` the counter of a loop around that call (``for e in range(5):
    trainer.epoch(e, ...)``): every call passes a new value."""
    m = ctx.model
    if scope.is_module or _enclosing_loops(scope, call):
        return None
    value = a
    if isinstance(a, ast.Name) and a.id not in scope.param_nodes:
        vals = _local_values(scope, a.id)
        if len(vals) != 1:
            return None
        value = vals[0]
    value = _inlined(m, value, scope)
    params = [p for p in scope.params if p != scope.self_name and _keeps_changing(value, p)]
    if len(params) != 1:
        return None
    p = params[0]
    if any(b.kind != "param" for b in m.bindings(p, scope)):
        return None
    method = scope.enclosing_method()
    if method is scope and method.cls is not None:
        calls = list(_method_calls(m, method))
        bound = 1
    else:
        calls = [(c, s) for c, s, _ in _calls_of(m, scope)]
        bound = 0
    if not calls:
        return None
    where = None
    for c, s in calls:
        pairs, _ = m.bind_arguments(CallTarget(scope, bound), c)
        arg = next((x for q, x in pairs if q == p), None)
        loop = _changing_in_loop(ctx, arg, s, c) if arg is not None else None
        if loop is None:
            return None
        where = where or (c, loop)
    c, loop = where
    return (f"is computed from `{p}`, which the call at line {c.lineno} passes the counter of the loop at "
            f"line {loop.lineno}", "")


def _changed_per_call(ctx: Context, a: ast.expr, scope: Function, call: ast.Call):
    """(how it changes, the programs it builds) for ``self.tau`` passed as a static argument by
    a method that, after the call, rebinds ``self.tau`` from its own previous value
    (``self.tau = self.tau * 0.99``), the method being run by a loop of this module on an
    object made once (``agent = Agent()`` ... ``for episode in range(100): agent.update()``):
    every call of the method passes a new value."""
    m = ctx.model
    key = _key(a)
    method = scope.enclosing_method()
    if key is None or not isinstance(a, ast.Attribute) or method is None or method is not scope or \
            method.cls is None or method.name in ("__init__", "setup", "__post_init__") or \
            a.value.id != method.self_name:
        return None
    binds = _attribute_bindings(scope, key)
    if not binds or len(binds) != 1 or _enclosing_loops(scope, call):
        return None
    upd = binds[0]
    if upd.lineno <= call.lineno or any(_inside(lp, upd) for lp in scope.of_type(ast.For, ast.While, ast.AsyncFor)):
        return None
    value = _bound_value(upd)
    if not _keeps_changing(value, key) or \
            any(isinstance(n, ast.Name) and n.id != a.value.id and n.id in scope.param_nodes
                for n in ast.walk(value)):
        return None
    # assigned elsewhere only in the constructor (its starting value)
    others = [(meth, v) for v, meth, _ in (class_self_assignments(method.cls, a.attr) or [])
              if meth is not method]
    if any(meth.name not in ("__init__", "setup", "__post_init__") for meth, _ in others):
        return None
    runner = _loop_calling_method(m, method)
    if runner is None:
        return None
    loop, caller = runner
    shown = f" (`{short(upd, 40)}`)"
    programs = ""
    rng = _range_values(loop, caller, m)
    if rng is not None and len(others) == 1 and len(rng) <= _MAX_SIMULATED:
        try:
            v = _evaluate(others[0][1], {}, others[0][0])
            values = []
            for _ in rng:
                values.append(v)
                v = _evaluate(value, {key: v}, scope)
            programs = _programs(values, rng)
            if len(set(values)) < _FEW_PROGRAMS:
                return None
        except _Unknown:
            programs = ""
    if not programs and not _step_loop(loop) and rng is None:
        return None
    return (f"is recomputed from its previous value on every call of `{method.name}`{shown}, which the loop at "
            f"line {loop.lineno} runs", programs)


def _method_calls(m: SemanticModel, method: Function) -> Iterator[tuple]:
    """(call, calling scope) for every ``obj.<method>(...)`` of this module on a name bound once to
    an instance of the method's class."""
    for fn in m.functions:
        for c in fn.of_type(ast.Call):
            f = c.func
            if isinstance(f, ast.Attribute) and f.attr == method.name and isinstance(f.value, ast.Name) \
                    and instance_class(m, f.value, fn) is method.cls:
                yield c, fn


def _loop_calling_method(m: SemanticModel, method: Function):
    """(loop, scope): a loop of this module whose body calls ``obj.<method>()`` on a name bound
    once to an instance of the method's class."""
    for c, fn in _method_calls(m, method):
        loops = _enclosing_loops(fn, c)
        if loops:
            return loops[0], fn
    return None


def _stepping(loop: ast.stmt) -> bool:
    """A loop whose every iteration is one unit of work: named for steps (``for epoch in ...``),
    or one whose body holds no loop of its own.  Asked only of values that are maxima over data
    or random draws -- never an index chosen on purpose, as a counter can be (``for i in
    range(n_layers): h = block(params, h, i)``).  A sweep runs a whole inner training loop per
    value (``for lr in (...): for step in range(1000): ...``) and reuses each program many
    times; a loop with a flat body calls the step once per value, so each value it changes
    costs one compilation per call."""
    return _step_loop(loop) or not any(
        n.__class__ in (ast.For, ast.AsyncFor, ast.While) for stmt in loop.body for n in ast.walk(stmt))


def _step_loop(loop: ast.stmt) -> bool:
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return any(_STEP_LOOP.search(n) for n in _names_in(loop.iter) + _names_in(loop.target)) \
            or _batch_range(loop)
    return any(_STEP_LOOP.search(n) for n in _names_in(loop.test))


def _batch_range(loop: ast.stmt) -> bool:
    """``for i in range(0, len(data), batch_size)``: a loop over the positions of a dataset, in
    strides (one batch per iteration)."""
    it = loop.iter
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
        and len(it.args) == 3 and isinstance(it.args[1], ast.Call) \
        and isinstance(it.args[1].func, ast.Name) and it.args[1].func.id == "len"


def _selected_by(loop: ast.stmt, counter: str) -> Set[str]:
    """Names the loop's body binds from data the counter selects (``tokens, lengths =
    pad(corpus[i:i + 8])``, ``batch = data[i]``): a new batch on every iteration."""
    seeds: Set[str] = set()
    for node in ast.walk(loop):
        if not isinstance(node, ast.Assign):
            continue
        if any(isinstance(x, ast.Subscript) and any(isinstance(n, ast.Name) and n.id == counter
                                                    for n in ast.walk(x.slice))
               for x in ast.walk(node.value)):
            for t in node.targets:
                seeds.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return derived_names(ast.walk(loop), seeds) if seeds else set()


def _classify(ctx: Context, value: ast.expr, loop: ast.stmt, scope: Function, name: Optional[str],
              outside: List[ast.stmt], binding: Optional[ast.stmt]):
    m = ctx.model
    threshold = ctx.settings.unrolled_loop_threshold
    targets = _loop_targets(loop)
    value = _inlined(m, value, scope)
    used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if name is not None and "." in name and any(_key(n) == name for n in ast.walk(value)
                                               if isinstance(n, ast.Attribute)):
        used.add(name)
    counter = m.loop_counter(loop, scope)
    where = f"the loop at line {loop.lineno}"
    shown = f" (`{short(binding, 40)}`)" if binding is not None else ""
    # names the loop rebinds, other than the counter and this name: their values are not followed
    rebound = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            rebound.add(node.id)
    rebound -= {name} if name else set()
    rng = _range_values(loop, scope, m)
    if name is not None and name in used:
        # updated from its own previous value: lr = lr * decay
        if used & rebound or not _keeps_changing(value, name):
            return None
        before = [b for b in outside if b.lineno < loop.lineno]
        init = max(before, key=lambda b: b.lineno) if before else None
        if init is None and "." not in name:
            return None     # a local: it has a value before the loop (an attribute: from __init__)
        if init is not None and not isinstance(init, (ast.Assign, ast.AnnAssign)):
            return None
        values = None
        if init is not None and rng is not None and len(rng) <= _MAX_SIMULATED:
            try:
                v = _evaluate(init.value, {}, scope)
                values = []
                for i in rng:
                    v = _evaluate(value, {name: v, **({counter: i} if counter else {})}, scope)
                    values.append(v)
            except _Unknown:
                values = None
        programs = _programs(values, rng)
        if values is not None and len(set(values)) < _FEW_PROGRAMS:
            return None
        if values is None and init is not None and rng is None and not counter:
            # a loop of unknown length: the values its first iterations would take
            try:
                v = _evaluate(init.value, {}, scope)
                proxy = []
                for _ in range(_PROXY_ITERATIONS):
                    v = _evaluate(value, {name: v}, scope)
                    proxy.append(v)
                if len(set(proxy)) < threshold:
                    return None     # it settles after a few programs (a clamp)
            except _Unknown:
                pass
        if not _step_loop(loop) and (values is None or len(set(values)) < threshold):
            return None
        return f"is recomputed from its previous value on every iteration of {where}{shown}", programs
    if counter is not None and counter in used and not (used - {counter}) & rebound:
        values = None
        if rng is not None and len(rng) <= _MAX_SIMULATED:
            try:
                values = [_evaluate(value, {counter: i}, scope) for i in rng]
            except _Unknown:
                values = None
        if values is None and not _keeps_changing(value, counter):
            return None
        if values is not None and len(set(values)) < _FEW_PROGRAMS:
            return None
        if values is None:
            # a loop of unknown length: the values its first iterations would take (a clamp such
            # as ``min(step, 3)`` settles after a few programs)
            try:
                proxy = {_evaluate(value, {counter: i}, scope) for i in range(_PROXY_ITERATIONS)}
                if len(proxy) < threshold:
                    return None
            except _Unknown:
                pass
        if not _step_loop(loop) and (values is None or len(set(values)) < threshold):
            return None
        return f"is computed from the loop counter `{counter}` of {where}{shown}", _programs(values, rng)
    items = targets - {counter} if rng is None and (counter is None or
                                                   m.qualname(loop.iter.func, scope) == "enumerate") else set()
    derived = _derived_from(loop, items) if items else set()
    # (a maximum over what each item holds -- its lengths -- is a loop over data, whatever its
    # names say, unless the items are a literal display: a few configurations on purpose)
    it = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
    if isinstance(it, ast.Name):
        it = m.single_value(it.id, m.resolve_scope(it.id, scope) or scope) or it   # ``LAYOUTS = [...]``
    over_data = _step_loop(loop) or (it is not None and not isinstance(it, (ast.List, ast.Tuple, ast.Set)))
    if derived & used and over_data and _reduces_over(value, derived, m, scope):
        item = ", ".join(f"`{t}`" for t in sorted(items))
        return (f"is a maximum taken over each {item} of {where}{shown}, so it takes a new value whenever a "
                f"batch is longer or shorter than the ones before", " (one per distinct value)")
    sched = _schedule(m, it, scope) if items and it is not None and items & used and _stepping(loop) and \
        not (used - derived - items) & rebound else None
    if sched is not None:
        comp, n = sched
        count = f": the schedule's {n} values build {n} programs" if n is not None else " (one per value)"
        return (f"takes the next value of the schedule `{short(comp, 40)}` on every iteration of {where}{shown}, "
                f"one call per value", count)
    if counter is not None:
        selected = _selected_by(loop, counter)
        if selected & used and _stepping(loop) and _reduces_over(value, selected, m, scope):
            return (f"is a maximum taken over the batch `{counter}` selects on each iteration of {where}{shown}, "
                    f"so it takes a new value whenever a batch is longer or shorter than the ones before",
                    " (one per distinct value)")
    drawn = _drawn_in(loop, m, scope)
    derived = _derived_from(loop, drawn) if drawn else set()
    if derived & used and _stepping(loop) and _reduces_over(value, derived, m, scope):
        item = ", ".join(f"`{t}`" for t in sorted(drawn & derived & used or drawn))
        return (f"is a maximum taken over {item}, drawn at random anew on every iteration of {where}{shown}, "
                f"so it takes a new value whenever the draw is longer or shorter than the ones before",
                " (one per distinct value)")
    return None


# NumPy / Python random generators: a name bound to one draws new numbers on every call
_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
                         "random.Random"})
# integer draws by their (low, high) arguments: how many values they can take is high - low
_INTEGER_DRAWS = frozenset({"integers", "randint", "randrange"})
# draws of a few values picked from a list: a few programs at most, on purpose
_PICKS = frozenset({"choice", "choices", "sample", "permutation", "shuffle", "binomial", "bernoulli"})


def _is_generator(m: SemanticModel, name: str, scope: Function, generators: Set[str] = frozenset()) -> bool:
    """``name`` is a random generator: bound once to ``np.random.default_rng(...)`` (or another
    generator constructor), or a parameter the call site fills with one (``generators``)."""
    if name in generators:
        return True
    owner = m.resolve_scope(name, scope)
    bs = m.bindings(name, owner) if owner is not None else []
    return len(bs) == 1 and bs[0].kind == "=" and isinstance(bs[0].element, ast.Call) and \
        isinstance(bs[0].element.func, (ast.Name, ast.Attribute)) and \
        m.qualname(bs[0].element.func, owner) in _GENERATORS


def _draw_call(m: SemanticModel, c: ast.AST, scope: Function, generators: Set[str] = frozenset()) -> Optional[str]:
    """The name of the draw when ``c`` is a random draw (``np.random.rand(...)``,
    ``rng.integers(3, 32)`` on a generator), else None."""
    if not isinstance(c, ast.Call) or not isinstance(c.func, (ast.Name, ast.Attribute)):
        return None
    q = m.qualname(c.func, scope)
    if q is not None and (q.startswith("numpy.random.") or q.startswith("random.")) and q not in _GENERATORS:
        return q.rpartition(".")[2]
    f = c.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and _is_generator(m, f.value.id, scope, generators):
        return f.attr
    return None


def _drawn_in(loop: ast.stmt, m: SemanticModel, scope: Function, generators: Set[str] = frozenset()) -> Set[str]:
    """Names the loop's body binds (``lengths = rng.integers(3, 32, size=4)``) from a random
    draw: a ``numpy.random``/``random`` function, or a method of a generator bound once
    (``rng = np.random.default_rng(0)``) or handed in (``generators``): new numbers on every
    iteration."""
    out: Set[str] = set()
    keys = None
    for node in ast.walk(loop):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        if any(_draw_call(m, c, scope, generators) is not None for c in ast.walk(node.value)):
            out.add(node.targets[0].id)
            continue
        if keys is None:
            # names the loop binds from ``jax.random.split``/``fold_in`` of a key: new keys on every
            # iteration when the loop also rebinds the key it splits (``key, k = split(key)``)
            keys = _keys_split_in(m, loop, scope)
        if keys and any(_jax_draw(m, c, scope) and c.args and c.args[0].__class__ is ast.Name
                        and c.args[0].id in keys for c in ast.walk(node.value) if c.__class__ is ast.Call):
            out.add(node.targets[0].id)
    return out


def _jax_draw(m: SemanticModel, c: ast.Call, scope: Function) -> bool:
    """``c`` draws numbers from a key: a ``jax.random`` function that neither makes nor derives a
    key nor only looks at one (the PRNG rules' vocabulary)."""
    q = m.qualname(c.func, scope) if c.func.__class__ in (ast.Name, ast.Attribute) else None
    return q is not None and q.startswith(RANDOM) and q not in KEY_PRODUCERS and q not in RANDOM_NON_CONSUMING


def _keys_split_in(m: SemanticModel, loop: ast.stmt, scope: Function) -> Set[str]:
    """The names ``loop`` binds from splitting (or folding into) a key that the loop itself
    rebinds from that split: a fresh key on every iteration."""
    out: Set[str] = set()
    for node in ast.walk(loop):
        if node.__class__ is not ast.Assign or node.value.__class__ is not ast.Call:
            continue
        q = m.qualname(node.value.func, scope) if node.value.func.__class__ in (ast.Name, ast.Attribute) else None
        if q not in ("jax.random.split", "jax.random.fold_in") or not node.value.args:
            continue
        src = node.value.args[0]
        names = {n.id for t in node.targets for n in ast.walk(t) if n.__class__ is ast.Name}
        if src.__class__ is ast.Name and src.id in names:
            out |= names
    return out


def _many_values(m: SemanticModel, value: ast.expr, scope: Function, generators: Set[str], threshold: int) -> bool:
    """The draw that ``value`` is (``int(rng.integers(5, PAD_TO))``, ``rng.uniform(0.5, 2.0)``)
    takes at least ``threshold`` distinct values: an integer draw over a range that wide, or a
    continuous one.  A pick from a few values (``choice``) is not."""
    draws = [(c, _draw_call(m, c, scope, generators)) for c in ast.walk(value)]
    draws = [(c, d) for c, d in draws if d is not None]
    if not draws:
        jax_draws = [c for c in ast.walk(value) if c.__class__ is ast.Call and _jax_draw(m, c, scope)]
        if len(jax_draws) != 1:
            return False
        c = jax_draws[0]
        if m.qualname(c.func, scope) != "jax.random.randint":
            return m.qualname(c.func, scope) not in ("jax.random.choice", "jax.random.permutation",
                                                    "jax.random.bernoulli", "jax.random.categorical")
        lo = c.args[2] if len(c.args) > 2 else next((k.value for k in c.keywords if k.arg == "minval"), None)
        hi = c.args[3] if len(c.args) > 3 else next((k.value for k in c.keywords if k.arg == "maxval"), None)
        try:
            low, high = _evaluate(lo, {}, scope), _evaluate(hi, {}, scope)
        except _Unknown:
            return False
        return high - low >= threshold
    if len(draws) != 1:
        return False
    c, d = draws[0]
    if d in _PICKS:
        return False
    if d in _INTEGER_DRAWS:
        if len(c.args) < 2:
            return False
        try:
            low, high = _evaluate(c.args[0], {}, scope), _evaluate(c.args[1], {}, scope)
        except _Unknown:
            return False
        return high - low >= threshold
    return True


def _returned_reduction(ctx: Context, a: ast.Name, scope: Function, loops: List[ast.stmt]):
    """``tokens, longest = collate(corpus[4 * b:4 * b + 4])`` in the loop, where ``collate``
    (a function of this module) returns, as that element, a maximum over its parameter
    (``max(len(s) for s in sentences)``) and the loop hands it a new batch on every iteration
    (a slice its counter selects, or the loop's item): a new value whenever a batch is longer
    or shorter than the ones before."""
    m = ctx.model
    for loop in loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        counter = m.loop_counter(loop, scope)
        items = _loop_targets(loop) - ({counter} if counter else set())
        for node in (x for st in loop.body for x in ast.walk(st)):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                    isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Call) and
                    isinstance(node.value.func, (ast.Name, ast.Attribute))):
                continue
            elts = node.targets[0].elts
            hits = [i for i, e in enumerate(elts) if isinstance(e, ast.Name) and e.id == a.id]
            if len(hits) != 1:
                continue
            pos = hits[0]
            target = m.resolve_callable(node.value.func, scope)
            if target is None or target.transforms:
                return None
            g = target.function
            rets = [r.value for r in g.of_type(ast.Return) if r.value is not None]
            if not rets or not all(isinstance(r, ast.Tuple) and len(r.elts) == len(elts) for r in rets):
                return None
            reduced = {p for p in g.params if all(_reduces_over(r.elts[pos], {p}, m, g) for r in rets)}
            pairs, _ = m.bind_arguments(target, node.value)
            for p, arg in pairs:
                if p not in reduced:
                    continue
                selected = counter is not None and any(
                    isinstance(x, ast.Subscript) and any(isinstance(n, ast.Name) and n.id == counter
                                                         for n in ast.walk(x.slice)) for x in ast.walk(arg))
                if selected or any(isinstance(n, ast.Name) and n.id in items for n in ast.walk(arg)):
                    what = f"the batch `{counter}` selects" if selected else "each item"
                    return (f"is a maximum `{g.name}` takes over {what} on each iteration of the loop at line "
                            f"{loop.lineno} (`{short(node, 40)}`), so it takes a new value whenever a batch is "
                            f"longer or shorter than the ones before", " (one per distinct value)")
            return None
    return None


def _yielded_draw(ctx: Context, a: ast.Name, scope: Function, loops: List[ast.stmt]):
    """``for tokens, labels, max_len in batches(rng, 5)``, where ``batches`` is a generator of
    this module yielding, as that element, a value it draws at random on every iteration of its
    own loop (``length = int(rng.integers(5, PAD_TO))``): a new value on every iteration."""
    m = ctx.model
    for loop in loops:
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call) or \
                not isinstance(loop.iter.func, (ast.Name, ast.Attribute)):
            continue
        t = loop.target
        it = loop.iter
        if it.func.__class__ is ast.Name and it.func.id == "enumerate" and it.args and \
                it.args[0].__class__ is ast.Call and it.args[0].func.__class__ in (ast.Name, ast.Attribute) \
                and isinstance(t, ast.Tuple) and len(t.elts) == 2:
            t, it = t.elts[1], it.args[0]    # ``for step, (tokens, max_len) in enumerate(batches(...))``
        if isinstance(t, ast.Name):
            pos = None if t.id == a.id else -1
        elif isinstance(t, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in t.elts):
            hits = [i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == a.id]
            pos = hits[0] if len(hits) == 1 else -1
        else:
            pos = -1
        if pos == -1:
            continue
        target = m.resolve_callable(it.func, scope)
        if target is None or target.transforms:
            return None
        g = target.function
        yields = [y for y in g.of_type(ast.Yield)]
        if not yields or g.of_type(ast.YieldFrom):
            return None
        pairs, _ = m.bind_arguments(target, it)
        generators = {p for p, arg in pairs if isinstance(arg, ast.Name) and _is_generator(m, arg.id, scope)}
        for y in yields:
            elt = y.value
            if pos is not None:
                if not isinstance(elt, ast.Tuple) or len(elt.elts) <= pos:
                    return None
                elt = elt.elts[pos]
            own = [lp for lp in g.of_type(ast.For, ast.While) if _inside(lp, y)]
            if not own:
                return None     # yielded once: one value
            drawn = set()
            for lp in own:
                drawn |= _drawn_in(lp, m, g, generators)
            names = {n.id for n in ast.walk(elt) if isinstance(n, ast.Name)}
            if not names & drawn:
                return None
            sources = [b for lp in own for b in ast.walk(lp) if isinstance(b, ast.Assign) and len(b.targets) == 1
                       and isinstance(b.targets[0], ast.Name) and b.targets[0].id in names & drawn]
            if len(sources) != 1 or not _many_values(m, sources[0].value, g, generators,
                                                     ctx.settings.unrolled_loop_threshold):
                return None
        shown = f" (`{short(sources[0], 40)}`)"
        return (f"is drawn at random anew by `{g.name}` for every item it yields{shown}, a new value on every "
                f"iteration of the loop at line {loop.lineno}", " (one per distinct value)")
    return None


class _Substitute(ast.NodeTransformer):
    def __init__(self, mapping: Dict[str, ast.expr], attrs: Optional[Dict[str, ast.expr]] = None,
                 self_name: Optional[str] = None):
        self.mapping = mapping
        self.attrs = attrs or {}
        self.self_name = self_name

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.mapping.get(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.self_name and node.attr in self.attrs:
            return self.attrs[node.attr]
        return self.generic_visit(node)


def _constructed_attrs(m: SemanticModel, func: ast.expr, scope: Function) -> Dict[str, ast.expr]:
    """``schedule = Schedule(0.5, 0.8)`` and ``def __init__(self, base_lr, decay): self.base_lr,
    self.decay = base_lr, decay``: ``{"base_lr": 0.5, "decay": 0.8}`` -- what the one
    construction of the instance ``func`` names gives each attribute ``__init__`` sets from a
    parameter (a literal default too); {} when not shown."""
    if not isinstance(func, ast.Name):
        return {}
    info = m.instance_class(func, scope)
    home = m.resolve_scope(func.id, scope)
    made = m.single_value(func.id, home) if home is not None else None
    init = info.methods.get("__init__") if info is not None else None
    if init is None or not isinstance(made, ast.Call) or any(isinstance(a, ast.Starred) for a in made.args):
        return {}
    params = init.params[1:]
    given: Dict[str, ast.expr] = dict(zip(params, made.args))
    given.update({k.arg: k.value for k in made.keywords if k.arg is not None})
    for p in params:
        if p not in given and isinstance(init.defaults, dict) and init.defaults.get(p) is not None:
            given[p] = init.defaults[p]
    out: Dict[str, ast.expr] = {}
    for a in init.of_type(ast.Assign):
        if len(a.targets) != 1:
            continue
        t, v = a.targets[0], a.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and \
            len(t.elts) == len(v.elts) else [(t, v)]
        for tt, vv in pairs:
            if isinstance(tt, ast.Attribute) and isinstance(tt.value, ast.Name) and tt.value.id == init.self_name \
                    and isinstance(vv, ast.Name) and vv.id in given:
                out[tt.attr] = given[vv.id]
    return out


def _inlined(m: SemanticModel, value: ast.expr, scope: Function) -> ast.expr:
    """``schedule(epoch)`` where ``schedule`` is a function of this module whose body is one
    ``return <expr>``: that expression with the arguments in place of the parameters (so a
    schedule written as a helper is followed like one written inline); also inside a scalar
    conversion, ``float(schedule(epoch))``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("float", "int") and \
            len(value.args) == 1 and not value.keywords:
        inner = _inlined(m, value.args[0], scope)
        if inner is not value.args[0]:
            return ast.Call(func=value.func, args=[inner], keywords=[])
        return value
    if not isinstance(value, ast.Call) or any(kw.arg is None for kw in value.keywords) or \
            any(isinstance(a, ast.Starred) for a in value.args):
        return value
    method = scope.enclosing_method()
    if isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name) and method is not None \
            and method.cls is not None and value.func.value.id == method.self_name:
        # ``self.current_lr(epoch)`` in a method: the class's own helper, ``self`` the same object
        g = method.cls.methods.get(value.func.attr)
        if g is None or g.is_staticmethod or g.self_name is None or g.decorators:
            return value
        body = _single_return(g)
        params = g.params[1:]
        mapping = _argument_mapping(value, g, params)
        if body is None or mapping is None:
            return value
        import copy
        mapping[g.self_name] = ast.Name(id=method.self_name, ctx=ast.Load())
        return _Substitute(mapping).visit(copy.deepcopy(body))
    if not isinstance(value.func, ast.Name):
        return value
    target = m.resolve_callable(value.func, scope)
    if target is None or target.transforms:
        return value
    g = target.function
    # (``schedule(epoch)`` with ``schedule = Schedule(0.5, 0.8)``: its ``__call__``, ``self`` bound)
    if target.bound_positional and not (target.bound_positional == 1 and g.name == "__call__"):
        return value
    body = _single_return(g)
    mapping = _argument_mapping(value, g, g.params[target.bound_positional:])   # (``anneal(t, total=n)``)
    if body is None or mapping is None:
        return value
    import copy
    attrs = _constructed_attrs(m, value.func, scope) if target.bound_positional else {}
    return _Substitute(mapping, attrs, g.self_name).visit(copy.deepcopy(body))


def _single_return(g: Function) -> Optional[ast.expr]:
    """The expression of a function whose body (docstring aside) is one ``return <expr>``."""
    if g.is_lambda:
        return g.node.body
    stmts = [st for st in g.node.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Return) or stmts[0].value is None:
        return None
    return stmts[0].value


def _argument_mapping(call: ast.Call, g: Function, params: List[str]) -> Optional[Dict[str, ast.expr]]:
    """Each of ``params`` with what ``call`` passes for it (or its default); None when that is not
    shown (``*args``, a keyword-only parameter, a missing argument without a default)."""
    if g.vararg or g.kwonly or len(call.args) > len(params):
        return None
    mapping: Dict[str, ast.expr] = dict(zip(params, call.args))
    for kw in call.keywords:
        if kw.arg not in params or kw.arg in mapping:
            return None
        mapping[kw.arg] = kw.value
    for p in params:
        if p not in mapping:
            d = g.defaults.get(p) if isinstance(g.defaults, dict) else None
            if d is None:
                return None
            mapping[p] = d
    return mapping


def _schedule(m: SemanticModel, it: ast.expr, scope: Function, depth: int = 0,
              env: Optional[Dict[str, ast.expr]] = None):
    """``(comprehension, length)`` when the loop's iterable is a schedule: a list built by a
    comprehension over ``range(...)`` whose element changes with the counter (``[t0 * (t1 / t0) **
    (i / (n - 1)) for i in range(n)]``), held by a name bound once, by ``self.<attr>`` stored once,
    or returned by a function of the module (``anneal(4.0, 1.0, 5)``; through ``enumerate``/
    ``list``/``tuple``).  Its values are distinct on purpose -- an annealed temperature, a decayed
    rate --, not a few configurations (a literal display is never one)."""
    if it is None or depth > 4:
        return None
    if it.__class__ is ast.Call and it.func.__class__ is ast.Name and it.func.id in ("enumerate", "list", "tuple") \
            and it.args:
        return _schedule(m, it.args[0], scope, depth + 1)
    if it.__class__ is ast.Name:
        home = m.resolve_scope(it.id, scope) or scope
        v = m.single_value(it.id, home)
        return _schedule(m, v[0] if isinstance(v, tuple) else v, home, depth + 1) if v is not None else None
    if it.__class__ is ast.Attribute and it.value.__class__ is ast.Name:
        owner = scope.enclosing_method()
        if owner is None or owner.cls is None or it.value.id != owner.self_name:
            return None
        stored = m.self_attr_value(owner.cls, it.attr)
        return _schedule(m, stored[0], stored[1], depth + 1) if stored is not None else None
    if it.__class__ is ast.Call:
        target = m.resolve_callable(it.func, scope) if it.func.__class__ in (ast.Name, ast.Attribute) else None
        if target is None or target.transforms:
            return None
        ret = _single_return(target.function)
        g = target.function
        mapping = _argument_mapping(it, g, [p for p in g.params if p != g.self_name]) \
            if not target.bound_positional else None
        return _schedule(m, ret, g, depth + 1, mapping) if ret is not None else None
    if it.__class__ not in (ast.ListComp, ast.GeneratorExp) or len(it.generators) != 1:
        return None
    gen = it.generators[0]
    if gen.ifs or gen.target.__class__ is not ast.Name or not (
            gen.iter.__class__ is ast.Call and gen.iter.func.__class__ is ast.Name and gen.iter.func.id == "range"):
        return None
    if not _keeps_changing(it.elt, gen.target.id):
        return None
    env = env or {}
    bounds = [SemanticModel.literal_ints(env.get(x.id, x) if x.__class__ is ast.Name else x)
              for x in gen.iter.args]
    n = len(range(*[b[0] for b in bounds])) if bounds and all(b is not None and len(b) == 1 for b in bounds) \
        else None
    if n is not None and n < _FEW_PROGRAMS:
        return None
    return it, n


def _derived_from(loop: ast.stmt, targets: Set[str]) -> Set[str]:
    """The loop's targets and the names its body binds from them (``lengths = batch["len"]``)."""
    return derived_names(ast.walk(loop), targets)

def _programs(values, rng) -> str:
    if values is None or rng is None:
        return ""
    k = len(set(values))
    if k == len(rng):
        return f": the loop's {len(rng)} iterations build {k} programs"
    return f": the loop's {len(rng)} iterations build {k} programs (one per distinct value)"
