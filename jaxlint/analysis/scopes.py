"""Scopes: the index walk, :class:`Function` scopes, classes, qualified names.

One walk over the tree (:meth:`ScopeIndex._index`): every function and lambda
becomes a :class:`Function` scope holding its own nodes grouped by type
(:meth:`Function.of_type`); nested function bodies belong to the nested scope,
decorators and defaults to the enclosing one; class bodies are walked in the
enclosing scope and remembered as :class:`ClassInfo` records.  Imports anywhere
fill the :class:`~jaxlint.analysis.names.ImportTable`.
"""
from __future__ import annotations

import ast
import builtins as _b
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from . import knowledge as K
from .statics import is_staticmethod

CERTAIN = "certain"
INFERRED = "inferred"
# the transform names of the inferred contexts a module's methods are seeded with, for the
# module systems that run eagerly by default (an NNX or Equinox module is called like a function;
# a linen module runs only through init/apply, and apply under jit is the rule)
EAGER_MODULE_SEEDS = frozenset({"nnx.Module", "equinox.Module"})

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class TraceContext:
    """Why a function body runs under a transform."""

    __slots__ = ("transform", "confidence", "node", "caller", "description", "untaken", "unstaged")

    def __init__(self, transform: str, confidence: str, node: ast.AST,
                 description: str, caller: Optional["Function"] = None, untaken: tuple = (),
                 unstaged: bool = False):
        self.transform = transform
        self.confidence = confidence
        self.node = node
        self.caller = caller
        self.description = description
        # (a cross-module call) the parameters every call from the other module leaves falsy
        self.untaken = untaken
        # (a cross-module call) every caller behind it is traced only by ``grad``/``vmap``-style
        # transforms applied outside any trace: operations on constants run eagerly there
        self.unstaged = unstaged

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"TraceContext({self.transform!r}, {self.confidence!r}, {self.description!r})"


class ClassInfo:
    __slots__ = ("node", "name", "bases", "methods", "scope", "module_kind", "fields", "setup_attrs")

    def __init__(self, node: ast.ClassDef, scope: "Function"):
        self.node = node
        self.name = node.name
        self.scope = scope
        self.bases: List[str] = []
        self.methods: Dict[str, "Function"] = {}
        self.module_kind: Optional[str] = None   # linen | nnx | equinox | None
        self.fields: Set[str] = set()
        self.setup_attrs: Dict[str, List[ast.expr]] = {}


