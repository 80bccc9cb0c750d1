"""Static arguments of a transform site: what it declares static (``static_argnums``,
``static_argnames``, ``partial`` bindings), what it does not trace (``vmap``
``in_axes=None``, ``shard_map`` ``in_specs=None``, ``grad`` beyond ``argnums``) and
defaults no call passes (a part of :class:`~jaxlint.analysis.model.SemanticModel`)."""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Set

from . import knowledge as K
from .literals import literal_elements
from .scopes import CallTarget, Function

_COMMENT = re.compile(r"#[^\n]*")
# positions a transform site can speak for without knowing its callee
_MAX_ARITY = 16


class StaticArgsMixin:
    def static_spec(self, tr: K.Transform, call: Optional[ast.Call]):
        """(static positional indices, static names) declared on a transform call."""
        nums: List[int] = []
        names: List[str] = []
        if call is None:
            return nums, names
        for kw in call.keywords:
            if kw.arg in tr.static_nums_kw:
                v = self._literal_ints(kw.value)
                nums.extend(v or [])
            elif kw.arg in tr.static_names_kw:
                v = self._literal_strs(kw.value)
                names.extend(v or [])
        return nums, names

    def site_staged(self, site) -> bool:
        """Does another trace surround the transform site: it sits in traced code, or
        its call is the function of another transform but ``grad`` (``jax.jit(jax.grad(f))``,
        ``jax.vmap(jax.grad(f))``: the outer one traces every argument)?"""
        if site.scope.under_trace:
            return True
        if site.call is None:
            return False
        return any(other is not site for other in self._site_maps()[1].get(id(site.call), ()))

    def vmap_in_axes(self, tr: K.Transform, call: Optional[ast.Call]) -> Optional[ast.expr]:
        """The ``in_axes`` of a vmap-like call (keyword, or ``jax.vmap(f, (0, None))``)."""
        if call is None:
            return None
        axes = self._kw(call, "in_axes")
        if axes is None and tr.name == "jax.vmap" and len(call.args) >= 2:
            axes = call.args[1]
        return axes

    def untraced_spec(self, tr: K.Transform, call: Optional[ast.Call], staged: bool = True):
        """(positional indices, names) of the arguments the transform call does not
        trace: the declared static ones, and -- unless a staging trace surrounds the
        site (``staged``: it would trace them itself) -- those it passes through as
        they are (``jax.vmap(f, in_axes=(0, None))``, ``shard_map(f, in_specs=(P("x"),
        None))``, the arguments ``jax.grad`` does not differentiate)."""
        nums, names = self.static_spec(tr, call)
        if call is None or staged:
            return nums, names
        axes = None
        if tr.kind == "vmap":
            axes = self.vmap_in_axes(tr, call)
        elif tr.mesh_axes:
            axes = self._kw(call, "in_specs")
        elts = literal_elements(axes)
        if elts is not None:
            nums = nums + [i for i, ax in enumerate(elts) if isinstance(ax, ast.Constant) and ax.value is None]
        elif isinstance(axes, (ast.Tuple, ast.List)):
            # ``in_axes=(0, 0, *nones, None)``: after the starred part nobody can say which
            # argument is mapped -- unknown, so not traced by the transform
            head = [i for i, e in enumerate(axes.elts) if isinstance(e, ast.Starred)][0]
            nums = nums + [i for i, ax in enumerate(axes.elts[:head]) if isinstance(ax, ast.Constant)
                           and ax.value is None] + list(range(head, _MAX_ARITY))
        if tr.kind == "grad":
            # ``jax.jacrev(f)(x, hyper)``: only ``argnums`` (default 0) are differentiated;
            # the other arguments reach ``f`` as they are (the callee's arity is unknown
            # here: positions up to _MAX_ARITY)
            kw = self._kw(call, "argnums")
            argnums = [0] if kw is None else self._literal_ints(kw)
            if argnums is not None:
                nums = nums + [i for i in range(_MAX_ARITY) if i not in argnums]
        return nums, names

    def _declared_static(self, target: CallTarget, tr: K.Transform, call: Optional[ast.Call],
                         params: List[str]) -> Set[str]:
        """Parameters bound by ``partial`` or declared static on the transform call."""
        fn = target.function
        static: Set[str] = set(fn.params[:target.bound_positional]) | set(target.bound_keywords)
        nums, names = self.static_spec(tr, call)
        for i in nums:
            if -len(params) <= i < len(params):
                static.add(params[i])
        static.update(n for n in names if n in fn.param_nodes)
        if call is not None and any(
                (kw.arg in tr.static_nums_kw and self._literal_ints(kw.value) is None)
                or (kw.arg in tr.static_names_kw and self._literal_strs(kw.value) is None)
                for kw in call.keywords):
            # static_argnums=<a variable>: which parameters are static is unknown here;
            # those declared or used as Python configuration are taken to be
            static.update(p for p in params if self._is_config_param(fn, p))
        return static

    def _unpassed_defaults(self, target: CallTarget, node: ast.AST, call: Optional[ast.Call],
                           scope: Function) -> Set[str]:
        """Defaulted parameters no call of the transformed function passes: they keep
        their Python defaults.  Only when the transformed callable is a name
        (``step = jax.pmap(partial(f, ...))``, ``@jax.jit def f``) that the module
        only ever calls, every call visible: ``step(state, batch)``."""
        fn = target.function
        defaulted = [p for p in fn.defaults if p not in target.bound_keywords]
        text = getattr(self.source, "text", None)
        if not defaulted or text is None:
            return set()
        arity = _sharded_arity(call)
        if arity is not None:
            # ``jax.jit(f, in_shardings=(a, b, c))``: called with exactly those positional
            # arguments and no keywords (JAX raises otherwise), so the rest keep their defaults
            passed = fn.params[:target.bound_positional + arity]
            return {p for p in defaulted if p not in passed}
        # a lambda's defaulted parameters are the idiom that binds a value into a closure
        # (``jax.jit(lambda x, _n=n: ...)`` in a loop): when its calls are not all visible,
        # they keep their defaults
        unseen = set(defaulted) if fn.is_lambda else set()
        if node is call:
            invoked = next((c for c in scope.of_type(ast.Call) if c.func is call), None)
            if invoked is not None:
                # ``jax.vmap(f)(a, b, c)``: called at once, with these arguments only
                return self._not_passed(target, [invoked], defaulted)
            owner = next((a for a in scope.of_type(ast.Assign) if a.value is call), None)
            if owner is None or len(owner.targets) != 1 or owner.targets[0].__class__ is not ast.Name:
                return unseen
            name, home = owner.targets[0].id, scope
        else:
            name, home = fn.name, fn.parent
        calls = [c for s in self.functions for c in s.of_type(ast.Call)
                 if c.func.__class__ is ast.Name and c.func.id == name and self.resolve_scope(name, s) is home]
        # every mention of the name where it is bound is its binding or a call of it (not passed
        # on, not stored); a mention as an attribute (``jax.grad`` for a name ``grad``) is not one
        if not home.is_module and self.source is not None:
            src = self.source
            text = text[src.offset(home.node.lineno, 0):src.offset(home.node.end_lineno + 1, 0)]
        text = _COMMENT.sub("", text)
        if not calls or len(re.findall(r"(?<![\w.])%s\b" % re.escape(name), text)) != len(calls) + 1:
            return unseen
        return self._not_passed(target, calls, defaulted)

    @staticmethod
    def _not_passed(target: CallTarget, calls: List[ast.Call], defaulted: List[str]) -> Set[str]:
        """The defaulted parameters none of ``calls`` (of the transformed function) passes."""
        npos, kws = 0, set()
        for c in calls:
            if any(a.__class__ is ast.Starred for a in c.args) or any(k.arg is None for k in c.keywords):
                return set()
            npos = max(npos, len(c.args))
            kws.update(k.arg for k in c.keywords)
        params = target.function.params[target.bound_positional:]
        return {p for p in defaulted if p not in kws and not (p in params and params.index(p) < npos)}

    def _partial_names(self, scope: Function) -> Set[str]:
        """Names ``scope`` binds to a ``partial(...)`` call (``f = partial(f, flag=True)``)."""
        memo = self._memo("_partial_names_cache")
        got = memo.get(id(scope))
        if got is None:
            got = memo[id(scope)] = {
                t.id for a in scope.of_type(ast.Assign) if a.value.__class__ is ast.Call
                and self.qualname(a.value.func, scope) in K.PARTIAL for t in a.targets if t.__class__ is ast.Name}
        return got


def _sharded_arity(call: Optional[ast.Call]) -> Optional[int]:
    """The number of positional arguments a ``jit(f, in_shardings=(...))`` can be called with:
    the length of a literal ``in_shardings`` tuple -- JAX requires it to be a prefix of the
    positional arguments' tree and rejects keyword arguments when it is given."""
    if call is None:
        return None
    for kw in call.keywords:
        if kw.arg in K.SHARDED_ARITY_KEYWORDS and isinstance(kw.value, (ast.Tuple, ast.List)) \
                and not any(isinstance(e, ast.Starred) for e in kw.value.elts):
            return len(kw.value.elts)
    return None
