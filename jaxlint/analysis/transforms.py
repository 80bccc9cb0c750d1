"""Transforms: where a transform is applied (:class:`TransformSite`), which
function it traces (:meth:`TransformsMixin.resolve_callable`), which parameters
stay static, and the propagation of tracedness into callees (a part of
:class:`~jaxlint.analysis.model.SemanticModel`).

Every decorator or call that applies a transform (``knowledge.TRANSFORMS``)
marks its target with a ``certain`` :class:`TraceContext`; Flax/NNX/Equinox
module methods are seeded with ``inferred`` ones; then a fixpoint makes callees
of traced functions traced (``inferred``), a callee's parameter traced only when
some traced call site passes a traced value into it.
"""
from __future__ import annotations

import ast
import itertools
from typing import Dict, List, Optional, Set, Tuple

from . import knowledge as K
from .kinds import ARRAYISH, CONTAINER, JAX, NUMPY, TRACED, UNSURE, proven
from .literals import literal_elements, literal_ints, literal_strs
from .configparams import ConfigParamsMixin
from .customrules import CustomRulesMixin
from .staticargs import StaticArgsMixin
from .scopes import CERTAIN, INFERRED, CallTarget, Function, TraceContext, TransformSite



# module kinds whose instances are called like functions (``model(x)`` runs ``__call__``)
_CALLABLE_MODULES = frozenset({"nnx", "equinox"})
# module kinds whose instances, called inside another module's method, run ``__call__`` on the spot
# (a linen submodule inside its parent's ``apply``)
_SUBMODULE_KINDS = frozenset({"nnx", "equinox", "linen"})

