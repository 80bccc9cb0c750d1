from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set

from ...analysis import CONTAINER, JAX, NUMPY, CallTarget, ClassInfo, Function, SemanticModel
from ...analysis import knowledge as K
from .calls import JIT_NAMES, call_index
from ..base import Context, Finding, Rule, register

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
    call site in this module; and `@jax.jit` applied directly to a method whose
    class is not a registered pytree, so `self` is passed as an array argument.

    ## Why is this bad?
    A static argument is part of the compilation cache key: JAX hashes it and
    compiles a new program for every new value. PyTorch has no such notion,
    so it is easy to mark the wrong thing static. Arrays, lists and dicts are
    not hashable and raise `ValueError: Non-hashable static arguments are not
    supported`; a name or index that matches no parameter raises `ValueError`
    when the function is wrapped. A plain method under `@jax.jit` receives
    `self` as its first, traced argument, and JAX cannot turn an arbitrary
    object into an array: `TypeError: Error interpreting argument ... as an
    abstract array`.

    ## Example
    ```python
    @partial(jax.jit, static_argnames=("sizes",))
    def mlp(params, x, sizes):
        ...

    mlp(params, x, sizes=[128, 64])

    class Model:
        @jax.jit
        def predict(self, x):
            return x @ self.w
    ```

    ## Use instead
    ```python
    mlp(params, x, sizes=(128, 64))      # a tuple is hashable

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

    code = "JAX505"
    symbol = "bad-static-argument"
    summary = "static argument that is unhashable, names no parameter, or a jitted method whose `self` is not static"

    def check(self, ctx: Context) -> Iterator[Finding]:
        m = ctx.model
        if not m.mentions_jax:
            return
        sites = [s for s in m.transform_sites if s.transform.name in _STATIC_TRANSFORMS and s.target is not None]
        if not sites:
            return
        idx = None
        for site in sites:
            tr = site.transform
            target = site.target
            fn = target.function
            call = site.call
            static: Set[str] = set(target.bound_keywords) & set(fn.param_nodes)
            params = fn.params[target.bound_positional:]
            if call is not None:
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
            if site.is_decorator and fn.is_method and target.bound_positional == 0:
                f = self._method_self(ctx, site, fn, static)
                if f is not None:
                    yield f
            if static and tr.name in JIT_NAMES | {"jax.pmap"}:
                if idx is None:
                    idx = call_index(m)
                yield from self._call_sites(ctx, idx, site, static)

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

    def _registered(self, ctx: Context, name: str) -> bool:
        m = ctx.model
        for fn in m.functions:
            for call in fn.of_type(ast.Call):
                if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == name:
                    q = m.qualname(call.func, fn) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
                    if q in _PYTREE_REGISTRATIONS or (q is not None and "register" in q):
                        return True
        return False

    # ---------------------------------------------------------- call sites
    def _call_sites(self, ctx: Context, idx, site, static: Set[str]) -> Iterator[Finding]:
        m = ctx.model
        binding = next((b for b in idx.jit_bindings if b.site is site), None)
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
            for p, a in pairs:
                if p not in static or id(a) in starred:
                    continue
                what = self._unhashable(ctx, a, cs.scope)
                if what is None:
                    continue
                text = ast.unparse(a)
                if len(text) > 30:
                    text = text[:27] + "..."
                hint = "pass a tuple" if what in ("a list", "a set") else (
                    "pass a hashable value (a tuple of pairs, a frozen dataclass)" if what == "a dict" else
                    "make it a regular (traced) argument")
                msg = (f"`{text}` is {what} passed to static argument `{p}` of {fn.display()}: static "
                       f"arguments must be hashable (JAX raises `ValueError`); {hint}")
                yield ctx.finding(self, a, msg)

    @staticmethod
    def _unhashable(ctx: Context, a: ast.expr, scope: Function) -> Optional[str]:
        m = ctx.model
        what = _UNHASHABLE.get(type(a))
        if what is not None:
            return what
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Name):
            q = m.qualname(a.func, scope)
            if q in _UNHASHABLE_CALLS:
                return _UNHASHABLE_CALLS[q]
        if isinstance(a, ast.Name):
            values = _local_values(scope, a.id)
            if values:
                kinds = set()
                for v in values:
                    w = _UNHASHABLE.get(type(v))
                    if w is None and isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
                        w = _UNHASHABLE_CALLS.get(m.qualname(v.func, scope) or "")
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


def _local_values(scope: Function, name: str) -> List[ast.expr]:
    if name not in scope.locals or name in scope.param_nodes:
        return []
    out = []
    for a in scope.of_type(ast.Assign):
        for t in a.targets:
            if isinstance(t, ast.Name) and t.id == name:
                out.append(a.value)
            elif not isinstance(t, (ast.Attribute, ast.Subscript)) and any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                return []   # unpacked: unknown
    for a in scope.of_type(ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr, ast.withitem):
        t = getattr(a, "target", None) or getattr(a, "optional_vars", None)
        if t is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
            return []
    return out
