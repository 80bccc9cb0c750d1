"""Facts shared by the purity rules (JAX102-JAX106): writes inside a traced
function, whether a traced function is *staged* (its Python body runs once per
trace rather than on every call), which object a method's ``self`` is, and
whether a parameter receives an object owned by a caller outside the trace.

Everything is derived from the :class:`~jaxlint.analysis.model.SemanticModel`
and :mod:`jaxlint.checkers.purity.bindings`; results are cached per model.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Tuple

from ...analysis import knowledge as K
from .bindings import (AMBIGUOUS_METHODS, LIST_METHODS, MUTATING_METHODS, BindingFacts, bindings_for,
                       root_name)
from ...analysis.model import CONTAINER, NUMPY, ClassInfo, Function, SemanticModel, proven

# transforms whose Python body runs on every call unless an enclosing function is staged
EAGER_TRANSFORMS = K.EAGER_TRANSFORMS
# transforms that trace once on purpose to inspect a function (shapes, jaxprs)
INSPECTING_TRANSFORMS = K.INSPECTING_TRANSFORMS

# class decorators / bases that make instances immutable pytrees: ``self`` inside a
# transformed method is a fresh, frozen copy
FROZEN_CLASS_DECORATORS = frozenset({
    "flax.struct.dataclass", "chex.dataclass", "jax.tree_util.register_pytree_node_class",
    "jax.tree_util.register_dataclass", "jax.tree_util.register_static",
})
FROZEN_BASES = frozenset({"flax.struct.PyTreeNode", "equinox.Module", "typing.NamedTuple"})
# module bases whose instances are built inside each trace (hk.transform)
PER_TRACE_BASES = frozenset({"haiku.Module"})

# methods that run while an object is being built: assigning attributes is their job
CONSTRUCTION_METHODS = frozenset({"__init__", "__post_init__", "__new__", "__setstate__", "setup",
                                  "__set_name__", "__init_subclass__"})

CACHING_FILTERS = K.CACHING_FILTERS
# transforms whose traced function is only ever run inside a cached trace
CACHED_TRACES = K.CACHED_TRACES

# ``f.defvjp(fwd, bwd)``: registering custom-derivative rules traces them with ``f``
RULE_DEFINERS = frozenset({"defvjp", "defjvp", "defjvps"})

# methods whose arguments are stored into the receiver
STORING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "extendleft", "setdefault",
                             "update", "add"})


class Write:
    """A statement or call inside a function that stores into, mutates or
    rebinds something."""

    __slots__ = ("node", "kind", "target", "root", "method", "values")

    def __init__(self, node: ast.AST, kind: str, target: ast.expr, root: ast.Name,
                 method: Optional[str], values: List[ast.expr]):
        self.node = node        # where to report: the statement or the call
        self.kind = kind        # name | item | attr | call | del
        self.target = target    # the Name/Subscript/Attribute written, or the receiver of a call
        self.root = root        # the Name at the root of ``target``
        self.method = method    # the mutating method (kind == "call")
        self.values = values    # the expressions stored

    @property
    def direct(self) -> bool:
        """``a[k]``, ``a.x``, ``a.append(...)``: the write touches the root object itself."""
        t = self.target
        if t is self.root:
            return True
        return getattr(t, "value", None) is self.root

    def describe(self) -> str:
        """A short spelling for messages: ``log.append(...)``, ``self.mean = ...``."""
        text = ast.unparse(self.target)
        if len(text) > 40:
            text = text[:37] + "..."
        if self.kind == "call":
            return f"{text}.{self.method}(...)"
        if self.kind == "del":
            return f"del {text}"
        if isinstance(self.node, ast.AugAssign):
            op = _AUG_TEXT.get(self.node.op.__class__, "=")
            return f"{text} {op} ..."
        return f"{text} = ..."


_AUG_TEXT = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.Pow: "**=", ast.FloorDiv: "//=",
             ast.Mod: "%=", ast.MatMult: "@=", ast.BitAnd: "&=", ast.BitOr: "|=", ast.BitXor: "^=",
             ast.LShift: "<<=", ast.RShift: ">>="}


def _caching(tr: Optional[K.Transform]) -> bool:
    """Does the transform cache its trace on the function object?"""
    return tr is not None and (tr.kind in ("jit", "pmap", "body") or tr.name in CACHING_FILTERS)


class PurityFacts:
    def __init__(self, model: SemanticModel):
        self.model = model
        self.bindings: BindingFacts = bindings_for(model)
        self._writes: Dict[int, List[Write]] = {}
        self._staged: Dict[int, bool] = {}
        self._cached: Dict[int, bool] = {}
        self._sites: Optional[Dict[int, Function]] = None
        self._external: Dict[Tuple[int, str], bool] = {}
        self._setup_like: Dict[int, bool] = {}
        self._nnx: Dict[int, bool] = {}
        self._uses: Dict[Tuple[int, int], Tuple[List[int], List[int], bool]] = {}

    # ------------------------------------------------------------ writes
    def writes(self, fn: Function) -> List[Write]:
        """Stores, deletions and mutating method calls written in ``fn``'s own body."""
        out = self._writes.get(id(fn))
        if out is not None:
            return out
        out = []
        used = None
        for call in fn.of_type(ast.Call):
            f = call.func
            if f.__class__ is ast.Attribute and f.attr in MUTATING_METHODS:
                if f.attr in NONE_RETURNING_METHODS:
                    if used is None:
                        used = _used_call_results(fn)
                    if id(call) in used:
                        continue   # `state = buffer.insert(state, x)`: a functional API, not list.insert
                r = root_name(f.value)
                if r is not None:
                    vals = list(call.args) + [k.value for k in call.keywords]
                    out.append(Write(call, "call", f.value, r, f.attr, vals))
        for node in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete):
            t = node.__class__
            if t is ast.Delete:
                for tg in node.targets:
                    self._add_targets(out, node, tg, None, "del")
            elif t is ast.Assign:
                for tg in node.targets:
                    self._add_targets(out, node, tg, node.value, "=")
            elif t is ast.AugAssign:
                self._add_targets(out, node, node.target, node.value, "aug")
            elif node.value is not None:
                self._add_targets(out, node, node.target, node.value, "=")
        out.sort(key=lambda w: (w.node.lineno, w.node.col_offset))
        self._writes[id(fn)] = out
        return out

    def _add_targets(self, out: List[Write], stmt: ast.AST, target: ast.expr, value: Optional[ast.expr],
                     mode: str) -> None:
        t = target.__class__
        if t is ast.Tuple or t is ast.List:
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in value.elts):
                for te, ve in zip(target.elts, value.elts):
                    self._add_targets(out, stmt, te, ve, mode)
            else:
                for te in target.elts:
                    self._add_targets(out, stmt, te, value, mode)
            return
        if t is ast.Starred:
            self._add_targets(out, stmt, target.value, value, mode)
            return
        if t is ast.Name:
            kind = "del" if mode == "del" else "name"
            root = target
        elif t is ast.Subscript or t is ast.Attribute:
            root = root_name(target)
            if root is None:
                return
            kind = "del" if mode == "del" else ("item" if t is ast.Subscript else "attr")
        else:
            return
        values: List[ast.expr] = []
        if value is not None:
            values.append(value)
        if mode == "aug" and t is not ast.Name:
            values.append(target)
        out.append(Write(stmt, kind, target, root, None, values))

    # ------------------------------------------------------------ staging
    def staged(self, fn: Function) -> bool:
        """Does ``fn``'s Python body run once per trace (under ``jit``, a
        ``lax`` body, ``vmap``, a Flax module...) rather than on every call?
        ``grad``/``jvp``/``vjp`` alone run it eagerly each call; ``eval_shape``
        and ``make_jaxpr`` trace once on purpose; both count only when applied
        inside a staged function."""
        return self._once(fn, self._staged, cached=False)

    def cached(self, fn: Function) -> bool:
        """Is the trace of ``fn`` reused by later calls, so that values it read
        while tracing are baked in?  ``jit``/``pmap``, ``lax`` control flow and
        Flax module methods (applied under ``jit``) cache; ``vmap`` and ``grad``
        retrace on every call unless applied inside a cached function."""
        return self._once(fn, self._cached, cached=True)

    def _once(self, fn: Function, memo: Dict[int, bool], cached: bool) -> bool:
        key = id(fn)
        v = memo.get(key)
        if v is not None:
            return v
        memo[key] = False   # recursion guard
        result = False
        for ctx in fn.contexts:
            t = ctx.transform
            if t == "call":
                if ctx.caller is not None and self._once(ctx.caller, memo, cached):
                    result = True
                    break
                continue
            tr = K.TRANSFORMS.get(t)
            eager = t in EAGER_TRANSFORMS or t in INSPECTING_TRANSFORMS or (tr is not None and tr.kind == "grad")
            if cached and tr is not None and not _caching(tr) and t not in CACHED_TRACES:
                eager = True
            if not eager:
                result = True
                break
            s = self._site_scope(ctx.node)
            while s is not None and not s.is_module:
                if s.contexts and self._once(s, memo, cached):
                    result = True
                    break
                s = s.parent
            if result:
                break
        memo[key] = result
        return result

    def in_traced(self, s: Optional[Function]) -> bool:
        """Is ``s`` (or a function around it) a traced context?  (``Function.under_trace``)"""
        return s is not None and s.under_trace

    def _site_scope(self, node: ast.AST) -> Optional[Function]:
        if self._sites is None:
            self._sites = {id(site.node): site.scope for site in self.model.transform_sites}
        return self._sites.get(id(node))

    @staticmethod
    def iterative(fn: Function) -> bool:
        """Is ``fn`` a ``lax`` loop/branch body or a ``vmap``ped function: traced once
        but standing for many iterations, branches or batch elements?"""
        for c in fn.contexts:
            tr = K.TRANSFORMS.get(c.transform)
            if tr is not None and tr.kind in ("body", "vmap"):
                return True
        return False

    @staticmethod
    def own_transform(fn: Function) -> bool:
        """Is ``fn`` traced by a transform of its own (new tracers), not only called?"""
        return any(c.transform != "call" for c in fn.contexts)

    # ------------------------------------------------------------ classes
    @staticmethod
    def method_owner(fn: Function) -> Optional[Function]:
        """The method whose ``self`` code in ``fn`` sees (``Function.enclosing_method``)."""
        return fn.enclosing_method()

    def self_root(self, fn: Function, root: ast.Name) -> Optional[Function]:
        """The method when ``root`` is its ``self`` as seen from ``fn``."""
        owner = self.method_owner(fn)
        if owner is None or owner.self_name != root.id:
            return None
        if self.bindings.resolve(root.id, fn) is not owner:
            return None
        if self._is_classmethod(owner):
            return None
        return owner

    def _is_classmethod(self, fn: Function) -> bool:
        return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorators)

    def class_root(self, fn: Function, root: ast.Name) -> Optional[ClassInfo]:
        """The class when ``root`` names a class of this module or is a classmethod's ``cls``."""
        owner = self.method_owner(fn)
        if owner is not None and owner.params and root.id == owner.params[0] and self._is_classmethod(owner) \
                and self.bindings.resolve(root.id, fn) is owner:
            return owner.cls
        scope = self.bindings.resolve(root.id, fn)
        if scope is not None and scope.is_module:
            bs = self.bindings.module.get(root.id)
            if bs and all(b.kind == "class" for b in bs):
                return self.model.classes.get(root.id)
        return None

    def frozen_class(self, info: Optional[ClassInfo]) -> bool:
        """NNX modules (mutations are propagated by ``nnx.jit``), Equinox modules and
        registered pytree dataclasses (frozen; ``self`` is a fresh copy)."""
        if info is None:
            return False
        if info.module_kind in ("nnx", "equinox"):
            return True
        m = self.model
        for d in info.node.decorator_list:
            q = m.qualname(d.func if isinstance(d, ast.Call) else d, info.scope)
            if q in FROZEN_CLASS_DECORATORS:
                return True
        return any(b in FROZEN_BASES for b in info.bases)

    def built_per_trace(self, info: Optional[ClassInfo], _depth: int = 0) -> bool:
        """Instances exist only inside one trace: Haiku modules, which ``hk.transform``
        builds anew on every call of the transformed function (creating one outside
        it is an error) -- attributes set on ``self`` die with the trace; and objects of a
        class every construction of which makes a call-local object (``_built_per_call``)."""
        if info is None or _depth > 5:
            return False
        for b in info.bases:
            if b in PER_TRACE_BASES:
                return True
            local = self.model.classes.get(b)
            if local is not None and local is not info and self.built_per_trace(local, _depth + 1):
                return True
        return _depth == 0 and self._built_per_call(info)

    def _built_per_call(self, info: ClassInfo) -> bool:
        """Every instance of the class is made inside a function and used there only as the
        receiver of its own methods (``interpreter = Seed(key)``, ``return interpreter.eval(f)``;
        ``Seed(key).eval(f)``): each call of that function makes its own object and drops it when
        it returns, so what a method stores on ``self`` dies with the call."""
        m = self.model
        sites = []
        for fn in m.functions:
            for c in fn.of_type(ast.Call):
                if c.func.__class__ is ast.Name and c.func.id == info.name \
                        and m.resolve_scope(info.name, fn) is info.scope:
                    sites.append((fn, c))
        if not sites or any(fn.is_module or fn.cls is info for fn, _ in sites):
            return False
        parents = {}
        for fn, c in sites:
            for node in ast.walk(fn.node):
                for child in ast.iter_child_nodes(node):
                    parents[id(child)] = node
            p = parents.get(id(c))
            if p.__class__ is ast.Attribute and p.value is c and parents.get(id(p)).__class__ is ast.Call \
                    and parents[id(p)].func is p:
                continue        # ``Seed(key).eval(f)``
            if not (p.__class__ is ast.Assign and p.value is c and len(p.targets) == 1
                    and p.targets[0].__class__ is ast.Name):
                return False
            name = p.targets[0].id
            for n in ast.walk(fn.node):
                if n.__class__ is ast.Name and n.id == name and n.ctx.__class__ is ast.Load:
                    a = parents.get(id(n))
                    if not (a.__class__ is ast.Attribute and parents.get(id(a)).__class__ is ast.Call
                            and parents[id(a)].func is a):
                        return False    # handed on, returned or stored: it may outlive the call
        return True

    def variable_write(self, info: Optional[ClassInfo], target: ast.expr) -> bool:
        """``self.<var>.value = ...``: updating a Flax (linen or NNX) variable, the
        framework's own way to keep state across calls."""
        if info is None or not isinstance(target, ast.Attribute) or target.attr != "value":
            return False
        if info.module_kind in ("linen", "nnx"):
            return True
        holder = target.value
        if isinstance(holder, ast.Attribute):
            for v in info.setup_attrs.get(holder.attr, ()):
                if isinstance(v, ast.Call):
                    q = self.model.qualname(v.func, info.scope) or ""
                    named = isinstance(v.func, ast.Attribute) and v.func.attr in ("variable", "param")
                    if named or q.startswith(("flax.", "jax.")):
                        return True
        return False

    def setup_like(self, method: Function) -> bool:
        """A construction method (``__init__``, Flax ``setup``...) or a method only
        called from one: assigning ``self.<attr>`` there is how objects are built."""
        key = id(method)
        v = self._setup_like.get(key)
        if v is not None:
            return v
        self._setup_like[key] = False
        if method.name in CONSTRUCTION_METHODS:
            result = True
        else:
            callers = [c for c in method.contexts if c.transform == "call"]
            result = bool(callers) and len(callers) == len(method.contexts) and all(
                c.caller is not None and (o := self.method_owner(c.caller)) is not None and self.setup_like(o)
                for c in callers)
        self._setup_like[key] = result
        return result

    def nnx_rooted(self, fn: Function) -> bool:
        """Traced by a Flax NNX transform or module (which propagate object mutations)."""
        key = id(fn)
        v = self._nnx.get(key)
        if v is not None:
            return v
        self._nnx[key] = False
        result = False
        for c in fn.contexts:
            if c.transform.startswith("flax.nnx.") or c.transform == "nnx.Module":
                result = True
                break
            if c.transform == "call" and c.caller is not None and self.nnx_rooted(c.caller):
                result = True
                break
        self._nnx[key] = result
        return result

    # ------------------------------------------------------------ closures
    @staticmethod
    def top_function(fn: Function, scope: Function) -> Optional[Function]:
        """The function defined directly in ``scope`` that contains ``fn`` (or is it)."""
        a = fn
        while a.parent is not None and a.parent is not scope:
            a = a.parent
        return a if a.parent is scope else None

    def closure_uses(self, scope: Function, fn: Function) -> Tuple[List[int], List[int], bool]:
        """Where ``scope``'s own code uses the function ``fn`` defined in it.

        Returns ``(uses, cached, escapes)``: the lines of every call or transform
        application of ``fn`` (directly or through an alias such as
        ``step = jax.jit(fn)``); the lines of those that reuse a cached trace
        (calls of a jitted ``fn``, applications of ``jit``/``pmap``/``lax``
        control flow, which cache on the function object, unlike ``vmap`` and
        ``grad``); and whether ``fn`` escapes (returned, yielded, stored, or
        handed to other code)."""
        key = (id(scope), id(fn))
        v = self._uses.get(key)
        if v is not None:
            return v
        m = self.model
        names: Dict[str, bool] = {}     # alias -> calls reuse a cached trace
        lam = fn.node if fn.is_lambda else None
        if lam is None:
            names[fn.name] = any(_caching(K.TRANSFORMS.get(c.transform)) and
                                 any(c.node is d for d in fn.decorators) for c in fn.contexts)

        def wrapper(e: ast.AST) -> Optional[bool]:
            """None when ``e`` does not evaluate to ``fn`` or a wrapper of it
            (``jax.jit(fn)``, ``partial(fn, ...)``, a tuple holding it); else
            whether calling it reuses a cached trace."""
            t = e.__class__
            if t is ast.Name:
                return names.get(e.id)
            if e is lam:
                return False
            if t is ast.Tuple or t is ast.List or t is ast.Set or t is ast.Dict:
                elts = e.elts if t is not ast.Dict else [x for x in e.values if x is not None]
                found = [w for w in map(wrapper, elts) if w is not None]
                return any(found) if found else None
            if t is ast.Starred:
                return wrapper(e.value)
            if t is ast.Call and e.func.__class__ in (ast.Name, ast.Attribute):
                q = m.qualname(e.func, scope)
                tr = K.transform_for(q)
                if (tr is not None and tr.kind != "body") or q in K.PARTIAL:
                    found = [w for w in map(wrapper, list(e.args) + [k.value for k in e.keywords])
                             if w is not None]
                    if found:
                        return _caching(tr) or any(found)
            return None

        escapes = False
        for _ in range(2):
            for node in scope.of_type(ast.Assign, ast.AnnAssign, ast.NamedExpr):
                if node.value is None:
                    continue
                w = wrapper(node.value)
                if w is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        names[t.id] = names.get(t.id, False) or w
                    else:
                        escapes = True
        for node in scope.of_type(ast.Return, ast.Yield, ast.YieldFrom):
            if node.value is not None and wrapper(node.value) is not None:
                escapes = True
        # every binding of the aliases, in order: ``k_jit = jit(lambda: f(...))`` rebound to another
        # lambda's jit further down is no longer ``fn`` there
        rebinds: Dict[str, List[Tuple[int, bool]]] = {}
        for node in scope.of_type(ast.Assign, ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id in names and node.value is not None:
                    rebinds.setdefault(t.id, []).append((node.lineno, wrapper(node.value) is not None))
        uses: List[int] = []
        cached: List[int] = []
        for call in scope.of_type(ast.Call):
            f = call.func
            if f.__class__ is ast.Name and f.id in names:
                seen = [w for line, w in sorted(rebinds.get(f.id, ())) if line < call.lineno]
                if seen and not seen[-1]:
                    continue   # the name holds another function by now
                uses.append(call.lineno)
                if names[f.id]:
                    cached.append(call.lineno)
                continue
            args = list(call.args) + [k.value for k in call.keywords]
            if not any(wrapper(a) is not None for a in args):
                continue
            q = m.qualname(f, scope) if f.__class__ in (ast.Name, ast.Attribute) else None
            if q in K.PARTIAL:
                continue   # only binds arguments
            tr = K.transform_for(q)
            if tr is not None or q in K.HIGHER_ORDER or \
                    (f.__class__ is ast.Attribute and f.attr in RULE_DEFINERS):
                uses.append(call.lineno)
                if _caching(tr):
                    cached.append(call.lineno)
            else:
                escapes = True
        if lam is not None:
            uses.append(lam.lineno)
        v = (sorted(uses), sorted(cached), escapes)
        self._uses[key] = v
        return v

    def reused(self, scope: Function, fn: Function) -> bool:
        """Is ``fn`` (defined in function ``scope``) run again and again: used in a
        loop of ``scope`` that does not also re-create it, or escaping ``scope``?"""
        uses, _cached, escapes = self.closure_uses(scope, fn)
        if escapes:
            return True
        d = fn.node
        for lp in self.bindings.scope(scope).loops:
            lo, hi = lp.lineno, lp.end_lineno or lp.lineno
            if lo <= d.lineno <= hi:
                continue
            if any(lo <= u <= hi for u in uses):
                return True
        return False

    def stale_after(self, scope: Function, fn: Function, line: int, loops: Tuple) -> bool:
        """Can a change at ``line`` of ``scope`` (a function), inside ``loops``, come
        after ``fn`` (defined in ``scope``) was traced and before that trace is
        reused?  JAX caches the trace of a jitted function and of a ``lax``
        loop/branch body on the function object, so a later call or
        ``lax.scan(fn, ...)`` keeps the old value; ``vmap`` and ``grad``
        retrace every time."""
        d = fn.node
        if any(lp.lineno <= d.lineno <= (lp.end_lineno or lp.lineno) for lp in loops):
            return False
        if line < d.lineno:
            return False    # changed before this definition runs: every trace of it sees the change
        if _exclusive_branches(scope, d.lineno, line):
            return False    # defined (and traced) in one branch of an ``if``, changed in the other
        _uses, cached, escapes = self.closure_uses(scope, fn)
        # a later ``def`` of the same name (a script's next experiment redefining ``update``):
        # calls after it run that function, with its own trace
        body = getattr(scope.node, "body", None)
        top = {id(st) for st in body} if isinstance(body, list) else set()
        redefs = [n.lineno for n in scope.of_type(ast.FunctionDef, ast.AsyncFunctionDef)
                  if n.name == fn.name and n.lineno > d.lineno and n is not d
                  and id(n) in top]   # (a ``def`` inside a branch may not run)
        if redefs and not escapes:
            cached = [u for u in cached if u < min(redefs)]
        if any(lp.lineno <= u <= (lp.end_lineno or lp.lineno) for lp in loops for u in cached):
            return True
        before = any(u < line for u in cached)
        if before and escapes and self._constructed_before_traced(scope, cached, line):
            return False
        return before and (escapes or any(u > line for u in cached))

    def _constructed_before_traced(self, scope: Function, cached: List[int], line: int) -> bool:
        """``scope`` is a constructor that only *applies* ``jax.jit``/``pmap`` to the function
        (``self.step = jax.jit(step)``): applying one traces nothing -- the first call does, and
        the stored function is called once ``__init__`` has returned.  So every change ``__init__``
        makes before it returns comes before that trace -- unless ``__init__`` calls a method of
        its own between the application and the change (it may call the stored function)."""
        if scope.name != "__init__" or scope.cls is None:
            return False
        m = self.model
        selfname = scope.self_name
        first = min(cached)
        for call in scope.of_type(ast.Call):
            f = call.func
            if call.lineno in cached:
                q = m.qualname(f, scope) if f.__class__ in (ast.Name, ast.Attribute) else None
                tr = K.transform_for(q)
                if tr is None and q is None:
                    return False      # a call of a local name: the jitted function itself, maybe
                if tr is not None and tr.kind == "body":
                    return False      # a lax body: traced where it is applied
            elif first < call.lineno < line and f.__class__ is ast.Attribute \
                    and f.value.__class__ is ast.Name and f.value.id == selfname:
                return False          # ``self.warm_up()``: may call the stored function
        return True

    # --------------------------------------------------------- parameters
    def external_param(self, fn: Function, p: str, _depth: int = 0) -> bool:
        """Does parameter ``p`` of traced ``fn`` hold an object owned by code
        outside the trace?  True when a transform (``jit``, ``vmap``, ``grad``, a
        Flax module method...) hands the caller's argument to ``fn`` (``lax``
        bodies and custom-derivative rules receive fresh values), or when a
        traced call site passes such a parameter of its own function into ``p``.
        A parameter ``fn`` rebinds is not followed (it may be a copy)."""
        key = (id(fn), p)
        v = self._external.get(key)
        if v is not None:
            return v
        self._external[key] = False
        result = False
        if p in fn.param_nodes and p != fn.vararg and p != fn.kwarg \
                and p not in self.bindings.locally_stored(fn) and _depth < 12:
            m = self.model
            for ctx in fn.contexts:
                t = ctx.transform
                if t != "call":
                    tr = K.TRANSFORMS.get(t)
                    if (tr is not None and tr.kind == "body") or t == "jax.custom_vjp":
                        continue
                    result = True
                    break
                caller, call = ctx.caller, ctx.node
                if caller is None or not isinstance(call, ast.Call):
                    continue
                if isinstance(call.func, (ast.Name, ast.Attribute)) and m.qualname(call.func, caller) in K.HIGHER_ORDER:
                    continue
                target = m.resolve_callable(call.func, caller)
                if target is None or target.function is not fn:
                    continue
                pairs, _ = m.bind_arguments(target, call)
                for q, a in pairs:
                    if q != p:
                        continue
                    r = _container_root(a)
                    if r is not None and self.bindings.resolve(r.id, caller) is caller \
                            and self.external_param(caller, r.id, _depth + 1):
                        result = True
                        break
                if result:
                    break
        self._external[key] = result
        return result

    @staticmethod
    def returns_name(fn: Function, name: str) -> bool:
        """Does ``fn`` return ``name`` (alone, inside a tuple/list/dict display, or
        as the object of ``name.replace(...)``/``name._replace(...)``/
        ``dataclasses.replace(name, ...)``: a copy that shares what was mutated) -- or an alias
        bound to it once (``out = particles``; ``out.t = ...``; ``return out``)?"""
        names = {name}
        binds: Dict[str, int] = {}
        for a in fn.of_type(ast.Assign):
            for t in a.targets:
                for n in ast.walk(t):
                    if n.__class__ is ast.Name and n.ctx.__class__ is ast.Store:
                        binds[n.id] = binds.get(n.id, 0) + 1
        for a in fn.of_type(ast.Assign):
            if len(a.targets) == 1 and a.targets[0].__class__ is ast.Name and a.value.__class__ is ast.Name \
                    and a.value.id == name and binds.get(a.targets[0].id) == 1:
                names.add(a.targets[0].id)
        for r in fn.of_type(ast.Return):
            v = r.value
            if v is None:
                continue
            stack = [v]
            while stack:
                e = stack.pop()
                if isinstance(e, ast.Name) and e.id in names:
                    return True
                if isinstance(e, ast.Call):
                    f = e.func
                    if isinstance(f, ast.Attribute) and f.attr in _COPYING_METHODS:
                        stack.append(f.value)
                    elif isinstance(f, (ast.Name, ast.Attribute)) and e.args \
                            and (f.id if isinstance(f, ast.Name) else f.attr) == "replace":
                        stack.append(e.args[0])
                if isinstance(e, (ast.Tuple, ast.List)):
                    stack.extend(e.elts)
                elif isinstance(e, ast.Dict):
                    stack.extend(x for x in e.values if x is not None)
                elif isinstance(e, ast.Starred):
                    stack.append(e.value)
        if fn.is_lambda:
            body = fn.node.body
            return isinstance(body, ast.Name) and body.id == name
        return False

    def container_param(self, fn: Function, p: str) -> bool:
        """Evidence that parameter ``p`` is a Python dict/list/set (not an array,
        not an object whose ``update`` method is functional): an annotation, a
        string key, ``.items()``/``.keys()``/``.values()``, a list-only method, or
        a container passed in by a traced call site."""
        m = self.model
        a = fn.param_nodes.get(p)
        if a is not None and a.annotation is not None:
            ann = a.annotation
            aq = m.qualname(ann.value if isinstance(ann, ast.Subscript) else ann, fn.parent)
            if aq in K.CONTAINER_ANNOTATIONS:
                return True
        if fn.param_kinds.get(p, 0) & CONTAINER and not fn.param_kinds.get(p, 0) & NUMPY:
            return True
        for call in fn.of_type(ast.Call):
            f = call.func
            if f.__class__ is ast.Attribute and f.value.__class__ is ast.Name and f.value.id == p:
                if f.attr in LIST_METHODS or f.attr in ("items", "keys", "values"):
                    return True
                if f.attr == "get" and call.args:
                    return True
        for sub in fn.of_type(ast.Subscript):
            if sub.value.__class__ is ast.Name and sub.value.id == p:
                sl = sub.slice
                if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
                    return True
        return False


def _container_root(e: ast.AST) -> Optional[ast.Name]:
    """``p`` for ``p`` or ``p["key"]...``: an argument that is (part of) a parameter."""
    while isinstance(e, ast.Subscript):
        sl = e.slice
        if not (isinstance(sl, ast.Constant) and isinstance(sl.value, str)):
            return None
        e = e.value
    return e if isinstance(e, ast.Name) else None


def value_traced(model: SemanticModel, fn: Function, values: List[ast.expr]) -> Optional[ast.expr]:
    """The first traced expression among ``values`` (a traced culprit), else None."""
    for v in values:
        if proven(model.kind(v, fn)):
            return model.traced_culprit(v, fn) or v
    return None


def reset_before_return(m: SemanticModel, fn: Function, w: Write) -> bool:
    """The traced function puts a value that is not traced back into the place ``w`` wrote before it
    returns: an assignment to the same target (``self.state = previous_state``, ``model.signals =
    None``) after ``w``, in the function's own body or a ``finally:`` of it, with no ``return``
    between them.  The trace ends with no tracer there: JAX raises ``UnexpectedTracerError`` only
    when a leaked tracer is used after its trace."""
    want = ast.dump(w.target, annotate_fields=False, include_attributes=False).replace("Store()", "")
    line = getattr(w.node, "end_lineno", None) or w.node.lineno
    resets = []
    blocks = [fn.node.body]
    for st in fn.node.body:
        if isinstance(st, ast.Try):
            blocks.append(st.finalbody)
    for block in blocks:
        for st in block:
            if isinstance(st, ast.Assign) and st.lineno > line and len(st.targets) == 1 \
                    and ast.dump(st.targets[0], annotate_fields=False,
                                 include_attributes=False).replace("Store()", "") == want \
                    and value_traced(m, fn, [st.value]) is None:
                resets.append(st.lineno)
    if not resets:
        return False
    first = min(resets)
    returns = [n.lineno for n in fn.of_type(ast.Return)]
    in_finally = any(isinstance(st, ast.Try) and any(r.lineno == first for r in st.finalbody)
                     for st in fn.node.body)
    return in_finally or not any(line < r < first for r in returns)



def restores_entry_value(model: SemanticModel, fn: Function, w: Write) -> bool:
    """``backup = self.state`` ... ``self.state = backup``: the write puts back the value the place
    held when the function began (the name is bound once, to the same place, and nothing between
    can rebind it): the object ends as it started."""
    if w.kind != "attr" or not w.values or w.values[0].__class__ is not ast.Name:
        return False
    saved = model.single_value(w.values[0].id, fn)
    if saved is None or model.resolve_scope(w.values[0].id, fn) is not fn:
        return False
    dump = lambda e: ast.dump(e, annotate_fields=False, include_attributes=False).replace("Store()", "Load()")
    return dump(saved) == dump(w.target) and saved.lineno < w.node.lineno

def depends_on_locals(model: SemanticModel, fn: Function, values: List[ast.expr]) -> bool:
    """Does a traced value among ``values`` read a traced local or parameter of
    ``fn`` itself (as opposed to only values closed over from an outer trace)?"""
    for v in values:
        for n in ast.walk(v):
            if n.__class__ is ast.Name and n.id in fn.locals and proven(model.kind(n, fn)):
                return True
    return False


def purity_for(model: SemanticModel) -> PurityFacts:
    return model.facts(PurityFacts)


# container methods that mutate in place and return None: a call whose result is used
# (assigned, returned, passed on) is some other API of the same name
NONE_RETURNING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "extendleft", "update",
                                    "clear", "remove", "add", "discard", "sort", "reverse"})