class TransformsMixin(ConfigParamsMixin, StaticArgsMixin, CustomRulesMixin):
    # ===================================================== callables
    def lookup_function(self, name: str, scope: Function) -> Optional[Function]:
        """The def ``name`` resolves to from ``scope`` (``None`` when the name the
        code sees is bound by something else, or by nothing)."""
        s = self.resolve_scope(name, scope)
        return None if s is None else s.defs.get(name)

    def resolve_callable(self, expr: ast.AST, scope: Function, _depth: int = 0) -> Optional[CallTarget]:
        """Resolve an expression used as a callable to a function of this module: a
        lambda, a def or an alias of one, ``self.method``/``Class.method``,
        ``partial(f, ...)``, ``jax.jit(f)`` (nested transforms recorded outermost
        first), or the product of a local factory (``make_step(config)``)."""
        if _depth > 8 or expr is None:
            return None
        t = expr.__class__
        if t is ast.Lambda:
            fn = self.function_of_node.get(id(expr))
            return CallTarget(fn) if fn else None
        if t is ast.Name:
            seen = self.reaching_value(expr, scope) \
                if hasattr(expr, "lineno") and expr.id in self._partial_names(scope) else None
            if seen.__class__ is ast.Call and self.qualname(seen.func, scope) in K.PARTIAL:
                # ``f = partial(f, flag=True)`` just before: the bound keywords stay static
                return self.resolve_callable(seen, scope, _depth + 1)
            fn = self.lookup_function(expr.id, scope)
            if fn is not None and hasattr(expr, "lineno") and expr.id in scope.defs \
                    and len(self.bindings(expr.id, scope)) > 1:
                # ``def f_prime(x): ...`` and later ``f_prime = jax.grad(f)`` (notebook cells
                # re-running a name): the binding that reaches this use decides
                seen = self.reaching_value(expr, scope)
                if seen is not None:
                    return self.resolve_callable(seen, scope, _depth + 1)
            if fn is not None:
                return CallTarget(fn, 0)
            alias = self._alias(expr.id, scope)
            if alias is not None:
                return self.resolve_callable(alias, scope, _depth + 1)
            return self._called_instance(expr, scope)
        if t is ast.Attribute:
            return self._resolve_method(expr, scope)
        if t is ast.Call:
            return self._resolve_call_result(expr, scope, _depth)
        if t is ast.Subscript:
            # ``self.blocks[i](x)`` with ``self.blocks`` a list of one module class's instances
            info = self._element_class(expr.value, scope)
            return self._class_call(info) if info is not None else None
        return None

    def _class_call(self, info) -> Optional[CallTarget]:
        """An instance of module class ``info`` called: its ``__call__``, bound."""
        fn = self.class_method(info, "__call__")
        return CallTarget(fn, 1) if fn is not None and not fn.is_staticmethod else None

    def _element_class(self, e: ast.AST, scope: Function):
        """The module class every element of ``self.<attr>`` is an instance of, when the class's one
        store of it is a list of constructions of that class (``[Block(...) for _ in range(n)]``, or
        a local list filled with ``blocks.append(Block(...))``); None otherwise."""
        owner = scope.enclosing_method()
        if e.__class__ is not ast.Attribute or e.value.__class__ is not ast.Name or owner is None \
                or owner.cls is None or e.value.id != owner.self_name:
            return None
        stored = self.self_attr_value(owner.cls, e.attr)
        if stored is None:
            return None
        value, method = stored
        made = []
        if value.__class__ is ast.ListComp:
            made = [value.elt]
        elif value.__class__ in (ast.List, ast.Tuple):
            made = list(value.elts)
        elif value.__class__ is ast.Name:
            for c in method.of_type(ast.Call):
                f = c.func
                if f.__class__ is ast.Attribute and f.attr == "append" and f.value.__class__ is ast.Name \
                        and f.value.id == value.id and len(c.args) == 1:
                    made.append(c.args[0])
        classes = set()
        for m in made:
            if m.__class__ is not ast.Call or m.func.__class__ is not ast.Name:
                return None
            info = self.classes.get(m.func.id)
            if info is None or not info.module_kind or self.resolve_scope(m.func.id, method) is not info.scope:
                return None
            classes.add(id(info))
            found = info
        return found if len(classes) == 1 else None

    def _resolve_method(self, expr: ast.Attribute, scope: Function) -> Optional[CallTarget]:
        """``self.method`` (bound: ``self`` is passed) or ``Class.method``."""
        base = expr.value
        if base.__class__ is ast.Attribute and base.value.__class__ is ast.Name:
            # ``self.env.step(...)`` where the class sets ``self.env = GridEnv(...)`` once
            owner = scope.enclosing_method()
            if owner is None or owner.cls is None or base.value.id != owner.self_name:
                return None
            stored = self.self_attr_value(owner.cls, base.attr)
            return self._instance_method(stored[0], expr.attr, owner.cls.scope) if stored is not None else None
        if not isinstance(base, ast.Name):
            return None
        owner = scope.enclosing_method()
        if owner is not None and base.id == owner.self_name:
            fn = self.class_method(owner.cls, expr.attr)
            if fn is not None:
                return CallTarget(fn, 0 if fn.is_staticmethod else 1)
            # ``self.visual(pixels)`` with ``self.visual = Vision(...)`` stored once: its ``__call__``
            stored = self.self_attr_value(owner.cls, expr.attr) if owner.cls is not None else None
            return self._instance_method(stored[0], "__call__", owner.cls.scope, callable_modules=True) \
                if stored is not None else None
        info = self.classes.get(base.id)
        if info is not None:
            fn = self.class_method(info, expr.attr)
            if fn is not None:
                return CallTarget(fn, 0)
            return None
        # ``env = GridEnv(...)`` ... ``env.step(key, state, action)``: a name bound once to an
        # instance of a class of this module calls that class's method (``env`` is passed)
        home = self.resolve_scope(base.id, scope)
        made = self.single_value(base.id, home) if home is not None else None
        return self._instance_method(made, expr.attr, home) if made is not None else None

    def _instance_method(self, made: ast.AST, attr: str, home: Function,
                         callable_modules: bool = False) -> Optional[CallTarget]:
        """The method ``attr`` of the instance ``made`` builds (``GridEnv(...)``, a plain class
        of this module seen from ``home``), bound; None otherwise.  With ``callable_modules``
        also an NNX or Equinox module's (called like a function, ``__call__`` runs on the spot;
        a linen module runs only through ``init``/``apply``)."""
        if made.__class__ is not ast.Call or made.func.__class__ is not ast.Name:
            return None
        info = self.classes.get(made.func.id)
        if info is None or self.resolve_scope(made.func.id, home) is not info.scope:
            return None
        if info.module_kind and not (callable_modules and info.module_kind in _SUBMODULE_KINDS):
            return None
        fn = self.class_method(info, attr)
        if fn is None or fn.is_staticmethod:
            return None
        return CallTarget(fn, 1)

    def _called_instance(self, expr: ast.Name, scope: Function) -> Optional[CallTarget]:
        """``model(x)`` on an instance of an NNX/Equinox module class of this module: the class's
        ``__call__``, bound -- the instance bound once in reach (``model = Model(...)``), or a
        parameter annotated with the class (``def forward(model: Model, ids)``)."""
        home = self.resolve_scope(expr.id, scope)
        if home is None:
            return None
        loop = next((b for b in self.bindings(expr.id, home) if b.kind == "for"), None)
        if loop is not None and len(self.bindings(expr.id, home)) == 1:
            # ``for block in self.blocks: x = block(x)``
            it = loop.value
            if loop.path == () and it is not None:
                info = self._element_class(it, home)
                return self._class_call(info) if info is not None else None
            return None
        if expr.id in home.param_nodes:
            ann = home.param_nodes[expr.id].annotation
            if ann.__class__ is not ast.Name:
                return None
            return self._instance_method(ast.Call(func=ann, args=[], keywords=[]), "__call__", home.parent or home,
                                         callable_modules=True) if home.parent is not None else None
        made = self.single_value(expr.id, home)
        return self._instance_method(made, "__call__", home, callable_modules=True) if made is not None else None

    def self_attr_value(self, cls, attr: str) -> Optional[Tuple[ast.expr, Function]]:
        """``(value, method)`` of the one plain ``self.<attr> = value`` the class's methods make
        (``self.env = GridEnv()`` in ``__init__``); None when it is stored more than once or never,
        or also changed another way (``self.<attr> += ...``, an annotated or unpacking store, a
        store into one of its attributes)."""
        memo = self._memo("_self_stores")
        stores = memo.get(id(cls))
        if stores is None:
            # one walk per class: attr -> [plain stores, the first one's (value, method), stored
            # another way]
            stores = memo[id(cls)] = {}
            for m in cls.methods.values():
                selfname = m.self_name
                for node in m.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
                    targets = node.targets if node.__class__ is ast.Assign else [node.target]
                    for t in targets:
                        # ``self.model, self.lr = model, lr``: element i of a same-length display
                        # is a plain store of element i
                        pairs = dict(zip(map(id, t.elts), node.value.elts)) \
                            if node.__class__ is ast.Assign and t.__class__ in (ast.Tuple, ast.List) \
                            and node.value.__class__ in (ast.Tuple, ast.List) \
                            and len(t.elts) == len(node.value.elts) \
                            and not any(e.__class__ is ast.Starred for e in t.elts + node.value.elts) else {}
                        for n in ast.walk(t):
                            if n.__class__ is ast.Attribute and n.value.__class__ is ast.Name \
                                    and n.value.id == selfname:
                                got = stores.get(n.attr)
                                if got is None:
                                    got = stores[n.attr] = [0, None, False]
                                value = node.value if n is t else pairs.get(id(n))
                                if node.__class__ is not ast.Assign or value is None:
                                    got[2] = True
                                else:
                                    got[0] += 1
                                    if got[1] is None:
                                        got[1] = (value, m)
        got = stores.get(attr)
        return got[1] if got is not None and got[0] == 1 and not got[2] else None

    def _resolve_call_result(self, expr: ast.Call, scope: Function, _depth: int) -> Optional[CallTarget]:
        """The function a call returns: ``partial(f, ...)``, ``jax.jit(f)``, ``make_step(config)``."""
        q = self.qualname(expr.func, scope)
        if q in K.PARTIAL and expr.args:
            inner = self.resolve_callable(expr.args[0], scope, _depth + 1)
            if inner is None or any(isinstance(a, ast.Starred) for a in expr.args[1:]):
                return None
            kws = frozenset(k.arg for k in expr.keywords if k.arg)
            if any(k.arg is None for k in expr.keywords):
                # partial(f, **config): every keyword-capable parameter may be bound
                fnc = inner.function
                kws = kws | frozenset(fnc.kwonly) | frozenset(p for p in fnc.params if p in fnc.defaults)
            return CallTarget(inner.function, inner.bound_positional + len(expr.args) - 1,
                              inner.bound_keywords | kws, inner.transforms)
        tr = K.transform_for(q)
        if tr is not None and tr.kind != "body":
            fun = self._transform_fun_arg(expr, tr)
            inner = None if fun is None else self.resolve_callable(fun, scope, _depth + 1)
            if inner is None:
                return None
            return CallTarget(inner.function, inner.bound_positional, inner.bound_keywords,
                              ((tr, expr),) + inner.transforms)
        if q is None and isinstance(expr.func, ast.Name):
            # ``Block(features=4)(x, rng)``: an instance of a class of this module, called
            info = self.classes.get(expr.func.id)
            if info is not None and self.resolve_scope(expr.func.id, scope) is info.scope:
                call = self.class_method(info, "__call__")
                return CallTarget(call, 1) if call is not None else None
        if q is None:
            # make_step(config): a local factory that returns one of its nested functions
            factory = self.resolve_callable(expr.func, scope, _depth + 1)
            if factory is not None:
                made = self._factory_product(factory.function)
                if made is not None:
                    return CallTarget(made)
                return self._transformed_product(factory.function, _depth)
        return None

    def _transformed_product(self, fn: Function, _depth: int) -> Optional[CallTarget]:
        """What every ``return`` of the factory ``fn`` returns when that is one transform of one
        of its nested functions (``return jax.jit(eval_fn)``): the nested function, with the
        transforms a call of the product goes through."""
        if fn.is_lambda or fn.is_module:
            return None
        made = None
        for ret in fn.of_type(ast.Return):
            v = ret.value
            if v.__class__ is not ast.Call:
                return None
            got = self.resolve_callable(v, fn, _depth + 1)
            if got is None or not got.transforms or got.function.parent is not fn or \
                    (made is not None and got.function is not made.function):
                return None
            made = got
        return made

    def module_apply(self, call: ast.Call, scope: Function) -> Optional[Tuple[CallTarget, ast.Call]]:
        """``model.apply(variables, *args, method=..., **kw)`` / ``model.init(rngs, *args)`` on an
        instance of a Flax linen module class of this module: the method it runs (``__call__``
        unless ``method=`` names another) and the call as that method sees it -- the arguments
        after the variables or keys, without apply's own keywords."""
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr in K.LINEN_RUNNERS and call.args
                and not isinstance(call.args[0], ast.Starred)):
            return None
        info = self.instance_class(f.value, scope)
        if info is None or info.module_kind != "linen":
            return None
        name = "__call__"
        for kw in call.keywords:
            if kw.arg == "method":
                v = kw.value
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    name = v.value
                elif isinstance(v, ast.Attribute):
                    name = v.attr
                else:
                    return None
        method = self.class_method(info, name)
        if method is None:
            return None
        seen = ast.Call(func=f, args=call.args[1:],
                        keywords=[k for k in call.keywords if k.arg not in K.LINEN_RUNNER_KEYWORDS])
        return CallTarget(method, 1), ast.copy_location(seen, call)

    def instance_class(self, e: ast.AST, scope: Function):
        """The class of this module ``e`` is an instance of, when a single binding says so
        (``model = MLP(...)``, here or at module level); None otherwise."""
        if not isinstance(e, ast.Name):
            return None
        home = self.resolve_scope(e.id, scope)
        if home is None:
            return None
        made = self.single_value(e.id, home)
        if isinstance(made, ast.Call) and isinstance(made.func, ast.Name):
            info = self.classes.get(made.func.id)
            if info is not None and self.resolve_scope(made.func.id, home) is info.scope:
                return info
        return None

    def _factory_product(self, fn: Function) -> Optional[Function]:
        """The nested function every ``return`` of ``fn`` returns, if there is exactly one."""
        if fn.is_lambda or fn.is_module:
            return None
        made = None
        for ret in fn.of_type(ast.Return):
            v = ret.value
            if isinstance(v, ast.Name) and v.id in fn.defs:
                cand = fn.defs[v.id]
            elif isinstance(v, ast.Lambda):
                cand = self.function_of_node.get(id(v))
            else:
                return None
            if made is not None and cand is not made:
                return None
            made = cand
        return made

    @staticmethod
    def transform_function_arg(call: Optional[ast.Call], tr: K.Transform) -> Optional[ast.expr]:
        """The (first) function argument of a transform call: ``f`` in ``jax.jit(f, ...)``."""
        if call is None:
            return None
        return TransformsMixin._transform_fun_arg(call, tr)

    def site_of_node(self, node: ast.AST) -> Optional[TransformSite]:
        """The transform site whose decorator or call is ``node`` (the last one recorded)."""
        return self._site_maps()[0].get(id(node))

    def _site_maps(self) -> Tuple[Dict[int, TransformSite], Dict[int, List[TransformSite]]]:
        """The transform sites by node, and by the call they take as their function (``jax.jit(
        jax.vmap(f))``: the jit site by the vmap call; ``grad`` sites left out).  Built once per
        model and again only when a site was added: asked per function and per trace context, a
        map rebuilt for each question made the model quadratic in its transformed functions."""
        sites = self.transform_sites
        memo = self.__dict__.get("_site_maps_memo")
        if memo is None or memo[0] != len(sites):
            by_node = {id(s.node): s for s in sites}
            by_fun: Dict[int, List[TransformSite]] = {}
            for other in sites:
                if other.call is not None and other.transform.kind != "grad":
                    arg = self.transform_function_arg(other.call, other.transform)
                    if arg is not None:
                        by_fun.setdefault(id(arg), []).append(other)
            memo = self.__dict__["_site_maps_memo"] = (len(sites), by_node, by_fun)
        return memo[1], memo[2]

    @staticmethod
    def _transform_fun_arg(call: ast.Call, tr: K.Transform) -> Optional[ast.expr]:
        if tr.fun_positions and len(call.args) > tr.fun_positions[0]:
            a = call.args[tr.fun_positions[0]]
            return None if isinstance(a, ast.Starred) else a
        for kw in call.keywords:
            if kw.arg in tr.fun_keywords:
                return kw.value
        return None

    def bind_arguments(self, target: CallTarget, call: ast.Call) -> Tuple[List[Tuple[str, ast.expr]], Set[str]]:
        """Map a call's arguments onto the target's parameters.

        Returns ``(pairs, unknown)``: ``pairs`` are (parameter, argument
        expression); ``unknown`` are parameters fed by ``*args``/``**kwargs``
        whose argument cannot be pinned down (paired with the starred value).
        """
        fn = target.function
        params = fn.params[target.bound_positional:]
        pairs: List[Tuple[str, ast.expr]] = []
        unknown: Set[str] = set()
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                rest = call.args[i + 1:]
                if rest and not fn.vararg and not any(isinstance(r, ast.Starred) for r in rest) \
                        and len(rest) <= len(params) - i and not any(p in fn.defaults for p in params[i:]):
                    # ``f(*x, n)`` with every parameter required: Python needs exactly one argument
                    # per parameter, so the trailing ones fill the last parameters
                    cut = len(params) - len(rest)
                    for p in params[i:cut]:
                        pairs.append((p, a.value))
                    pairs.extend(zip(params[cut:], rest))
                    break
                for p in params[i:]:
                    pairs.append((p, a.value))
                if fn.vararg:
                    pairs.append((fn.vararg, a.value))
                break
            if i < len(params):
                pairs.append((params[i], a))
            elif fn.vararg:
                pairs.append((fn.vararg, a))
        # ``**d`` can only fill parameters no other argument names (Python refuses a
        # duplicate), never the bound receiver
        explicit = {p for p, a in pairs if not any(a is s.value for s in call.args
                                                    if isinstance(s, ast.Starred))}
        explicit |= {kw.arg for kw in call.keywords if kw.arg is not None}
        for kw in call.keywords:
            if kw.arg is None:
                for p in params + fn.kwonly:
                    if p not in explicit:
                        pairs.append((p, kw.value))
                if fn.kwarg:
                    pairs.append((fn.kwarg, kw.value))
                continue
            if kw.arg in fn.param_nodes:
                pairs.append((kw.arg, kw.value))
            elif fn.kwarg:
                pairs.append((fn.kwarg, kw.value))
        return pairs, unknown

    # ======================================================== transforms
    def _find_transforms(self) -> None:
        # decorators
        for fn in self.functions:
            if fn.is_lambda or fn.is_module:
                continue
            if fn.decorators and self.cached_by_arguments(fn):
                # ``functools.lru_cache``: its arguments are hashed, and no JAX array or tracer
                # is hashable -- every parameter holds a Python value
                fn.static_params |= set(fn.all_params()) - {fn.self_name}
            for dec in fn.decorators:
                self._apply_decorator(dec, fn)
        # calls (anywhere, including module level and class bodies)
        for call, scope in self._transform_calls:
            q = self.qualname(call.func, scope)
            tr = K.transform_for(q)
            if tr is None:
                continue
            dead = True if self.unreachable(call) else None   # a transform no run reaches traces nothing
            for fun in self._transform_funs(call, tr):
                target = self.resolve_callable(fun, scope)
                site = TransformSite(tr, call, target, scope, False, call)
                self.transform_sites.append(site)
                if target is not None:
                    if dead is None:
                        dead = self._unused_product(call, scope)
                    if not dead:
                        self._mark(target, tr, call, call, scope)
        # custom_jvp/vjp rules: f.defjvp(rule) / f.defvjp(fwd, bwd)
        self._custom_rules()

    def binding_target(self, call: ast.Call, scope: Function) -> Optional[ast.expr]:
        """The one target a statement of ``scope`` binds the result of ``call`` to (``step =
        jax.jit(f)`` gives ``step``; ``self._fn = jax.jit(...)`` the attribute), else None."""
        memo = self.__dict__.setdefault("_assigned_calls", {})
        bound = memo.get(id(scope))
        if bound is None:
            bound = memo[id(scope)] = {id(st.value): st for st in scope.of_type(ast.Assign)
                                       if st.value.__class__ is ast.Call and len(st.targets) == 1}
        parent = bound.get(id(call))
        return None if parent is None else parent.targets[0]

    def _unused_product(self, call: ast.Call, scope: Function) -> bool:
        """The transformed function ``call`` makes is bound to a name nothing reads: a local
        name of a function never loaded there, or a private attribute (``self._compiled_fn =
        jax.jit(self._fn)``) no code of the module loads.  A transform traces only when what it
        returns is called: this one never traces its function."""
        t = self.binding_target(call, scope)
        if t is None:
            return False
        if t.__class__ is ast.Name and not scope.is_module:
            loads = self.__dict__.setdefault("_loaded_names", {})
            names = loads.get(id(scope))
            if names is None:
                names = loads[id(scope)] = {n.id for n in ast.walk(scope.node)
                                            if n.__class__ is ast.Name and n.ctx.__class__ is ast.Load}
            return t.id not in names
        if t.__class__ is ast.Attribute and t.attr.startswith("_") and not t.attr.startswith("__"):
            attrs = self.__dict__.get("_loaded_attrs")
            if attrs is None:
                attrs = self._loaded_attrs = {n.attr for n in ast.walk(self.tree)
                                              if n.__class__ is ast.Attribute and n.ctx.__class__ is ast.Load}
            return t.attr not in attrs
        return False

    def opaque_decorator(self, fn: Function) -> Optional[ast.expr]:
        """The first decorator of ``fn`` whose effect is not known here: neither a transform of the
        table, nor one of a library jaxlint knows (``K.KNOWN_LIBRARY_PREFIXES``), nor one that
        leaves the function running as written (``K.PLAIN_DECORATORS``) -- a project's own
        ``@jit_with_docstring(...)`` may compile it.  None when every decorator is known."""
        for d in fn.decorators:
            f = d.func if d.__class__ is ast.Call else d
            if f.__class__ not in (ast.Name, ast.Attribute):
                return f
            q = self.qualname(f, fn.parent or fn) or ast.unparse(f)
            if K.transform_for(q) is not None or q.startswith(K.KNOWN_LIBRARY_PREFIXES) \
                    or q in K.PLAIN_DECORATORS or q.startswith(K.PLAIN_DECORATOR_PREFIXES) \
                    or (f.__class__ is ast.Attribute and f.attr in K.PLAIN_DECORATOR_ATTRS):
                continue
            return f
        return None

    def cached_by_arguments(self, fn: Function) -> bool:
        """``fn`` is decorated with a cache keyed on its arguments (``@functools.lru_cache``,
        ``@lru_cache(maxsize=128)``, ``@functools.cache``)."""
        for dec in fn.decorators:
            f = dec.func if dec.__class__ is ast.Call else dec
            if f.__class__ in (ast.Name, ast.Attribute) and self.qualname(f, fn.parent or fn) in K.ARGUMENT_CACHES:
                return True
        return False

    def _transform_funs(self, call: ast.Call, tr: K.Transform) -> List[ast.expr]:
        out: List[ast.expr] = []
        for pos in tr.fun_positions:
            if pos < len(call.args) and not isinstance(call.args[pos], ast.Starred):
                out.append(call.args[pos])
        for pos in tr.list_positions:
            if pos < len(call.args) and isinstance(call.args[pos], (ast.List, ast.Tuple)):
                out.extend(call.args[pos].elts)
        for kw in call.keywords:
            if kw.arg in tr.fun_keywords:
                if isinstance(kw.value, (ast.List, ast.Tuple)):
                    out.extend(kw.value.elts)
                else:
                    out.append(kw.value)
        return out

    def _apply_decorator(self, dec: ast.expr, fn: Function) -> None:
        scope = fn.parent
        q = self.qualname(dec, scope)
        tr = K.transform_for(q)
        call = None
        if tr is None and isinstance(dec, ast.Call):
            dq = self.qualname(dec.func, scope)
            if dq in K.PARTIAL and dec.args:
                tr = K.transform_for(self.qualname(dec.args[0], scope))
                call = dec
            else:
                tr = K.transform_for(dq)
                call = dec if tr is not None else None
        if tr is None:
            return
        target = CallTarget(fn, 0)
        self.transform_sites.append(TransformSite(tr, dec, target, scope, True, call))
        self._mark(target, tr, dec, call, scope)

    # literal argnums/argnames (``literals.py``), also for rules that read them themselves
    _literal_ints = staticmethod(literal_ints)
    _literal_strs = staticmethod(literal_strs)
    literal_ints = staticmethod(literal_ints)
    literal_strs = staticmethod(literal_strs)

    def _mark(self, target: CallTarget, tr: K.Transform, node: ast.AST, call: Optional[ast.Call],
              scope: Function) -> None:
        """Mark ``target`` as traced by transform ``tr`` applied at ``node``."""
        fn = target.function
        params = fn.params[target.bound_positional:]
        static = self._declared_static(target, tr, call, params) | self._unpassed_defaults(target, node, call, scope)
        candidates = self._candidates(target, params, static)
        if tr.values_as_given:
            # (``custom_vjp``: no tracer of its own -- the function is traced when a caller's
            # trace calls it, its ``nondiff_argnums`` stay what the caller passes: static)
            fn.static_params |= static
            self.__dict__.setdefault("_given_values", set()).add(id(fn))
            return
        if tr.kind == "grad" and id(fn) in self.__dict__.get("_given_values", ()) and not scope.under_trace:
            return      # ``jax.grad(custom_fn)`` outside a trace: its rules get the primal values
        traced = self._traced_params(tr, call, fn, params, static, candidates, scope) - static
        ctx = TraceContext(tr.name, CERTAIN, node, self._describe_transform(tr, node, call))
        # nested transforms (jax.jit(jax.grad(f))): the outer one traces everything
        for outer, outer_call in target.transforms:
            if outer.kind in ("jit", "trace", "pmap", "body", "filter"):
                traced |= set(candidates) - static
        self._add_context(fn, ctx, traced, static)

    @staticmethod
    def _candidates(target: CallTarget, params: List[str], static: Set[str]) -> List[str]:
        """The parameters a transform may trace: not static, not an unbound method's ``self``."""
        fn = target.function
        candidates = [p for p in params + fn.kwonly if p not in static]
        if fn.vararg:
            candidates.append(fn.vararg)
        if fn.kwarg:
            candidates.append(fn.kwarg)
        selfname = fn.self_name
        if selfname is not None and target.bound_positional == 0:
            # an unbound method's ``self`` is never an array (JAX505 reports
            # a jitted method whose self is not static)
            candidates = [p for p in candidates if p != selfname]
        return candidates

    def _traced_params(self, tr: K.Transform, call: Optional[ast.Call], fn: Function, params: List[str],
                       static: Set[str], candidates: List[str], scope: Function) -> Set[str]:
        """Which parameters the transform itself traces (``argnums``, ``in_axes``, a
        filter's configuration parameters, a ``lax`` body's arity); may add to
        ``static`` the defaulted parameters a ``lax`` primitive never passes."""
        kind = tr.kind
        if kind == "grad":
            argnums = self._kw(call, "argnums") if call is not None else None
            if argnums is None:
                return set(params[:1]) - static
            idx = self._literal_ints(argnums)
            if idx is None:
                return set(candidates)
            return {params[i] for i in idx if -len(params) <= i < len(params)}
        if kind == "vmap":
            axes = self.vmap_in_axes(tr, call)
            if isinstance(axes, ast.Name):
                # ``in_axes = (None, 0, None); jax.vmap(f, in_axes=in_axes)``: its one binding here
                axes = self.single_value(axes.id, scope) or axes
            elts = literal_elements(axes)
            if elts is None and isinstance(axes, (ast.Tuple, ast.List)):
                # ``in_axes=(0, 0, *nones, None)``: the axes after a starred part pair with
                # parameters nobody can name here -- those are unknown, not mapped
                elts = list(itertools.takewhile(lambda e: not isinstance(e, ast.Starred), axes.elts))
            if elts is not None:
                return {p for p, ax in zip(params, elts)
                        if not (isinstance(ax, ast.Constant) and ax.value is None)}
            return set(candidates)
        if call is not None and tr.mesh_axes:
            # ``shard_map(f, in_specs=(P("x"), None))``: an argument whose spec is
            # ``None`` reaches the body as the Python value it was
            specs = self._kw(call, "in_specs")
            if isinstance(specs, (ast.Tuple, ast.List)) and len(specs.elts) == len(params) \
                    and not any(isinstance(e, ast.Starred) for e in specs.elts):
                return {p for p, sp in zip(params, specs.elts) if p in candidates
                        and not (isinstance(sp, ast.Constant) and sp.value is None)}
        if kind == "filter":
            return {p for p in candidates if not self._is_config_param(fn, p)}
        if kind == "trace" and tr.operands_from is not None:
            arity = self._body_arity(tr, call)
            if arity is None or any(isinstance(a, ast.Starred) for a in call.args):
                return set(candidates)
            static |= {p for p in params[arity:] if p in fn.defaults}
            return set(p for p in params[:arity] if p in candidates) - static
        if kind == "body":
            self._record_carry_init(fn, params, tr, call, scope)
            self._record_sliced_container(fn, params, tr, call)
            arity = self._body_arity(tr, call)
            if arity is None:
                return set(candidates)
            # parameters the primitive never passes keep their (static) defaults
            static |= {p for p in params[arity:] if p in fn.defaults}
            return set(params[:arity]) - static
        return set(candidates)

    # transform -> (body parameter index, call argument index of the initial carry)
    _CARRY_INIT = K.CARRY_INIT

    @staticmethod
    def _record_carry_init(fn: Function, params: List[str], tr: K.Transform, call: Optional[ast.Call],
                           scope: Function) -> None:
        spec = tr.carry_init
        if spec is None or call is None or call.keywords:
            return
        pi, ai = spec
        if pi < len(params) and ai < len(call.args) and not isinstance(call.args[ai], ast.Starred):
            fn.param_inits[params[pi]] = (call.args[ai], scope)
            if isinstance(call.args[ai], (ast.List, ast.Dict, ast.ListComp, ast.DictComp)):
                # ``lax.fori_loop(0, n, body, [a, b])``: the body gets the carry back as the
                # same Python container (a pytree of tracers) -- ``val[1] = ...`` is a list update
                p = params[pi]
                fn.param_kinds[p] = fn.param_kinds.get(p, 0) | TRACED | CONTAINER

    @staticmethod
    def _record_sliced_container(fn: Function, params: List[str], tr: K.Transform,
                                 call: Optional[ast.Call]) -> None:
        """``lax.scan(body, init, (labels, preds))``: each step's slice is the same Python
        container (a tuple of tracers), so ``pair == ignore`` compares a tuple -- a Python bool."""
        spec = K.SLICED_OPERANDS.get(tr.name)
        if spec is None or call is None:
            return
        pi, ai, kw = spec
        xs = call.args[ai] if ai < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:ai + 1]) \
            else next((k.value for k in call.keywords if k.arg == kw), None)
        if pi < len(params) and isinstance(xs, (ast.Tuple, ast.List, ast.Dict)):
            p = params[pi]
            fn.param_kinds[p] = fn.param_kinds.get(p, 0) | TRACED | CONTAINER

    @staticmethod
    def _body_arity(tr: K.Transform, call: Optional[ast.Call]) -> Optional[int]:
        if call is None:
            return None
        if tr.body_arity is not None:
            return tr.body_arity
        if tr.operands_from is None:
            return None
        if any(isinstance(a, ast.Starred) for a in call.args) or call.keywords:
            return None
        return max(0, len(call.args) - tr.operands_from)

    def decorator_sites(self, fn: Function) -> List[TransformSite]:
        """The transforms that decorate ``fn`` (``@jax.jit``, ``@partial(jax.jit, ...)``): every
        call of the name goes through them.  Built once per model (again when a site was added)."""
        sites = self.transform_sites
        memo = self.__dict__.get("_decorator_sites_memo")
        if memo is None or memo[0] != len(sites):
            by_fn: Dict[int, List[TransformSite]] = {}
            for site in sites:
                if site.is_decorator and site.target is not None:
                    by_fn.setdefault(id(site.target.function), []).append(site)
            memo = self.__dict__["_decorator_sites_memo"] = (len(sites), by_fn)
        return memo[1].get(id(fn), [])

    @staticmethod
    def _kw(call: ast.Call, name: str) -> Optional[ast.expr]:
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
        return None

    @staticmethod
    def _describe_transform(tr: K.Transform, node: ast.AST, call: Optional[ast.Call]) -> str:
        return tr.describe()

    def _add_context(self, fn: Function, ctx: TraceContext, traced: Set[str],
                     static: Optional[Set[str]] = None, proven: Set[str] = frozenset(),
                     inferred: bool = False) -> bool:
        """Add a trace context to ``fn`` with the parameters it traces and keeps static
        (``inferred``: the static ones are only inferred to be configuration).  ``proven``:
        parameters a call site fills with a proven tracer -- traced even where the model only
        inferred them to be configuration."""
        changed = False
        if not fn.contexts or (ctx.confidence == CERTAIN and fn.confidence != CERTAIN):
            changed = True
        if not any(c.node is ctx.node and c.transform == ctx.transform for c in fn.contexts):
            if fn.contexts and not ctx.transform.endswith(".Module") \
                    and all(c.transform.endswith(".Module") for c in fn.contexts):
                changed = True   # a module method now also called from here: its parameters' kinds change
            fn.contexts.append(ctx)
        if static:
            fn.static_params |= static
            if inferred:
                fn.inferred_static |= static - fn.traced_params
            else:
                fn.inferred_static -= static
        overridden = proven & fn.inferred_static
        if overridden:
            fn.static_params -= overridden
            fn.inferred_static -= overridden
        new = traced - fn.traced_params - fn.static_params
        if new:
            fn.traced_params |= new
            changed = True
        return changed

    def _seed_modules(self, called: bool = False) -> bool:
        """Seed the traced methods of the module classes: Flax linen ones (run by ``init``/
        ``apply``), or with ``called`` the NNX/Equinox ones (whose ``__call__`` runs when the
        module is called, under a transform or not) -- those only where no method of another
        module class here calls it (``self.predictor(...)``): a submodule runs as its parent's
        call says (``skip_predictor=True`` leaves it untraced), and the guess is the roots'.
        Whether any was seeded."""
        seeded = False
        submodules = self._called_submodules()
        for info in self.class_list:
            if not info.module_kind or (info.module_kind in _CALLABLE_MODULES) != called:
                continue
            for name, fn in info.methods.items():
                if fn.is_staticmethod:
                    continue
                traced_method = False
                if id(fn) in submodules:
                    continue    # a submodule's ``__call__``: its parent's calls say what it is given
                if info.module_kind == "linen":
                    if name in K.LINEN_TRACED_METHODS:
                        traced_method = True
                    elif any(self.qualname(d, fn.parent) == K.LINEN_COMPACT for d in fn.decorators):
                        traced_method = True
                elif name == "__call__":
                    traced_method = True
                if not traced_method:
                    continue
                if info.module_kind == "linen":
                    how = "a Flax linen `Module` method, traced by `init`/`apply` under a transform"
                else:
                    kind = {"nnx": "a Flax NNX", "equinox": "an Equinox"}[info.module_kind]
                    how = f"{kind} `Module` method, traced when the module is called under a transform"
                ctx = TraceContext(f"{info.module_kind}.Module", INFERRED, fn.node, how)
                params = [p for p in fn.all_params() if p != fn.self_name]
                traced = {p for p in params if not self._is_config_param(fn, p)}
                static = set(params) - traced
                self._add_context(fn, ctx, traced, static, inferred=True)
                seeded = True
        return seeded

    def _called_submodules(self) -> Set[int]:
        """The ``__call__`` methods of module classes (NNX, Equinox, linen) of this module that a
        method of another class of the same kind calls (``self.encoder(x)``, ``layer(x)``,
        ``Block(features=4)(x)``)."""
        out: Set[int] = set()
        memo = self.__dict__.get("_submodules_memo")
        if memo is not None:
            return memo
        for info in self.class_list:
            if info.module_kind not in _SUBMODULE_KINDS:
                continue
            for fn in info.methods.values():
                for inner in [fn] + [c for c in fn.children]:
                    for call in inner.of_type(ast.Call):
                        f = call.func
                        if f.__class__ not in (ast.Name, ast.Attribute, ast.Call, ast.Subscript):
                            continue     # (``Block(features=4)(x)``: a linen submodule made and called)
                        t = self.resolve_callable(f, inner)
                        g = t.function if t is not None else None
                        if g is not None and g.name == "__call__" and g.cls is not None and g.cls is not info \
                                and g.cls.module_kind == info.module_kind:
                            out.add(id(g))
        self.__dict__["_submodules_memo"] = out
        return out

    # ======================================================== propagation
    @staticmethod
    def _directly_traced(fn: Function) -> Set[str]:
        """Parameters a transform traces itself (not through a call site)."""
        if not any(c.transform != "call" for c in fn.contexts):
            return set()
        return fn.traced_params - set(fn.param_kinds)

    def _forget_values(self) -> None:
        """Drop every value kind and the caches derived from them (they are recomputed
        on demand): after contexts or parameter kinds changed."""
        for fn in self.functions:
            fn._kinds = None
        self._return_kinds.clear()
        self._stages_cache = {}
        self._primal_cache = {}
        self._untraced_lines = {}      # (narrowing.in_untraced_branch: spans read kinds)
        for memo in ("_guards_cache", "_narrowing_cache", "_untraced_spans"):
            self.__dict__.pop(memo, None)   # (guards may name another module's tracer test)

    def _gets_concrete_values(self, callee: Function, caller: Function) -> bool:
        """``callee`` adds no tracer of its own (``custom_vjp``) and ``caller`` runs only under
        differentiation applied outside any staging trace: JAX hands a custom derivative
        function the primal values -- concrete arrays -- so nothing of it is traced here."""
        given = self.__dict__.get("_given_values")
        return bool(given) and id(callee) in given and self.concrete_primal(caller)

    def _propagate(self) -> None:
        for _round in range(20):
            changed = self._reach_callees()
            changed = self._follow_custom_rules() or changed
            self._forget_values()
            for fn in list(self.functions):
                if not fn.contexts:
                    continue
                if self._propagate_from(fn):
                    changed = True
            if not changed:
                # the kinds this round computed saw the final contexts and parameter kinds:
                # they stay (the rules and the project's outgoing calls read them again)
                return
        self._forget_values()

    def _reach_callees(self) -> bool:
        """Before a round computes any value kind: every function of the module that
        traced code calls directly runs traced (its parameters still get their kinds
        from the round).  Kinds only grow, so a callee must be known as traced code
        before a caller's kinds read what it returns (``x, (hp, wp) =
        self.window_partition(x)``: ``(hp, wp)`` comes from ``x.shape``)."""
        added = False
        seen = self._memo("_reached")          # functions whose calls were scanned (rounds only add)
        todo = [fn for fn in self.functions if fn.contexts and id(fn) not in seen]
        seen.update((id(fn), True) for fn in todo)
        while todo:
            fn = todo.pop()
            for call in fn.of_type(ast.Call):
                if call.func.__class__ not in (ast.Name, ast.Attribute, ast.Subscript, ast.Call):
                    continue    # (``Block(...)(x)``: a module made and called at once)
                target = self.resolve_callable(call.func, fn)
                if target is None or target.transforms or target.function is fn:
                    continue
                callee = target.function
                if self._gets_concrete_values(callee, fn) or self._compile_time_eval(call, fn) \
                        or self.in_untraced_branch(call, fn):
                    continue     # (in ``ensure_compile_time_eval``: traced only if handed a tracer)
                if not callee.contexts:
                    self._add_context(callee, TraceContext(
                        "call", INFERRED, call, f"called from {fn.display()} (line {call.lineno})", fn), set())
                    added = True
                if id(callee) not in seen:
                    seen[id(callee)] = True
                    todo.append(callee)
        return added

    def _container_arguments(self) -> None:
        """A transformed function's parameter that every call site in the module fills
        with a Python container (``step(params, [jnp.zeros(3)])``) holds a pytree, not
        an array: JAX flattens it and rebuilds a fresh container inside the trace."""
        targets = {f.name: f for f in self.functions
                   if f.confidence == CERTAIN and not f.is_lambda and not f.is_module}
        if not targets:
            return
        names = set(targets)
        for scope in (self.module,):
            names |= {n for n, v in self._aliases_of(scope).items() if isinstance(v, ast.Call)}
        seen: Dict[int, Dict[str, List[int]]] = {}
        for scope in self.functions:
            for call in scope.of_type(ast.Call):
                f = call.func
                if f.__class__ is not ast.Name or f.id not in names:
                    continue
                target = self.resolve_callable(f, scope)
                if target is None or target.function.confidence != CERTAIN:
                    continue
                pairs, _ = self.bind_arguments(target, call)
                per = seen.setdefault(id(target.function), {})
                for p, a in pairs:
                    per.setdefault(p, []).append(self.kind(a, scope))
        changed = False
        for fn in self.functions:
            per = seen.get(id(fn))
            if not per:
                continue
            for p, ks in per.items():
                if p in fn.traced_params and ks and all(k & CONTAINER and not k & ARRAYISH for k in ks):
                    fn.param_kinds[p] = TRACED | CONTAINER
                    changed = True
        if changed:
            self._forget_values()

    @staticmethod
    def _record_params(cb: Function) -> bool:
        """Every read of the callback's parameters is a field of a record (``spec.t0``, not
        ``x.sum()`` or ``x * 2``): the leaves it handles are the objects ``is_leaf`` picks."""
        params = set(cb.param_nodes)
        parents = {}
        for n in cb.walk():
            for c in ast.iter_child_nodes(n):
                parents[id(c)] = n
        for n in cb.walk():
            if n.__class__ is ast.Name and n.id in params and n.ctx.__class__ is ast.Load:
                up = parents.get(id(n))
                if not (up.__class__ is ast.Attribute and up.value is n and up.attr not in _ARRAYISH_ATTRS
                        and not (parents.get(id(up)).__class__ is ast.Call and parents[id(up)].func is up)):
                    return False
        return True

    def _leaves_are_objects(self, call: ast.Call, fn: Function) -> bool:
        """A tree-map call whose ``is_leaf`` selects instances of a class that is not an
        array type (``lambda x: isinstance(x, SubSaveAt)``, or a function returning that)."""
        pred = next((kw.value for kw in call.keywords if kw.arg == "is_leaf"), None)
        if pred is None:
            return False
        if pred.__class__ is ast.Lambda:
            body, scope = pred.body, fn
        else:
            target = self.resolve_callable(pred, fn)
            body_stmts = getattr(target.function.node, "body", None) if target is not None else None
            if not (isinstance(body_stmts, list) and len(body_stmts) == 1
                    and body_stmts[0].__class__ is ast.Return and body_stmts[0].value is not None):
                return False
            body, scope = body_stmts[0].value, target.function
        tests = body.values if body.__class__ is ast.BoolOp and body.op.__class__ is ast.Or else [body]
        for t in tests:
            if not (t.__class__ is ast.Call and t.func.__class__ is ast.Name and t.func.id == "isinstance"
                    and len(t.args) == 2):
                return False
            types = t.args[1].elts if t.args[1].__class__ is ast.Tuple else [t.args[1]]
            for ty in types:
                if ty.__class__ not in (ast.Name, ast.Attribute):
                    return False
                q = self.qualname(ty, scope) or (ty.id if ty.__class__ is ast.Name else ty.attr)
                if q in K.ARRAY_ANNOTATIONS or q.rsplit(".", 1)[-1] in ("Array", "ndarray", "ArrayImpl", "Tracer"):
                    return False
        return True

    def _propagate_from(self, fn: Function) -> bool:
        changed = False
        for call in fn.of_type(ast.Call):
            func = call.func
            q = None
            if func.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(func, fn)
                if q is not None:
                    ho = K.HIGHER_ORDER.get(q)
                    if ho is not None and len(call.args) > ho:
                        target = self.resolve_callable(call.args[ho], fn)
                        if target is not None:
                            rest = call.args[ho + 1:]
                            params = target.function.params[target.bound_positional:]
                            if q in K.PATH_FIRST:
                                rest = [None] + list(rest)
                            if self._leaves_are_objects(call, fn) and self._record_params(target.function):
                                # ``is_leaf=lambda x: isinstance(x, SubSaveAt)``, and the callback only reads
                                # fields of what it gets: configuration records, not arrays
                                tp = set()
                            elif any(isinstance(a, ast.Starred) for a in rest):
                                traced = any(a is not None and self.kind(a, fn) & TRACED for a in rest)
                                tp = set(params) if traced else set()
                            else:
                                # the i-th callback parameter takes the leaves of the i-th tree
                                tp = {p for p, a in zip(params, rest) if a is not None and self.kind(a, fn) & TRACED}
                            static = None
                            if q in K.PATH_FIRST and params:
                                # the key path of ``tree_map_with_path(f, tree)``: static
                                static = {params[0]}
                                tp -= static
                            if self._add_context(target.function, TraceContext(
                                    "call", INFERRED, call, f"called from {fn.display()} via `{q}`", fn), tp,
                                    static):
                                changed = True
                        continue
                    if q in K.TRANSFORMS or q in K.PARTIAL:
                        continue
            target = self.resolve_callable(func, fn)
            if target is None:
                # ``model.apply(variables, x, training)``: Flax runs the module's method with the
                # arguments after the variables (the init/apply protocol)
                applied = self.module_apply(call, fn)
                if applied is None:
                    continue
                target, call = applied
            callee = target.function
            if callee is fn or self._gets_concrete_values(callee, fn) or self.in_untraced_branch(call, fn):
                continue    # (a call in a branch no trace of ``fn`` takes hands its callee nothing)
            pairs, _ = self.bind_arguments(target, call)
            traced = set()
            sure = set()
            direct = self._directly_traced(callee)
            for p, a in pairs:
                k = self.kind(a, fn)
                if proven(k) and not k & CONTAINER and a.__class__ is ast.Name and a.id in fn.traced_params \
                        and fn.confidence == CERTAIN and p not in direct:
                    # a parameter the caller's own transform traces, handed on as it is: a tracer
                    # whatever the callee's annotation says (``training: bool`` given a traced flag)
                    sure.add(p)
                if k & TRACED and (p in sure or not self._declared_config(callee, p)):
                    # a parameter declared as configuration (``reverse: bool = False``)
                    # stays static whatever a call site passes
                    traced.add(p)
                    if p not in direct:
                        old = callee.param_kinds.get(p, 0)
                        new = old | (k & (TRACED | JAX | NUMPY | CONTAINER | UNSURE))
                        if new != old:
                            callee.param_kinds[p] = new
                            changed = True
            if not traced and not sure and self._compile_time_eval(call, fn):
                continue    # ``with jax.ensure_compile_time_eval():`` runs it on concrete values
            if target.transforms:
                desc = f"called from {fn.display()}"
            else:
                desc = f"called from {fn.display()} (line {call.lineno})"
            if self._add_context(callee, TraceContext("call", INFERRED, call, desc, fn), traced, proven=sure):
                changed = True
        return changed


# attributes and methods of arrays: reading one says the value is an array, not a record
_ARRAYISH_ATTRS = frozenset({"shape", "ndim", "dtype", "size", "T", "at", "real", "imag"})
