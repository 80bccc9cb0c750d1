"""Who calls which jitted callable or function, from where, and whether in a loop.

Built lazily (:func:`call_index`) and only by rules that need it; a file with
no ``jax.jit`` application never pays for it.  The index answers:

* :attr:`CallIndex.jit_bindings` — every application of a jit transform
  (``@jax.jit``, ``step = jax.jit(f)``, ``self.grad_fn = jax.jit(...)``,
  ``jax.jit(f)(x)``, ``return jax.jit(f)``) with the name it is bound to;
  :attr:`CallIndex.bindings` — the same for every transform that compiles per
  function object (:func:`compiles_per_function`: jit and pmap);
* :meth:`CallIndex.calls_to` — the call sites of a jit binding (lexical name
  lookup for names, ``self.<attr>`` inside the same class for attributes);
* :meth:`CallIndex.callers_of` — the call sites that resolve to a function of
  this module (``f(...)``, ``self.method(...)``);
* :meth:`CallIndex.enclosing_loop` — the innermost ``for``/``while`` body or
  comprehension of a scope that contains a node.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis.model import ClassInfo, Function, SemanticModel, TransformSite

# transforms that compile: applying one creates a cached, compiled callable
JIT_NAMES = K.JIT_NAMES

def compiles_per_function(name: str) -> bool:
    """A transform that compiles the function it is given and keeps the program on that
    function object (``jax.jit``, ``jax.pmap`` and their Flax/Equinox spellings): applied
    to a new callable, it traces and compiles again."""
    t = K.TRANSFORMS.get(name)
    return t is not None and t.caches_trace and t.kind != "body"


# methods where a jit created once per object is the right design
INIT_METHODS = frozenset({"__init__", "setup", "__post_init__", "__new__", "__set_name__"})

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class JitBinding:
    """One application of a jit transform and what it is bound to.

    ``kind``: ``def`` (a decorated def or method), ``name`` (``n = jax.jit(...)``),
    ``attr`` (``self.n = jax.jit(...)``), ``inline`` (``jax.jit(f)(x)``),
    ``return`` (``return jax.jit(f)``: a factory) or ``other``.
    """

    __slots__ = ("site", "kind", "name", "scope", "cls", "stmt", "fun_expr")

    def __init__(self, site: TransformSite, kind: str, name: Optional[str], scope: Function,
                 cls: Optional[ClassInfo], stmt: Optional[ast.AST], fun_expr: Optional[ast.expr]):
        self.site = site
        self.kind = kind
        self.name = name          # bound name / attribute (None for inline/other)
        self.scope = scope        # where the binding lives (for ``name``/``def``)
        self.cls = cls            # the class for ``attr`` bindings and decorated methods
        self.stmt = stmt          # the binding statement (Assign / Return / the def)
        self.fun_expr = fun_expr  # the callable the jit is applied to (None for decorators)

    @property
    def target(self) -> Optional[Function]:
        t = self.site.target
        return t.function if t is not None else None

    @property
    def is_jit(self) -> bool:
        """A jit transform (not pmap)."""
        return self.site.transform.name in JIT_NAMES

    @property
    def created_in(self) -> Function:
        """The scope whose execution creates the jitted callable."""
        return self.site.scope

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<JitBinding {self.kind} {self.name!r} line {self.site.node.lineno}>"


class CallSite:
    __slots__ = ("call", "scope", "loop")

    def __init__(self, call: ast.Call, scope: Function, loop: Optional[ast.AST]):
        self.call = call
        self.scope = scope        # the calling function (or the module)
        self.loop = loop          # the innermost loop of ``scope`` around the call, if any

    @property
    def in_loop(self) -> bool:
        return self.loop is not None


class CallIndex:
    def __init__(self, model: SemanticModel):
        self.model = model
        self.bindings: List[JitBinding] = []       # jit and pmap applications
        self.jit_bindings: List[JitBinding] = []   # jit applications only
        self._by_name: Dict[Tuple[int, str], JitBinding] = {}
        self._by_attr: Dict[Tuple[int, str], JitBinding] = {}
        self._calls: Optional[Dict[int, List[CallSite]]] = None
        self._calls_by_name: Optional[Dict[str, List[Tuple[ast.Call, Function]]]] = None
        self._callers: Dict[int, List[CallSite]] = {}
        self._loops: Dict[int, List[Tuple[tuple, tuple, ast.AST, Optional[tuple]]]] = {}
        # bindings a factory returns, with their place in the returned tuple (None: the whole value)
        self._returned: List[Tuple[JitBinding, Optional[int]]] = []
        self._build()

    # ------------------------------------------------------------ bindings
    def _build(self) -> None:
        m = self.model
        parents: Dict[int, Dict[int, ast.AST]] = {}
        for site in m.transform_sites:
            if not compiles_per_function(site.transform.name):
                continue
            if site.is_decorator:
                fn = site.target.function if site.target is not None else None
                if fn is None:
                    continue
                if fn.cls is not None and not fn.is_lambda:
                    b = JitBinding(site, "def", fn.name, site.scope, fn.cls, fn.node, None)
                    self._by_attr.setdefault((id(fn.cls), fn.name), b)
                else:
                    b = JitBinding(site, "def", fn.name, fn.parent, None, fn.node, None)
                    self._by_name.setdefault((id(fn.parent), fn.name), b)
                self._add(b)
                continue
            scope = site.scope
            pmap = parents.get(id(scope))
            if pmap is None:
                pmap = parents[id(scope)] = self._parent_map(scope)
            call = site.call
            fun = _fun_arg(call, site.transform)
            parent = pmap.get(id(call))
            b = None
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                t = parent.targets[0]
                if isinstance(t, ast.Name):
                    b = JitBinding(site, "name", t.id, self._binding_scope(t.id, scope), None, parent, fun)
                    self._by_name.setdefault((id(b.scope), t.id), b)
                elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    owner = method_owner(scope)
                    if owner is not None and t.value.id == owner.self_name:
                        b = JitBinding(site, "attr", t.attr, scope, owner.cls, parent, fun)
                        self._by_attr.setdefault((id(owner.cls), t.attr), b)
            elif isinstance(parent, ast.Call) and parent.func is call:
                b = JitBinding(site, "inline", None, scope, None, parent, fun)
            elif isinstance(parent, ast.Return):
                b = JitBinding(site, "return", None, scope, None, parent, fun)
                self._returned.append((b, None))
            elif parent is None and not scope.is_module:
                # ``return model, tx, jax.jit(fit_step, ...)``: one element of the returned tuple
                for ret in scope.of_type(ast.Return):
                    if isinstance(ret.value, ast.Tuple) and any(e is call for e in ret.value.elts) \
                            and not any(isinstance(e, ast.Starred) for e in ret.value.elts):
                        b = JitBinding(site, "return", None, scope, None, ret, fun)
                        self._returned.append((b, next(i for i, e in enumerate(ret.value.elts) if e is call)))
                        break
            if b is None:
                b = JitBinding(site, "other", None, scope, None, parent, fun)
            self._add(b)

    def _add(self, b: JitBinding) -> None:
        self.bindings.append(b)
        if b.is_jit:
            self.jit_bindings.append(b)

    @staticmethod
    def _parent_map(scope: Function) -> Dict[int, ast.AST]:
        """Parent of every jit-relevant call of ``scope``: the Assign/Return/Call that holds it."""
        out: Dict[int, ast.AST] = {}
        for n in scope.of_type(ast.Assign):
            if isinstance(n.value, ast.Call):
                out[id(n.value)] = n
        for n in scope.of_type(ast.Return):
            if isinstance(n.value, ast.Call):
                out[id(n.value)] = n
        for n in scope.of_type(ast.Call):
            if isinstance(n.func, ast.Call):
                out[id(n.func)] = n
        return out

    def _binding_scope(self, name: str, scope: Function) -> Function:
        """Where ``name = ...`` in ``scope`` binds: the module for a ``global`` name."""
        return self.model.module if name in scope.globals_declared else scope

    # ------------------------------------------------------------- lookups
    def lookup_name(self, name: str, scope: Function) -> Optional[JitBinding]:
        """The jit binding a bare ``name`` refers to in ``scope`` (lexical lookup)."""
        s = self.model.resolve_scope(name, scope)
        return None if s is None else self._by_name.get((id(s), name))

    def lookup_attr(self, expr: ast.Attribute, scope: Function) -> Optional[JitBinding]:
        """The jit binding ``self.<attr>`` refers to inside a method of the binding's class."""
        if not isinstance(expr.value, ast.Name):
            return None
        owner = method_owner(scope)
        if owner is None or expr.value.id != owner.self_name:
            return None
        cls = owner.cls
        b = self._by_attr.get((id(cls), expr.attr))
        if b is not None:
            return b
        for base in cls.bases:   # inherited from a base class of this module
            info = self.model.classes.get(base)
            if info is not None and info is not cls:
                b = self._by_attr.get((id(info), expr.attr))
                if b is not None:
                    return b
        return None

    def binding_for(self, func: ast.expr, scope: Function) -> Optional[JitBinding]:
        if isinstance(func, ast.Name):
            return self.lookup_name(func.id, scope)
        if isinstance(func, ast.Attribute):
            return self.lookup_attr(func, scope)
        return None

    def calls_to(self, binding: JitBinding) -> List[CallSite]:
        """Every call of a jit binding in this module."""
        if self._calls is None:
            self._index_jit_calls()
        if binding.kind == "inline":
            call = binding.stmt
            return [CallSite(call, binding.scope, self.enclosing_loop(call, binding.scope))]
        return self._calls.get(id(binding), [])

    def _index_jit_calls(self) -> None:
        calls: Dict[int, List[CallSite]] = {}
        names = {n for (_, n) in self._by_name}
        attrs = {n for (_, n) in self._by_attr}
        if names or attrs:
            for fn in self.model.functions:
                for call in fn.of_type(ast.Call):
                    f = call.func
                    if f.__class__ is ast.Name:
                        if f.id not in names:
                            continue
                        b = self.lookup_name(f.id, fn)
                    elif f.__class__ is ast.Attribute:
                        if f.attr not in attrs:
                            continue
                        b = self.lookup_attr(f, fn)
                    elif f.__class__ is ast.Call and f.args:
                        # jax.value_and_grad(loss_fn)(...): calls the jitted loss_fn too
                        tr = K.transform_for(self.model.qualname(f.func, fn))
                        inner = f.args[0]
                        if tr is None or tr.kind == "body":
                            continue
                        if inner.__class__ is ast.Name and inner.id in names:
                            b = self.lookup_name(inner.id, fn)
                        elif inner.__class__ is ast.Attribute and inner.attr in attrs:
                            b = self.lookup_attr(inner, fn)
                        else:
                            continue
                    else:
                        continue
                    if b is not None:
                        calls.setdefault(id(b), []).append(CallSite(call, fn, self.enclosing_loop(call, fn)))
        for b, index in self._returned:
            for c in self._factory_product_calls(b.scope, index):
                calls.setdefault(id(b), []).append(c)
        self._calls = calls

    def _factory_product_calls(self, factory: Function, index: Optional[int]) -> List[CallSite]:
        """Calls of what ``factory`` returns (at ``index`` of its returned tuple): ``step =
        make_step(cfg)`` / ``model, tx, step = build(cfg)`` -- the name's only binding in the
        calling scope -- then ``step(...)`` there."""
        out: List[CallSite] = []
        m = self.model
        for cs in self.callers_of(factory):
            s = cs.call
            owner = next((a for a in cs.scope.of_type(ast.Assign) if a.value is s and len(a.targets) == 1), None)
            if owner is None:
                continue
            t = owner.targets[0]
            if index is not None:
                if not isinstance(t, ast.Tuple) or index >= len(t.elts) or \
                        any(isinstance(e, ast.Starred) for e in t.elts):
                    continue
                t = t.elts[index]
            if not isinstance(t, ast.Name) or len(m.bindings(t.id, cs.scope)) != 1:
                continue
            for call in cs.scope.of_type(ast.Call):
                if isinstance(call.func, ast.Name) and call.func.id == t.id:
                    out.append(CallSite(call, cs.scope, self.enclosing_loop(call, cs.scope)))
        return out

    def callers_of(self, fn: Function) -> List[CallSite]:
        """Call sites in this module that resolve to ``fn`` (``f(...)``, ``self.f(...)``)."""
        got = self._callers.get(id(fn))
        if got is not None:
            return got
        if self._calls_by_name is None:
            by: Dict[str, List[Tuple[ast.Call, Function]]] = {}
            for s in self.model.functions:
                for call in s.of_type(ast.Call):
                    f = call.func
                    key = f.id if f.__class__ is ast.Name else (f.attr if f.__class__ is ast.Attribute else None)
                    if key is not None:
                        by.setdefault(key, []).append((call, s))
            self._calls_by_name = by
        out: List[CallSite] = []
        if not fn.is_lambda and not fn.is_module:
            for call, s in self._calls_by_name.get(fn.name, ()):
                t = self.model.resolve_callable(call.func, s)
                if t is not None and t.function is fn:
                    out.append(CallSite(call, s, self.enclosing_loop(call, s)))
        self._callers[id(fn)] = out
        return out

    # --------------------------------------------------------------- loops
    def enclosing_loop(self, node: ast.AST, scope: Function) -> Optional[ast.AST]:
        """The innermost loop of ``scope`` whose repeated part contains ``node``:
        a ``for``/``while`` body or a comprehension (not its first iterable)."""
        spans = self._loops.get(id(scope))
        if spans is None:
            spans = []
            for loop in scope.of_type(*_LOOPS):
                if loop.body:
                    first, last = loop.body[0], loop.body[-1]
                    start = (first.lineno, first.col_offset)
                    end = (last.end_lineno, last.end_col_offset)
                    excl = None
                    if isinstance(loop, ast.While):
                        start = (loop.test.lineno, loop.test.col_offset)
                    spans.append((start, end, loop, excl))
            for comp in scope.of_type(*_COMPS):
                it = comp.generators[0].iter
                spans.append(((comp.lineno, comp.col_offset), (comp.end_lineno, comp.end_col_offset), comp,
                              ((it.lineno, it.col_offset), (it.end_lineno, it.end_col_offset))))
            self._loops[id(scope)] = spans
        if not spans:
            return None
        pos = (node.lineno, node.col_offset)
        best = None
        best_start = None
        for start, end, loop, excl in spans:
            if start <= pos < end:
                if excl is not None and excl[0] <= pos < excl[1]:
                    continue
                if best_start is None or start > best_start:
                    best, best_start = loop, start
        return best