def _used_call_results(fn: Function) -> set:
    """ids of the calls in ``fn`` whose result is used (not an expression statement)."""
    statement_calls = {id(n.value) for n in fn.walk() if isinstance(n, ast.Expr)}
    return {id(c) for c in fn.of_type(ast.Call)} - statement_calls


# methods whose result is a (shallow) copy of the receiver: returning it hands the caller
# what was mutated in place
_COPYING_METHODS = frozenset({"replace", "_replace", "copy"})


def traced_writes(model: SemanticModel, staged: bool = False) -> Iterator[Tuple[PurityFacts, Function, List[Write]]]:
    """Each traced function of the file that writes something, with its writes
    (``staged``: only functions whose Python body runs once per trace).  The
    purity facts are computed on the first traced function, never for a file
    without one."""
    facts: Optional[PurityFacts] = None
    for fn in model.traced_functions():
        if facts is None:
            facts = purity_for(model)
        writes = facts.writes(fn)
        if writes and (not staged or facts.staged(fn)):
            yield facts, fn, writes


__all__ = ["Write", "PurityFacts", "purity_for", "traced_writes", "value_traced", "depends_on_locals",
           "AMBIGUOUS_METHODS", "LIST_METHODS", "MUTATING_METHODS", "STORING_METHODS"]