class Function:
    """A scope: a function, a lambda, or the module itself."""

    __slots__ = (
        "node", "name", "qualname", "parent", "cls", "params", "kwonly", "vararg", "kwarg",
        "param_nodes", "defaults", "nodes", "defs", "children", "contexts", "traced_params",
        "static_params", "locals", "globals_declared", "decorators", "_kinds", "_container_evidence",
        "is_staticmethod", "binding_table", "param_kinds", "param_inits", "_comprehension_loads",
        "param_residuals", "is_module", "is_lambda", "inferred_static", "module_applied_under_trace",
        "module_applied_eagerly",
    )

    def __init__(self, node: ast.AST, name: str, qualname: str, parent: Optional["Function"],
                 cls: Optional[ClassInfo]):
        self.node = node
        self.name = name
        self.qualname = qualname
        self.parent = parent
        self.cls = cls
        self.is_module = node.__class__ is ast.Module    # (asked hundreds of thousands of times)
        # set by the model on the module scope: traced code of this module applies a module it
        # cannot name (``model.apply(params, x)``, ``model(x)`` on a parameter inside a transform),
        # so the module methods seeded as traced may well be
        self.module_applied_under_trace = False
        # (the module node only) a notebook applies its linen modules eagerly only
        self.module_applied_eagerly = False
        self.is_lambda = node.__class__ is ast.Lambda
        self.params: List[str] = []
        self.kwonly: List[str] = []
        self.vararg: Optional[str] = None
        self.kwarg: Optional[str] = None
        self.param_nodes: Dict[str, ast.arg] = {}
        self.defaults: Dict[str, ast.expr] = {}
        self.nodes: Dict[type, list] = {}
        self.defs: Dict[str, "Function"] = {}
        self.children: List["Function"] = []
        self.contexts: List[TraceContext] = []
        self.traced_params: Set[str] = set()
        self.static_params: Set[str] = set()
        # of those, the ones only inferred to hold Python configuration (a module method's
        # ``training: bool``), which a call site passing a proven tracer overrides
        self.inferred_static: Set[str] = set()
        self.locals: Set[str] = set()
        self.globals_declared: Set[str] = set()
        self.decorators: List[ast.expr] = []
        self._kinds: Optional[Dict[str, int]] = None
        self._container_evidence: Optional[Set[str]] = None
        self.is_staticmethod = False
        # kinds that traced call sites pass into each parameter (helpers only);
        # parameters traced by a transform directly are arrays (TRACED | JAX)
        self.param_kinds: Dict[str, int] = {}
        # lax body carries: parameter -> (initial value expression, scope it is evaluated in)
        self.param_inits: Dict[str, Tuple[ast.expr, "Function"]] = {}
        # custom_vjp ``bwd`` rules: residual parameter -> (the tuple display ``fwd``
        # returns as residuals, ``fwd``): Python values in it reach ``bwd`` unchanged
        self.param_residuals: Dict[str, Tuple[ast.Tuple, "Function"]] = {}
        self.binding_table = None    # bindings.BindingTable, built on first use
        # id(Name load) -> the comprehension generator that binds it (built on first use)
        self._comprehension_loads: Optional[Dict[int, ast.comprehension]] = None
        if isinstance(node, _FUNC_TYPES):
            self._read_arguments(node.args)

    # ----------------------------------------------------------- structure
    def _read_arguments(self, args: ast.arguments) -> None:
        positional = list(getattr(args, "posonlyargs", [])) + list(args.args)
        for a in positional:
            self.params.append(a.arg)
            self.param_nodes[a.arg] = a
        for d, a in zip(reversed(args.defaults), reversed(positional)):
            self.defaults[a.arg] = d
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            self.kwonly.append(a.arg)
            self.param_nodes[a.arg] = a
            if d is not None:
                self.defaults[a.arg] = d
        if args.vararg:
            self.vararg = args.vararg.arg
            self.param_nodes[args.vararg.arg] = args.vararg
        if args.kwarg:
            self.kwarg = args.kwarg.arg
            self.param_nodes[args.kwarg.arg] = args.kwarg
        self.locals.update(self.param_nodes)


    @property
    def filtered_only(self) -> bool:
        """Every trace of this function is an Equinox-style filter transform, which traces the
        array leaves of its arguments and keeps everything else static: a parameter is an array
        or a Python value (``eqx.filter_jit(f)(x, axis_spec)``), so not known to be an array."""
        return all(getattr(K.transform_for(c.transform), "kind", None) == "filter" for c in self.contexts)

    @property
    def filter_traced(self) -> bool:
        """Traced by an Equinox-style filter transform and otherwise only by calls from traced
        code or by ``vmap`` (``jax.vmap(partial(f, model, n))``, which maps arrays only): nothing
        applies a transform that makes every argument a tracer (``filtered_only`` is the case
        with no other context)."""
        kinds = [getattr(K.transform_for(c.transform), "kind", None) if c.transform != "call" else "call"
                 for c in self.contexts]
        return "filter" in kinds and all(k in ("filter", "call", "vmap") for k in kinds)

    @property
    def is_method(self) -> bool:
        return self.cls is not None and not self.is_lambda and not self.is_staticmethod

    @property
    def self_name(self) -> Optional[str]:
        if self.is_method and self.params:
            return self.params[0]
        return None

    def all_params(self) -> List[str]:
        out = list(self.params) + list(self.kwonly)
        if self.vararg:
            out.append(self.vararg)
        if self.kwarg:
            out.append(self.kwarg)
        return out

    def of_type(self, *types: type) -> List[ast.AST]:
        """This scope's own nodes of the given types (not those of nested functions)."""
        if len(types) == 1:
            return self.nodes.get(types[0], [])
        out: List[ast.AST] = []
        for t in types:
            out.extend(self.nodes.get(t, ()))
        return out

    def enclosing_method(self) -> Optional["Function"]:
        """The method whose ``self`` is visible here: this function if it is a
        method, else the nearest enclosing one (``None`` in plain functions)."""
        s = self
        while s is not None and not s.is_module:
            if s.cls is not None and not s.is_lambda:
                return s if s.is_method else None
            s = s.parent
        return None

    @property
    def under_trace(self) -> bool:
        """This function or an enclosing one runs under a transform (code in it is traced code)."""
        s = self
        while s is not None:
            if s.contexts:
                return True
            s = s.parent
        return False

    def walk(self) -> Iterator[ast.AST]:
        """Every node of this scope's own body (nested function bodies excluded;
        their decorators and defaults included).  Slower than :meth:`of_type`:
        use it for node types that are not indexed, in traced functions."""
        if self.is_module:
            roots = list(self.node.body)
        elif self.is_lambda:
            roots = [self.node.body]
        else:
            roots = list(self.node.body)
        stack = roots[::-1]
        push, leaves, fields_of = stack.append, _LEAVES, _CHILD_FIELDS
        while stack:
            node = stack.pop()
            yield node
            t = node.__class__
            if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
                args = node.args
                stack.extend(args.defaults)
                stack.extend(d for d in args.kw_defaults if d is not None)
                stack.extend(getattr(node, "decorator_list", []))
                continue
            # (``ast.iter_child_nodes`` inlined, in its order: the fields that can hold a node)
            fields = fields_of.get(t)
            if fields is None:
                fields = _child_fields(t)
            for f in fields:
                v = getattr(node, f, None)
                if v.__class__ is list:
                    for child in v:
                        if child.__class__ not in leaves:
                            push(child)
                elif v.__class__ not in leaves:
                    push(v)

    def comprehension_loads(self) -> Dict[int, ast.comprehension]:
        """The names read inside a comprehension of this scope that its own ``for``
        clauses bind (``k`` in ``[f(k) for k in range(n)]``), by ``id`` of the Name
        node, each with the innermost generator that binds it: such a name is the
        comprehension's own variable, not the function's local of the same name."""
        got = self._comprehension_loads
        if got is not None:
            return got
        got = {}
        comps = self.of_type(ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
        for comp in sorted(comps, key=lambda c: (c.lineno, c.col_offset)):
            gens = comp.generators
            tail = [comp.key, comp.value] if comp.__class__ is ast.DictComp else [comp.elt]
            for i, gen in enumerate(gens):
                names = {n.id for n in ast.walk(gen.target) if n.__class__ is ast.Name}
                if not names:
                    continue
                roots = list(gen.ifs) + tail
                for later in gens[i + 1:]:
                    roots.append(later.iter)
                    roots.extend(later.ifs)
                for root in roots:
                    for n in ast.walk(root):
                        if n.__class__ is ast.Name and n.id in names and n.ctx.__class__ is ast.Load:
                            got[id(n)] = gen
        self._comprehension_loads = got
        return got

    def display(self) -> str:
        if self.is_module:
            return "module"
        if self.is_lambda:
            return "lambda"
        return f"`{self.qualname}`"

    # ------------------------------------------------------------- tracing
    @property
    def is_traced(self) -> bool:
        """This function itself is a traced context (which predicate to use when:
        :mod:`jaxlint.analysis.tracedness`)."""
        return bool(self.contexts)

    @property
    def traced_by_module_seed_only(self) -> bool:
        return self.traced_only_by_seeds(EAGER_MODULE_SEEDS)

    def traced_only_by_seeds(self, seeds: FrozenSet[str]) -> bool:
        """Every trace of this function rests on the guess that a module's method runs under a
        transform (a seed of ``seeds``: the method seeded as traced, or a helper only such
        methods call), with no transform, ``apply`` or call from traced code behind it, and no
        code of this module applying a module under a transform.  NNX and Equinox modules run
        eagerly by default (called like functions), so what such a trace would break is
        unknown (``traced_by_module_seed_only``); so do linen modules a notebook applies only
        with ``init``/``apply``."""
        seen: Set[int] = set()
        top = self
        while top.parent is not None:
            top = top.parent
        if top.module_applied_under_trace:
            return False

        def seed_only(fn: "Function") -> bool:
            if id(fn) in seen:
                return True
            seen.add(id(fn))
            if not fn.contexts:
                return False
            for c in fn.contexts:
                if c.transform in seeds:
                    continue
                if c.transform == "call" and c.caller is not None and seed_only(c.caller):
                    continue
                return False
            return True

        return seed_only(self)

    @property
    def confidence(self) -> Optional[str]:
        if not self.contexts:
            return None
        return CERTAIN if any(c.confidence == CERTAIN for c in self.contexts) else INFERRED

    @property
    def primary_context(self) -> Optional[TraceContext]:
        best = None
        for c in self.contexts:
            if c.confidence == CERTAIN:
                return c
            best = best or c
        return best

    def trace_description(self) -> str:
        """e.g. "`train_step` (jitted with `jax.jit`)"."""
        ctx = self.primary_context
        what = "this lambda" if self.is_lambda else f"`{self.qualname}`"
        if ctx is None:
            return what
        return f"{what} ({ctx.description})"

    def __repr__(self) -> str:  # pragma: no cover
        return f"<Function {self.qualname} traced={self.is_traced}>"


class CallTarget:
    """A callable expression resolved to a function of this module."""

    __slots__ = ("function", "bound_positional", "bound_keywords", "transforms")

    def __init__(self, function: Function, bound_positional: int = 0,
                 bound_keywords: frozenset = frozenset(), transforms: Tuple = ()):
        self.function = function
        self.bound_positional = bound_positional
        self.bound_keywords = bound_keywords
        self.transforms = transforms   # ((Transform, ast.Call), ...) outermost first


class TransformSite:
    """A place where a transform is applied to a function of this module."""

    __slots__ = ("transform", "node", "target", "scope", "is_decorator", "call")

    def __init__(self, transform: K.Transform, node: ast.AST, target: Optional[CallTarget],
                 scope: Function, is_decorator: bool, call: Optional[ast.Call]):
        self.transform = transform
        self.node = node            # the decorator expression or the call
        self.target = target
        self.scope = scope          # where the transform is applied
        self.is_decorator = is_decorator
        self.call = call            # the transform call (None for a bare decorator)


class ScopeIndex:
    """The index walk and the queries on names, scopes and classes (a part of
    :class:`~jaxlint.analysis.model.SemanticModel`)."""

    def _memo(self, attr: str) -> dict:
        """The model's per-function memo table ``attr`` (created on first use; the
        propagation rounds reset some of them by assigning a fresh dict)."""
        d = self.__dict__.get(attr)
        if d is None:
            d = self.__dict__[attr] = {}
        return d

    # ================================================================ index
    def _index(self) -> None:
        """One walk over the tree.  Each scope's own nodes of the types in
        :data:`INDEXED` are grouped by type; nested function bodies are
        walked as their own scope (never twice)."""
        pending: List[Tuple[Function, list, Optional[ClassInfo]]] = [(self.module, list(self.tree.body), None)]
        while pending:
            scope, roots, cls = pending.pop()
            self._index_scope(scope, roots, cls, pending)
        for fn in self.functions:
            fn.locals.difference_update(fn.globals_declared)

    def _index_scope(self, scope: Function, roots: list, cls: Optional[ClassInfo], pending: list) -> None:
        # the hottest loop of the analysis (every node of every module passes here once):
        # names are handled where they are met instead of being pushed, and the few node
        # types that need more than their children visited are tested with one set lookup
        fields_of = _CHILD_FIELDS
        indexed = INDEXED
        special = _SPECIAL
        leaves = _LEAVES
        nodes = scope.nodes
        locals_ = scope.locals
        add_local = locals_.add
        terminals = K.transform_terminals()
        transform_calls = self._transform_calls
        Name, Call, Attribute, Store = ast.Name, ast.Call, ast.Attribute, ast.Store
        # class bodies are walked in the enclosing scope but remember their class
        stack = list(reversed(roots))
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            t = node.__class__
            if t is Name:
                if node.ctx.__class__ is Store:
                    add_local(node.id)
                continue
            if t in indexed:
                lst = nodes.get(t)
                if lst is None:
                    nodes[t] = [node]
                else:
                    lst.append(node)
            if t is Call:
                f = node.func
                ft = f.__class__
                if (ft is Attribute and (f.attr in terminals or f.attr == "partial")) or \
                        (ft is Name and (f.id in terminals or f.id == "partial")):
                    transform_calls.append((node, scope))
            elif t is Attribute:
                v = node.value
                if v.__class__ is not Name and v.__class__ not in leaves:
                    push(v)
                continue
            elif t in special:
                if t is _ClassExit or t is _ClassEnter:
                    cls = node.cls
                elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
                    fn = self._new_function(node, scope, cls)
                    self.function_of_node[id(node)] = fn
                    args = node.args
                    extend(args.defaults)
                    extend(d for d in args.kw_defaults if d is not None)
                    if t is not ast.Lambda:
                        extend(node.decorator_list)
                        extend(self._arg_annotations(args))
                        if node.returns is not None:
                            push(node.returns)
                        add_local(node.name)
                        pending.append((fn, list(node.body), None))
                    else:
                        pending.append((fn, [node.body], None))
                elif t is ast.ClassDef:
                    info = ClassInfo(node, scope)
                    self.class_list.append(info)
                    if scope.is_module:
                        self.classes[node.name] = info
                    add_local(node.name)
                    # after the body, restore the outer class
                    push(_ClassExit(cls))
                    extend(reversed(node.body))
                    push(_ClassEnter(info))
                    extend(node.bases)
                    extend(kw.value for kw in node.keywords)
                    extend(node.decorator_list)
                elif t is ast.Import or t is ast.ImportFrom:
                    self.imports.add(node)
                    for a in node.names:
                        add_local((a.asname or a.name).split(".")[0])
                else:   # Global, Nonlocal
                    scope.globals_declared.update(node.names)
                continue
            fields = fields_of.get(t)
            if fields is None:
                fields = _child_fields(t)
            for field in fields:
                v = getattr(node, field, None)
                vt = v.__class__
                if vt is list:
                    for x in reversed(v):
                        xt = x.__class__
                        if xt is Name:
                            if x.ctx.__class__ is Store:
                                add_local(x.id)
                        elif xt is Attribute:
                            # (an attribute chain is not indexed: only what it starts from is
                            # visited, as if the chain had been pushed and popped)
                            x = x.value
                            while x.__class__ is Attribute:
                                x = x.value
                            if x.__class__ is not Name and x.__class__ not in leaves:
                                push(x)
                        elif xt not in leaves:
                            push(x)
                elif vt is Name:
                    if v.ctx.__class__ is Store:
                        add_local(v.id)
                elif vt is Attribute:
                    v = v.value
                    while v.__class__ is Attribute:
                        v = v.value
                    if v.__class__ is not Name and v.__class__ not in leaves:
                        push(v)
                elif vt not in leaves:
                    push(v)

    @staticmethod
    def _arg_annotations(args: ast.arguments) -> Iterator[ast.expr]:
        for a in list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs):
            if a.annotation is not None:
                yield a.annotation
        for a in (args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                yield a.annotation

    def _new_function(self, node, scope: Function, cls: Optional[ClassInfo]) -> Function:
        if isinstance(node, ast.Lambda):
            name = "<lambda>"
        else:
            name = node.name
        if cls is not None:
            qual = f"{cls.name}.{name}"
            if not scope.is_module:
                qual = f"{scope.qualname}.<locals>.{qual}"
        elif scope.is_module:
            qual = name
        else:
            qual = f"{scope.qualname}.{name}" if not isinstance(node, ast.Lambda) else f"{scope.qualname}.<lambda>"
        fn = Function(node, name, qual, scope, cls)
        if cls is not None and not isinstance(node, ast.Lambda):
            cls.methods[name] = fn
        elif not isinstance(node, ast.Lambda):
            scope.defs[name] = fn
        scope.children.append(fn)
        self.functions.append(fn)
        if not isinstance(node, ast.Lambda):
            fn.decorators = list(node.decorator_list)
            fn.is_staticmethod = is_staticmethod(node)
        return fn

    # ======================================================== name queries
    def qualname(self, expr: Optional[ast.AST], scope: Optional[Function] = None) -> Optional[str]:
        """Qualified name of a name/attribute chain, resolved through imports.

        ``jnp.sum`` -> ``jax.numpy.sum`` when ``import jax.numpy as jnp``.
        Returns None for anything that is not an imported name (a local
        variable, a call result, ...).  Builtins resolve to their own name.
        """
        if expr is None:
            return None
        key = (expr, scope)     # (nodes and scopes hash by identity; the key keeps them alive)
        memo = self.__dict__.get("_qualnames")
        if memo is None:
            memo = self._memo("_qualnames")
        try:
            got = memo.get(key, _MISSING)
        except TypeError:       # (not a node)
            return self._qualname(expr, scope)
        if got is _MISSING:
            got = memo[key] = self._qualname(expr, scope)
        return got

    def _qualname(self, expr: ast.AST, scope: Optional[Function]) -> Optional[str]:
        parts: List[str] = []
        node = expr
        while node.__class__ is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if node.__class__ is not ast.Name:
            return None
        if scope is not None and self._shadowed(node.id, scope):
            return None
        base = self.imports.resolve(node.id)
        if base is None:
            if parts:
                return None
            if node.id in _BUILTINS and not self._module_defines(node.id):
                return node.id
            return None
        if parts:
            base = base + "." + ".".join(reversed(parts))
        return K.canonical(base)

    def _shadowed(self, name: str, scope: Function) -> bool:
        """A parameter named like an import (``def f(jnp): ...``) hides the import."""
        s = self.resolve_scope(name, scope)
        return s is not None and not s.is_module and name in s.param_nodes

    def _module_defines(self, name: str) -> bool:
        return name in self.module.defs or name in self.classes

    def call_qualname(self, call: ast.Call, scope: Optional[Function] = None) -> Optional[str]:
        return self.qualname(call.func, scope)

    def is_call_to(self, call: ast.AST, *names: str, scope: Optional[Function] = None) -> bool:
        return isinstance(call, ast.Call) and self.qualname(call.func, scope) in names

    def scope_of(self, node: ast.AST) -> Optional[Function]:
        """The function (or module) scope whose body contains ``node``."""
        idx = self.scope_of_node
        if not idx:
            for fn in self.functions:
                for lst in fn.nodes.values():
                    for n in lst:
                        idx[id(n)] = fn
        return idx.get(id(node))

    def function_for_def(self, node: ast.AST) -> Optional[Function]:
        return self.function_of_node.get(id(node))

    def traced_functions(self) -> List[Function]:
        return [f for f in self.functions if f.contexts]

    # ======================================================= class models
    def _classify_classes(self) -> None:
        changed = True
        for info in self.class_list:
            info.bases = [self.qualname(b) or (b.id if isinstance(b, ast.Name) else "") for b in info.node.bases]
        while changed:
            changed = False
            for info in self.class_list:
                if info.module_kind:
                    continue
                for b in info.bases:
                    kind = K.MODULE_BASES.get(b)
                    if kind is None and b in self.classes:
                        kind = self.classes[b].module_kind
                    if kind:
                        info.module_kind = kind
                        changed = True
                        break
        for info in self.class_list:
            for stmt in info.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    info.fields.add(stmt.target.id)
                    if isinstance(stmt.value, ast.Call) and self._is_static_field(stmt.value):
                        self.static_fields.add(stmt.target.id)
                elif isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name):
                            info.fields.add(t.id)
            setup = info.methods.get("setup") if info.module_kind == "linen" else info.methods.get("__init__")
            if setup is not None:
                selfname = setup.self_name
                for node in setup.of_type(ast.Assign):
                    for t in node.targets:
                        if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == selfname):
                            info.setup_attrs.setdefault(t.attr, []).append(node.value)

    def _is_static_field(self, call: ast.Call) -> bool:
        """``flax.struct.field(pytree_node=False)``, ``eqx.field(static=True)``,
        ``dataclasses.field(metadata={"static": True})``: a pytree's static metadata."""
        q = self.qualname(call.func)
        if q not in ("flax.struct.field", "equinox.field", "dataclasses.field", "chex.field"):
            return False
        for kw in call.keywords:
            v = kw.value
            if kw.arg == "pytree_node" and isinstance(v, ast.Constant) and v.value is False:
                return True
            if kw.arg == "static" and isinstance(v, ast.Constant) and v.value is True:
                return True
            if kw.arg == "metadata" and isinstance(v, ast.Dict):
                for key, val in zip(v.keys, v.values):
                    if isinstance(key, ast.Constant) and key.value in ("static", "pytree_node") and \
                            isinstance(val, ast.Constant) and val.value is (key.value == "static"):
                        return True
        return False

    def class_method(self, info: ClassInfo, name: str, _seen=None) -> Optional[Function]:
        fn = info.methods.get(name)
        if fn is not None:
            return fn
        _seen = _seen or set()
        _seen.add(info.name)
        for b in info.bases:
            base = self.classes.get(b)
            if base is not None and base.name not in _seen:
                fn = self.class_method(base, name, _seen)
                if fn is not None:
                    return fn
        return None


