"""Classes of this module that are surely *not* pytrees, and values that are surely
instances of one.  Anything in doubt (an imported base, a decorator, a metaclass, a
registration call, a class defined elsewhere) counts as a pytree: the rule stays silent."""
from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from ...analysis import ClassInfo, Function, SemanticModel
from .boundary import self_assignments, stored_callable

# bases that keep a class a plain Python object
PLAIN_BASES = frozenset({"object", "abc.ABC"})
# decorators that keep a class a plain Python object (a plain dataclass is not a pytree:
# shown with JAX, ``TypeError: Error interpreting argument ... as an abstract array``)
PLAIN_DECORATORS = frozenset({"dataclasses.dataclass", "functools.total_ordering"})
_MAX_DEPTH = 6
# methods that make JAX convert an object to an array
PYTREE_METHODS = frozenset({"__jax_array__", "__array__"})
# the protocol of ``jax.tree_util.register_pytree_node_class``: a class defining it is a pytree
# only once registered (the decorator, or a ``register_pytree_node(...)`` call naming it);
# defined and never registered, JAX treats its instances as opaque leaves (shown with JAX:
# ``TypeError: ... is not a valid JAX type``)
FLATTEN_METHODS = frozenset({"tree_flatten", "tree_unflatten", "tree_flatten_with_keys"})