def _exclusive_branches(scope: Function, a: int, b: int) -> bool:
    """Lines ``a`` and ``b`` of ``scope`` lie in the two branches of one ``if`` statement (one in
    its body, the other in its ``else``): no run of ``scope`` executes both."""
    def span(stmts):
        return (stmts[0].lineno, stmts[-1].end_lineno or stmts[-1].lineno) if stmts else None

    for node in scope.of_type(ast.If):
        body, other = span(node.body), span(node.orelse)
        if body is None or other is None:
            continue
        if (body[0] <= a <= body[1] and other[0] <= b <= other[1]) or \
                (other[0] <= a <= other[1] and body[0] <= b <= body[1]):
            return True
    return False


def attribute_observed(m: SemanticModel, fn: Function, w: Write, receiver: Optional[str] = None,
                       own_reads: bool = True) -> bool:
    """Can some code see what the trace left in the attribute ``w`` writes (``self.theta =
    ...``) -- a value that, under a transform, was written once at trace time (and may hold a
    tracer)?  Yes when the attribute is read by code that runs outside every trace (an eager
    method, a script's module level: where a leaked tracer raises and a skipped update shows), or
    by the writing function before it writes (``self.n = self.n + 1``: the next trace reads what
    the last one left).  A read in another traced function only may run in the same trace after
    the write, or in a later one: not known, so not evidence.  ``receiver``: for a module-level
    or closed-over object, only reads through that name count.  ``own_reads=False``: the
    writing function's own reads are no evidence (a counter only its update reads shows
    nothing to anyone; for a tracer they are: the next trace reads the last one's)."""
    t = w.target
    if not isinstance(t, ast.Attribute):
        return False
    if isinstance(w.node, ast.AugAssign) and own_reads:
        return True     # ``self.calls += 1`` reads what the last trace left before writing
    attr = t.attr
    start = w.node.lineno
    end = getattr(w.node, "end_lineno", None) or start
    eager_scopes = _eager_scopes(m)
    home = m.resolve_scope(receiver, fn) if receiver is not None else None
    for scope in m.functions:
        eager = id(scope) in eager_scopes
        if not eager and scope is not fn:
            continue
        if receiver is not None and home is not None and m.resolve_scope(receiver, scope) is not home:
            continue   # another function's ``model``: another object
        for node in scope.walk():
            if node.__class__ is not ast.Attribute or node.attr != attr or node.ctx.__class__ is not ast.Load:
                continue
            if receiver is not None and not (node.value.__class__ is ast.Name and node.value.id == receiver):
                continue
            if scope is fn and not eager:
                if own_reads and (node.lineno < start or (start <= node.lineno <= end and _inside(node, w.node))):
                    return True   # read before (or by) the write: the next trace sees the last one's value
                continue
            if _before_definition(scope, fn, node):
                continue
            return True
    return False