_BUILTINS = frozenset(n for n in dir(_b) if not n.startswith("_"))
_MISSING = object()

# node types grouped per scope by the index (``Function.of_type``); others are
# reachable through ``Function.walk()``
INDEXED = frozenset({
    ast.Call, ast.If, ast.While, ast.Assert, ast.IfExp, ast.comprehension, ast.BoolOp, ast.UnaryOp,
    ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.withitem,
    ast.Subscript, ast.Return, ast.Delete, ast.Expr, ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.JoinedStr, ast.Yield,
    ast.YieldFrom, ast.Try, ast.With, ast.AsyncWith, ast.Raise, ast.Starred, ast.Global, ast.Nonlocal,
    ast.Import, ast.ImportFrom,
})

# nodes with nothing below them worth visiting (contexts, operators, constants)
_LEAVES = frozenset({
    ast.Load, ast.Store, ast.Del, ast.Constant,
    ast.Add, ast.Sub, ast.Mult, ast.MatMult, ast.Div, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
    ast.BitOr, ast.BitXor, ast.BitAnd, ast.FloorDiv, ast.And, ast.Or, ast.Invert, ast.Not, ast.UAdd,
    ast.USub, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    # plain Python values stored in node fields (names, flags, match-statement constants)
    str, int, bool, float, complex, bytes, type(None), type(Ellipsis),
})

# the node types the index walk does more with than visit their children
_SPECIAL = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Import,
                      ast.ImportFrom, ast.Global, ast.Nonlocal})

_SKIP_FIELDS = frozenset({"ctx", "op", "ops", "type_comment", "kind", "id", "attr", "arg", "name",
                          "module", "asname", "level", "simple", "is_async", "conversion", "type_ignores"})
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _child_fields(t: type) -> Tuple[str, ...]:
    fields = tuple(f for f in t._fields if f not in _SKIP_FIELDS)
    _CHILD_FIELDS[t] = fields
    return fields


class _ClassEnter:
    __slots__ = ("cls",)

    def __init__(self, cls):
        self.cls = cls


class _ClassExit(_ClassEnter):
    __slots__ = ()


_SPECIAL = _SPECIAL | {_ClassEnter, _ClassExit}