class PlainClasses:
    def __init__(self, model: SemanticModel):
        self.m = model
        self._plain: Dict[int, bool] = {}
        self._registered: Optional[Set[str]] = None
        self._via_param = False
        self._sites: Optional[Dict[int, List[Tuple[ast.Call, Function, object]]]] = None

    def is_plain(self, info: ClassInfo, _seen: Optional[Set[int]] = None) -> bool:
        got = self._plain.get(id(info))
        if got is not None:
            return got
        seen = _seen or set()
        if id(info) in seen:
            return False
        seen.add(id(info))
        ok = self._check(info, seen)
        self._plain[id(info)] = ok
        return ok

    def _check(self, info: ClassInfo, seen: Set[int]) -> bool:
        m = self.m
        if info.module_kind or not info.scope.is_module:
            return False
        node = info.node
        for d in node.decorator_list:
            e = d.func if isinstance(d, ast.Call) else d
            if m.qualname(e, info.scope) not in PLAIN_DECORATORS:
                return False
        if node.keywords:
            return False
        for b in node.bases:
            q = m.qualname(b, info.scope)
            if q in PLAIN_BASES:
                continue
            if q is None and isinstance(b, ast.Name) and b.id in m.classes:
                if self.is_plain(m.classes[b.id], seen):
                    continue
            return False
        if PYTREE_METHODS & set(info.methods):
            return False
        return info.name not in self.registered()

    def unregistered_pytree(self, info: ClassInfo) -> bool:
        """A plain class that defines the pytree-node methods but is never registered."""
        return bool(FLATTEN_METHODS & set(info.methods)) and self.is_plain(info)

    def registered(self) -> Set[str]:
        """Names handed to a ``register...`` call anywhere in the module."""
        if self._registered is None:
            out: Set[str] = set()
            for fn in self.m.functions:
                for call in fn.of_type(ast.Call):
                    f = call.func
                    term = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
                    q = self.m.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
                    if "register" not in term.lower() and "register" not in (q or "").lower():
                        continue
                    for a in list(call.args) + [k.value for k in call.keywords]:
                        for n in ast.walk(a):
                            if isinstance(n, ast.Name):
                                out.add(n.id)
            self._registered = out
        return self._registered

    # ------------------------------------------------------------ values
    def instance_of(self, e: ast.expr, scope: Function, _depth: int = 0,
                    _seen: Optional[FrozenSet[Tuple[int, str]]] = None) -> Optional[ClassInfo]:
        """The plain class ``e`` is surely an instance of: ``Config(...)``; a call of a
        function of this module that returns one on every path; a name every binding of
        which is one (``state = init_state(...)`` and ``state = State(m, v)``); a parameter
        annotated with the class, given one by every call of this module, or -- a function
        no code of this module calls -- read like one by a function that returns a new
        instance built from it (``def step(p): ... return Particle(p.x + v, p.v)``)."""
        if _depth > _MAX_DEPTH:
            return None
        seen = _seen or frozenset()
        if isinstance(e, ast.Call):
            got = self._constructed(e, scope)
            if got is not None:
                return got
            return self._returned_by(e, scope, _depth, seen)
        if isinstance(e, ast.Attribute):
            return self._attribute_class(e, scope, _depth, seen)
        if not isinstance(e, ast.Name):
            return None
        owner = self.m.resolve_scope(e.id, scope)
        if owner is None or e.id in owner.globals_declared or \
                any(e.id in fn.globals_declared for fn in owner.children):
            return None
        if owner is scope and hasattr(e, "lineno"):
            # ``model = Model(...)`` then ``model = fit(model, x)``: the load in the second
            # statement sees the first, the one straight-line binding that reaches it
            reaching = self.m.reaching_value(e, scope) or _block_reaching(self.m, e, scope)
            if reaching is not None:
                return self.instance_of(reaching, scope, _depth + 1, seen)
        key = (id(owner), e.id)
        if key in seen:
            return None
        seen = seen | {key}
        found: Optional[ClassInfo] = None
        bs = self.m.bindings(e.id, owner)
        if not bs:
            return None
        for b in bs:
            if b.kind == "param":
                got = self._param_class(owner, e.id, _depth, seen)
                self._via_param = self._via_param or got is not None
            elif b.kind == "=" and b.element is not None:
                got = self.instance_of(b.element, owner, _depth + 1, seen)
                if got is None and isinstance(b.element, ast.Call):
                    # state = train_step(state, batch): a jitted step that returns a new instance
                    got = self._returned_by(b.element, owner, _depth + 1, seen, through_transforms=True)
            elif b.kind == "for" and not b.path and b.value is not None:
                # for batch in data_loader(...): a generator of this module yielding instances;
                # for layer in [Layer(w) for w in ws]
                got = self._iterated_class(b.value, owner, _depth + 1, seen)
            else:
                return None
            if got is None or (found is not None and got is not found):
                return None
            found = got
        return found

    def _iterated_class(self, it: ast.expr, scope: Function, depth: int, seen) -> Optional[ClassInfo]:
        """The plain class of every element ``it`` yields: a generator function of this module
        every ``yield`` of which gives an instance (no ``yield from``), or a list display /
        list comprehension (or a name bound once to one) of instances."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(it, ast.Name):
            owner = self.m.resolve_scope(it.id, scope)
            bs = self.m.bindings(it.id, owner) if owner is not None else []
            if len(bs) != 1 or bs[0].kind != "=" or bs[0].element is None or \
                    not isinstance(bs[0].element, (ast.List, ast.Tuple, ast.ListComp)):
                return None
            return self._iterated_class(bs[0].element, owner, depth + 1, seen)
        if isinstance(it, (ast.List, ast.Tuple)):
            if not it.elts or any(isinstance(x, ast.Starred) for x in it.elts):
                return None
            return _one_class(self.instance_of(x, scope, depth + 1, seen) for x in it.elts)
        if isinstance(it, ast.ListComp):
            return self._constructed(it.elt, scope)
        if isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)):
            target = self.m.resolve_callable(it.func, scope)
            if target is None or target.transforms:
                return None
            fn = target.function
            if fn.node is None or isinstance(fn.node, ast.Lambda) or fn.of_type(ast.YieldFrom):
                return None
            ys = fn.of_type(ast.Yield)
            if not ys or any(y.value is None for y in ys):
                return None
            return _one_class(self.instance_of(y.value, fn, depth + 1, seen) for y in ys)
        return None

    def _attribute_class(self, e: ast.Attribute, scope: Function, depth: int, seen) -> Optional[ClassInfo]:
        """``self.state`` in a method of a class of this module: the plain class every assignment
        to the attribute in the class's methods gives it (``self.state = State(...)`` in
        ``__init__``, ``self.state = self.step(self.state, batch)`` where the step -- jitted or
        not -- returns a new ``State(...)``)."""
        found = self_assignments(self.m, e, scope)
        if not found:
            return None
        method = scope.enclosing_method()
        key = (id(method.cls), "self." + e.attr)
        if key in seen:
            return None
        seen = seen | {key}
        one: Optional[ClassInfo] = None
        for value, meth, whole in found:
            if not whole:
                # ``self.state, loss = self._jit_step(self.state, x, y)``: the element the step
                # returns at that position
                index = _unpacked_index(meth, value, e.attr)
                got = self._returned_by(value, meth, depth, seen, through_transforms=True, index=index) \
                    if index is not None and isinstance(value, ast.Call) else None
                if got is None or (one is not None and got is not one):
                    return None
                one = got
                continue
            got = self.instance_of(value, meth, depth + 1, seen)
            if got is None and isinstance(value, ast.Call):
                got = self._returned_by(value, meth, depth, seen, through_transforms=True)
            if got is None or (one is not None and got is not one):
                return None
            one = got
        return one

    def evidence(self, e: ast.expr, scope: Function) -> Tuple[Optional[ClassInfo], bool]:
        """``(instance_of(e, scope), certain)``: ``certain`` is False when the answer rests on a
        parameter (its annotation, this module's calls of the function, or how it is read)."""
        self._via_param = False
        got = self.instance_of(e, scope)
        return got, not self._via_param

    def _constructed(self, e: ast.expr, scope: Function) -> Optional[ClassInfo]:
        if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Name):
            return None
        name = e.func.id
        method = scope.enclosing_method()
        if method is not None and method.cls is not None and method.params and name == method.params[0] \
                and scope is method and any(self.m.qualname(d, method.parent) == "classmethod"
                                            for d in method.decorators) \
                and len(self.m.bindings(name, method)) == 1:
            # ``cls(...)`` in a classmethod factory (``Model.create(key)``); a subclass calling
            # it builds the subclass, so only a class nothing here derives from counts
            info = method.cls
            derived = any(b == info.name for other in self.m.classes.values() for b in other.bases)
            return info if not derived and self.is_plain(info) else None
        info = self.m.classes.get(name)
        if info is None or self.m.qualname(e.func, scope) is not None:
            return None
        if self.m.resolve_scope(name, scope) is not self.m.module:
            return None    # a local of that name hides the class
        return info if self.is_plain(info) else None

    def _class_named(self, e: Optional[ast.expr], scope: Function) -> Optional[ClassInfo]:
        """The plain class an annotation names (``p: Particle`` or ``p: "Particle"``)."""
        if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.isidentifier():
            e = ast.Name(id=e.value, ctx=ast.Load())
        if isinstance(e, ast.Name):
            return self._constructed(ast.Call(func=e, args=[], keywords=[]), scope)
        return None

    def _returned_by(self, call: ast.Call, scope: Function, depth: int, seen,
                     through_transforms: bool = False, index: Optional[int] = None) -> Optional[ClassInfo]:
        """The plain class every ``return`` of the (untransformed) function of this module
        that ``call`` calls returns an instance of (``through_transforms``: jitted too -- what
        a binding holds when the call did not raise)."""
        if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
            return None
        target = self.m.resolve_callable(call.func, scope)
        if target is None and through_transforms:
            target = stored_callable(self.m, call.func, scope)
        if target is None or (target.transforms and not through_transforms):
            return None
        if isinstance(call.func, ast.Call) and not target.transforms:
            return None
        fn = target.function
        if fn.node is None or isinstance(fn.node, ast.Lambda):
            value = getattr(fn.node, "body", None)
            return self.instance_of(value, fn, depth + 1, seen) if value is not None else None
        if fn.of_type(ast.Yield, ast.YieldFrom) or isinstance(fn.node, ast.AsyncFunctionDef):
            return None
        if index is not None:
            # ``state, loss = step(state, batch)``: the element at ``index`` of every returned tuple
            return _one_class(self.instance_of(r.value.elts[index], fn, depth + 1, seen)
                              if isinstance(r.value, ast.Tuple) and index < len(r.value.elts) and
                              not any(isinstance(x, ast.Starred) for x in r.value.elts) else None
                              for r in fn.of_type(ast.Return))
        return _one_class(self.instance_of(r.value, fn, depth + 1, seen) if r.value is not None else None
                          for r in fn.of_type(ast.Return))

    def param_class(self, fn: Function, name: str) -> Optional[ClassInfo]:
        """The plain class of what parameter ``name`` of ``fn`` holds: its annotation, or what
        this module's calls of ``fn`` pass for it."""
        return self._param_class(fn, name, 0, frozenset())

    def _param_class(self, fn: Function, name: str, depth: int, seen) -> Optional[ClassInfo]:
        if fn.is_module or name in (fn.vararg, fn.kwarg):
            return None
        arg = fn.param_nodes.get(name)
        if arg is not None and arg.annotation is not None:
            return self._class_named(arg.annotation, fn.parent or fn)
        if fn.cls is not None and fn.params and name == fn.params[0] and not fn.is_staticmethod:
            return None      # ``self``
        sites = self.call_sites(fn)
        if sites:
            return _one_class(self._argument_class(call, caller, target, name, depth, seen)
                              for call, caller, target in sites)
        if self._referenced(fn):
            return None
        return self._read_like(fn, name)

    def _argument_class(self, call: ast.Call, caller: Function, target, name: str, depth: int,
                        seen) -> Optional[ClassInfo]:
        """The plain class of the argument ``call`` passes to parameter ``name``."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        pairs, _ = self.m.bind_arguments(target, call)
        given = [a for p, a in pairs if p == name]
        return self.instance_of(given[0], caller, depth + 1, seen) if given else None

    def call_sites(self, fn: Function) -> List[Tuple[ast.Call, Function, object]]:
        """Every call of this module that resolves to ``fn`` (through transforms and aliases)."""
        if self._sites is None:
            out: Dict[int, List[Tuple[ast.Call, Function, object]]] = {}
            for scope in self.m.functions:
                for call in scope.of_type(ast.Call):
                    if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
                        continue
                    target = self.m.resolve_callable(call.func, scope)
                    if target is not None:
                        out.setdefault(id(target.function), []).append((call, scope, target))
            self._sites = out
        return self._sites.get(id(fn), [])

    def _referenced(self, fn: Function) -> bool:
        """Whether this module names ``fn`` other than by calling it (a callback handed on:
        its callers are unknown)."""
        if isinstance(fn.node, ast.Lambda):
            return True
        return fn.name in self.m.name_reads()

    def _built_by(self, ret: ast.Return, fn: Function) -> Optional[ClassInfo]:
        """The one plain class ``ret`` builds a new instance of (``return C(...)``, or one
        class per tuple: ``return C(...), aux``)."""
        parts = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        built = {id(c): c for c in (self._constructed(e, fn) for e in parts if e is not None) if c is not None}
        return next(iter(built.values())) if len(built) == 1 else None

    def _read_like(self, fn: Function, name: str) -> Optional[ClassInfo]:
        """``name`` is a parameter of ``fn`` that nothing here calls: the plain class ``C`` when
        every ``return`` of ``fn`` builds a new ``C(...)``, ``name`` has no default and is not
        rebound, and it is only read as ``name.attr`` (at least two attributes, all of ``C``)
        or passed on whole as an argument.  (``return C(...), aux`` counts: one class per tuple.)"""
        if name in fn.defaults or len(self.m.bindings(name, fn)) != 1:
            return None
        found = _one_class(self._built_by(r, fn) for r in fn.of_type(ast.Return))
        if found is None:
            return None
        attrs = self.attributes(found)
        parents = {}
        names = []
        for n in ast.walk(fn.node):
            for c in ast.iter_child_nodes(n):
                parents[id(c)] = n
            if isinstance(n, ast.Name) and n.id == name:
                names.append(n)
        read: Set[str] = set()
        for n in names:
            if not isinstance(n.ctx, ast.Load):
                return None
            up = parents.get(id(n))
            if isinstance(up, ast.Attribute) and up.value is n:
                if up.attr not in attrs or not isinstance(up.ctx, ast.Load):
                    return None
                read.add(up.attr)
            elif isinstance(up, ast.Call) and n in up.args:
                continue
            else:
                return None
        return found if len(read) >= 2 else None

    def attributes(self, info: ClassInfo) -> Set[str]:
        """Attributes instances of ``info`` have: ``self.x = ...`` in its methods, class-level
        names, methods (with those of its local bases)."""
        out: Set[str] = set(info.methods) | set(info.fields)
        for stmt in info.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                out.add(stmt.target.id)
            elif isinstance(stmt, ast.Assign):
                out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        for fn in info.methods.values():
            if not fn.params:
                continue
            me = fn.params[0]
            for n in ast.walk(fn.node):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) and n.value.id == me:
                    out.add(n.attr)
        for b in info.bases:
            base = self.m.classes.get(b)
            if base is not None and base is not info:
                out |= self.attributes(base)
        return out


def plain_classes(model: SemanticModel) -> PlainClasses:
    return model.facts(PlainClasses)


def _one_class(found: Iterable[Optional[ClassInfo]]) -> Optional[ClassInfo]:
    """The class every one of ``found`` names; None when one names none or another, or
    there are none (read lazily: it stops at the first disagreement)."""
    one = None
    for got in found:
        if got is None or (one is not None and got is not one):
            return None
        one = got
    return one


def _unpacked_index(meth: Function, value: ast.expr, attr: str) -> Optional[int]:
    """The position of ``self.<attr>`` in the flat tuple target of the assignment in ``meth``
    whose value is ``value`` (``self.state, loss = ...`` -> 0)."""
    for node in meth.of_type(ast.Assign):
        if node.value is not value or len(node.targets) != 1 or not isinstance(node.targets[0], (ast.Tuple, ast.List)):
            continue
        elts = node.targets[0].elts
        if any(isinstance(x, ast.Starred) for x in elts):
            return None
        hits = [i for i, x in enumerate(elts) if isinstance(x, ast.Attribute) and x.attr == attr and
                isinstance(x.value, ast.Name) and x.value.id == meth.self_name]
        return hits[0] if len(hits) == 1 else None
    return None


def _block_reaching(m: SemanticModel, e: ast.Name, scope: Function) -> Optional[ast.expr]:
    """The value of the plain ``name = value`` that the load ``e`` surely sees: the last
    binding of the name before the load, in a block (an ``if __name__ == "__main__":`` body
    too) that also holds the load further on, no other binding of the name in between, and
    no loop around the load that binds the name (its back edge would reach the load)."""
    at = (e.lineno, e.col_offset)
    bs = m.bindings(e.id, scope)
    nodes = [b.node for b in bs if getattr(b.node, "lineno", None) is not None]
    before = [n for n in nodes if (getattr(n, "end_lineno", n.lineno), getattr(n, "end_col_offset", 0)) < at]
    if not before:
        return None
    store = max(before, key=lambda n: (n.lineno, n.col_offset))
    b = next(b for b in bs if b.node is store)
    if b.kind != "=" or b.path or not isinstance(store, ast.Assign) or len(store.targets) != 1:
        return None
    block = m.block_of(store, scope)
    if block is None:
        return None
    i = next(j for j, x in enumerate(block) if x is store)
    if not any(x.lineno <= e.lineno <= (x.end_lineno or x.lineno) for x in block[i + 1:]):
        return None     # the load is not further on in the same block
    for loop in scope.of_type(ast.For, ast.While, ast.AsyncFor):
        if (loop.lineno, loop.col_offset) <= at <= (loop.end_lineno, loop.end_col_offset) and \
                any(loop.lineno <= n.lineno <= loop.end_lineno for n in nodes):
            return None
    return store.value