def _fun_arg(call: Optional[ast.Call], tr: K.Transform) -> Optional[ast.expr]:
    return SemanticModel.transform_function_arg(call, tr)


def method_owner(scope: Function) -> Optional[Function]:
    return scope.enclosing_method()


def in_traced_code(fn: Function) -> bool:
    """``fn`` or an enclosing function runs under a transform."""
    return fn.under_trace


def has_jit(model: SemanticModel) -> bool:
    """Cheap: does any jit transform apply in this file?"""
    return any(s.transform.name in JIT_NAMES for s in model.transform_sites)


def jit_index(model: SemanticModel, pmap: bool = False) -> Optional[CallIndex]:
    """The call index of a file that applies a jit transform (with ``pmap``: any transform
    that compiles per function object), None for any other file: where every jit-placement
    rule starts."""
    if not model.mentions_jax:
        return None
    if pmap:
        if not any(compiles_per_function(s.transform.name) for s in model.transform_sites):
            return None
    elif not has_jit(model):
        return None
    return call_index(model)


def call_index(model: SemanticModel) -> CallIndex:
    return model.facts(CallIndex)


def derived_names(assigns, names: Set[str]) -> Set[str]:
    """``names`` and the names the assignments ``assigns`` bind from values that read one of them,
    to a fixpoint (``model = models[name]`` in a loop over ``name``)."""
    out = set(names)
    assigns = [a for a in assigns if isinstance(a, ast.Assign) and a.value is not None]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if any(isinstance(n, ast.Name) and n.id in out for n in ast.walk(a.value)):
                for t in a.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and n.id not in out:
                            out.add(n.id)
                            changed = True
    return out