def _before_definition(scope: Function, fn: Function, node: ast.AST) -> bool:
    """``node`` is read in ``scope``, which defines ``fn`` (the writer, directly or further in),
    above that definition and in no loop that also holds it: it runs before ``fn`` exists, so it
    cannot see what ``fn`` writes (``state = TrainState.create(params=model.params)`` in ``main``,
    above ``def generate_step(params): model.params = params``)."""
    d = fn
    while d is not None and d.parent is not scope:
        d = d.parent
    if d is None or d.node.lineno <= node.lineno:
        return False
    for loop in scope.of_type(ast.For, ast.While):
        if _inside(node, loop) and _inside(d.node, loop):
            return False
    return True


def _eager_scopes(m: SemanticModel) -> set:
    """The ids of the scopes this module shows running outside every trace: its module level,
    and, transitively, the untraced functions and methods module-level code calls by name
    (``main()``, ``trainer.report()``).  A function nothing here calls may run anywhere --
    inside another module's jitted loss too -- so it is not among them."""
    got = m.__dict__.get("_purity_eager_scopes")
    if got is not None:
        return got
    by_name: Dict[str, List[Function]] = {}
    for f in m.functions:
        if not f.is_module and not f.is_lambda and not (f.contexts or f.under_trace):
            by_name.setdefault(f.name, []).append(f)
    got = {id(m.module)}
    todo = [m.module]
    while todo:
        scope = todo.pop()
        for call in scope.of_type(ast.Call):
            f = call.func
            name = f.id if f.__class__ is ast.Name else f.attr if f.__class__ is ast.Attribute else None
            for callee in by_name.get(name, ()):
                if id(callee) not in got:
                    got.add(id(callee))
                    todo.append(callee)
    m.__dict__["_purity_eager_scopes"] = got
    return got


def _inside(node: ast.AST, stmt: ast.AST) -> bool:
    return any(n is node for n in ast.walk(stmt))
