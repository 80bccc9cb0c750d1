"""The semantic model: which code runs under which JAX transform, and which
values are traced.

Built in three steps over the standard library's ``ast``:

1. **Index** (one walk): every function/lambda becomes a :class:`Function`
   scope holding its own nodes grouped by type (nested function bodies belong
   to the nested scope); classes, imports and module-level bindings are
   recorded.
2. **Transforms**: every decorator and call that applies a transform
   (``jax.jit``, ``jax.vmap``, ``lax.scan`` bodies, ...) marks its target
   function as a traced context with ``certain`` confidence and records which
   parameters are static.  Flax/NNX/Equinox module methods are traced
   contexts with ``inferred`` confidence.
3. **Propagation** (fixpoint): inside each traced function the value kinds
   (traced / JAX array / NumPy array / container) of local names are computed;
   calls from a traced function into functions of the same module make the
   callee a traced context (``inferred``), and a callee's parameter is traced
   only when some traced call site passes a traced value into it.

Rules query the model (:meth:`SemanticModel.qualname`,
:meth:`SemanticModel.kind`, :meth:`Function.is_traced`, ...); they never
re-derive scopes or tracedness themselves.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

from . import knowledge as K
from .names import ImportTable

# value kinds: a small bit set
TRACED = 1      # a tracer while the enclosing function is being traced
JAX = 2         # a JAX array (concrete or traced)
NUMPY = 4       # a NumPy array
CONTAINER = 8   # a Python list / tuple / dict / set (possibly holding arrays)
ARRAYISH = TRACED | JAX | NUMPY

CERTAIN = "certain"
INFERRED = "inferred"

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMP_TYPES = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class TraceContext:
    """Why a function body runs under a transform."""

    __slots__ = ("transform", "confidence", "node", "caller", "description")

    def __init__(self, transform: str, confidence: str, node: ast.AST,
                 description: str, caller: Optional["Function"] = None):
        self.transform = transform
        self.confidence = confidence
        self.node = node
        self.caller = caller
        self.description = description

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
        "is_staticmethod", "aliases", "param_kinds", "param_inits",
    )

    def __init__(self, node: ast.AST, name: str, qualname: str, parent: Optional["Function"],
                 cls: Optional[ClassInfo]):
        self.node = node
        self.name = name
        self.qualname = qualname
        self.parent = parent
        self.cls = cls
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
        self.aliases: Optional[Dict[str, ast.expr]] = None
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
    def is_module(self) -> bool:
        return isinstance(self.node, ast.Module)

    @property
    def is_lambda(self) -> bool:
        return isinstance(self.node, ast.Lambda)

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
        """This function or an enclosing one runs under a transform."""
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
        while stack:
            node = stack.pop()
            yield node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                stack.extend(args.defaults)
                stack.extend(d for d in args.kw_defaults if d is not None)
                stack.extend(getattr(node, "decorator_list", []))
                continue
            for child in ast.iter_child_nodes(node):
                if child.__class__ not in _LEAVES:
                    stack.append(child)

    def display(self) -> str:
        if self.is_module:
            return "module"
        if self.is_lambda:
            return "lambda"
        return f"`{self.qualname}`"

    # ------------------------------------------------------------- tracing
    @property
    def is_traced(self) -> bool:
        return bool(self.contexts)

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


class SemanticModel:
    def __init__(self, tree: ast.Module, source=None):
        self.tree = tree
        self.source = source
        self.imports = ImportTable()
        self.module = Function(tree, "<module>", "<module>", None, None)
        self.functions: List[Function] = [self.module]
        self.classes: Dict[str, ClassInfo] = {}
        self.class_list: List[ClassInfo] = []
        self.scope_of_node: Dict[int, Function] = {}
        self.function_of_node: Dict[int, Function] = {}
        self.transform_sites: List[TransformSite] = []
        self._transform_calls: List[Tuple[ast.Call, Function]] = []
        self._loggers: Optional[Set[str]] = None
        self._return_kinds: Dict[int, int] = {}
        self._attrs_in_progress: Set[Tuple[int, str]] = set()
        # per-model results of topic analyses (analysis/keys.py, calls.py, ...):
        # they live and die with the model.  (A module-level WeakKeyDictionary
        # whose values reference the model would keep every model alive.)
        self.cache: Dict[str, object] = {}
        # attribute names declared as static pytree fields somewhere in this module
        self.static_fields: Set[str] = set()
        self._index()
        self.mentions_jax = self.imports.mentions_any(("jax", "flax", "equinox", "optax"))
        if self.mentions_jax:
            self._classify_classes()
            self._find_transforms()
            self._seed_modules()
            self._propagate()
            self._container_arguments()

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
        fields_of = _CHILD_FIELDS
        indexed = INDEXED
        nodes = scope.nodes
        locals_ = scope.locals
        terminals = K.transform_terminals()
        transform_calls = self._transform_calls
        Name, Call, Attribute, Store = ast.Name, ast.Call, ast.Attribute, ast.Store
        # class bodies are walked in the enclosing scope but remember their class
        stack = list(reversed(roots))
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            if node.__class__ is _ClassExit:
                cls = node.cls
                continue
            t = node.__class__
            if t is Name:
                if node.ctx.__class__ is Store:
                    locals_.add(node.id)
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
                    locals_.add(node.name)
                    pending.append((fn, list(node.body), None))
                else:
                    pending.append((fn, [node.body], None))
                continue
            elif t is ast.ClassDef:
                info = ClassInfo(node, scope)
                self.class_list.append(info)
                if scope.is_module:
                    self.classes[node.name] = info
                locals_.add(node.name)
                # after the body, restore the outer class
                push(_ClassExit(cls))
                stack.extend(reversed(node.body))
                push(_ClassEnter(info))
                extend(node.bases)
                extend(kw.value for kw in node.keywords)
                extend(node.decorator_list)
                continue
            elif t is _ClassEnter:
                cls = node.cls
                continue
            elif t is ast.Import or t is ast.ImportFrom:
                self.imports.add(node)
                for a in node.names:
                    locals_.add((a.asname or a.name).split(".")[0])
                continue
            elif t is ast.Global or t is ast.Nonlocal:
                scope.globals_declared.update(node.names)
                continue
            fields = fields_of.get(t)
            if fields is None:
                fields = _child_fields(t)
            for field in fields:
                v = getattr(node, field, None)
                if v is None:
                    continue
                if v.__class__ is list:
                    for x in reversed(v):
                        if x is not None and x.__class__ not in _LEAVES:
                            push(x)
                elif v.__class__ not in _LEAVES:
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
            for d in node.decorator_list:
                if isinstance(d, ast.Name) and d.id == "staticmethod":
                    fn.is_staticmethod = True
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
        s = scope
        while s is not None and not s.is_module:
            if name in s.locals and name in s.param_nodes:
                return True
            s = s.parent
        return False

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

    # ===================================================== callables
    def lookup_function(self, name: str, scope: Function) -> Optional[Function]:
        """A def named ``name`` visible from ``scope`` (lexical lookup)."""
        s = scope
        while s is not None:
            fn = s.defs.get(name)
            if fn is not None:
                return fn
            s = s.parent
        return None

    def resolve_callable(self, expr: ast.AST, scope: Function, _depth: int = 0) -> Optional[CallTarget]:
        """Resolve an expression used as a callable to a function of this module."""
        if _depth > 8 or expr is None:
            return None
        t = expr.__class__
        if t is ast.Lambda:
            fn = self.function_of_node.get(id(expr))
            return CallTarget(fn) if fn else None
        if t is ast.Name:
            fn = self.lookup_function(expr.id, scope)
            if fn is not None:
                return CallTarget(fn, 0)
            alias = self._alias(expr.id, scope)
            if alias is not None:
                return self.resolve_callable(alias, scope, _depth + 1)
            return None
        if t is ast.Attribute:
            base = expr.value
            if isinstance(base, ast.Name):
                s = scope
                while s is not None and not s.is_module and s.cls is None:
                    s = s.parent
                if s is not None and s.cls is not None and base.id == s.self_name:
                    fn = self.class_method(s.cls, expr.attr)
                    if fn is not None:
                        return CallTarget(fn, 0 if fn.is_staticmethod else 1)
                info = self.classes.get(base.id)
                if info is not None:
                    fn = self.class_method(info, expr.attr)
                    if fn is not None:
                        return CallTarget(fn, 0)
            return None
        if t is ast.Call:
            q = self.qualname(expr.func, scope)
            if q in K.PARTIAL and expr.args:
                inner = self.resolve_callable(expr.args[0], scope, _depth + 1)
                if inner is None:
                    return None
                if any(isinstance(a, ast.Starred) for a in expr.args[1:]):
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
                if fun is None:
                    return None
                inner = self.resolve_callable(fun, scope, _depth + 1)
                if inner is None:
                    return None
                return CallTarget(inner.function, inner.bound_positional, inner.bound_keywords,
                                  ((tr, expr),) + inner.transforms)
            if q is None:
                # make_step(config): a local factory that returns one of its nested functions
                factory = self.resolve_callable(expr.func, scope, _depth + 1)
                if factory is not None:
                    made = self._factory_product(factory.function)
                    if made is not None:
                        return CallTarget(made)
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

    def _alias(self, name: str, scope: Function) -> Optional[ast.expr]:
        """``name = <callable expression>`` bound once in an enclosing scope."""
        s = scope
        while s is not None:
            if name in s.locals or s.is_module:
                a = self._aliases_of(s).get(name)
                if a is not None:
                    return a
                if name in s.locals:
                    return None
            s = s.parent
        return None

    def _aliases_of(self, scope: Function) -> Dict[str, ast.expr]:
        if scope.aliases is None:
            counts: Dict[str, int] = {}
            found: Dict[str, ast.expr] = {}
            for node in scope.of_type(ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        counts[t.id] = counts.get(t.id, 0) + 1
                        if isinstance(node.value, (ast.Call, ast.Name, ast.Attribute, ast.Lambda)):
                            found[t.id] = node.value
            scope.aliases = {k: v for k, v in found.items() if counts.get(k) == 1}
        return scope.aliases

    @staticmethod
    def transform_function_arg(call: Optional[ast.Call], tr: K.Transform) -> Optional[ast.expr]:
        """The (first) function argument of a transform call: ``f`` in ``jax.jit(f, ...)``."""
        if call is None:
            return None
        return SemanticModel._transform_fun_arg(call, tr)

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
                for p in params[i:]:
                    pairs.append((p, a.value))
                if fn.vararg:
                    pairs.append((fn.vararg, a.value))
                break
            if i < len(params):
                pairs.append((params[i], a))
            elif fn.vararg:
                pairs.append((fn.vararg, a))
        for kw in call.keywords:
            if kw.arg is None:
                for p in fn.params + fn.kwonly:
                    pairs.append((p, kw.value))
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
            for dec in fn.decorators:
                self._apply_decorator(dec, fn)
        # calls (anywhere, including module level and class bodies)
        for call, scope in self._transform_calls:
            q = self.qualname(call.func, scope)
            tr = K.transform_for(q)
            if tr is None:
                continue
            for fun in self._transform_funs(call, tr):
                target = self.resolve_callable(fun, scope)
                site = TransformSite(tr, call, target, scope, False, call)
                self.transform_sites.append(site)
                if target is not None:
                    self._mark(target, tr, call, call, scope)
        # custom_jvp/vjp rules: f.defjvp(rule) / f.defvjp(fwd, bwd)
        self._custom_rules()

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

    def _custom_rules(self) -> None:
        """Rules of a ``custom_jvp``/``custom_vjp`` function run traced.

        ``f.defvjp(fwd, bwd)``: ``fwd`` takes the primal's arguments (its
        ``nondiff_argnums`` stay static); ``bwd`` and ``@f.defjvp`` rules take
        the non-differentiable arguments first, then traced values.
        """
        custom: Dict[int, List[int]] = {}
        for site in self.transform_sites:
            if site.target is not None and site.transform.name in ("jax.custom_jvp", "jax.custom_vjp"):
                nums, names = self.static_spec(site.transform, site.call)
                primal = site.target.function
                nums = list(nums) + [primal.params.index(n) for n in names if n in primal.params]
                custom[id(primal)] = sorted(set(nums))
        if not custom:
            return

        def mark(rule: Function, node: ast.AST, nondiff: List[int], leading: bool) -> None:
            params = rule.params
            if leading:
                static = set(params[:len(nondiff)])
            else:
                static = {params[i] for i in nondiff if -len(params) <= i < len(params)}
            traced = set(rule.all_params()) - static
            self._add_context(rule, TraceContext("jax.custom_vjp", CERTAIN, node, "a custom derivative rule"),
                              traced, static)

        for fn in self.functions:
            for call in fn.of_type(ast.Call):
                f = call.func
                if isinstance(f, ast.Attribute) and f.attr in ("defjvp", "defvjp", "defjvps"):
                    base = self.resolve_callable(f.value, fn)
                    if base is None or id(base.function) not in custom:
                        continue
                    nondiff = custom[id(base.function)]
                    for i, a in enumerate(call.args[:2]):
                        tgt = self.resolve_callable(a, fn)
                        if tgt is not None:
                            mark(tgt.function, call, nondiff, leading=(f.attr != "defvjp" or i == 1))
            for dec_fn in fn.children:
                for d in dec_fn.decorators:
                    if isinstance(d, ast.Attribute) and d.attr in ("defjvp", "defvjp"):
                        base = self.resolve_callable(d.value, fn)
                        if base is not None and id(base.function) in custom:
                            mark(dec_fn, d, custom[id(base.function)], leading=True)

    @staticmethod
    def _literal_ints(node: Optional[ast.expr]) -> Optional[List[int]]:
        if node is None:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return [node.value]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            v = node.operand.value
            return [-v] if isinstance(v, int) else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
                and 1 <= len(node.args) <= 3 and not node.keywords:
            bounds = [SemanticModel._literal_ints(a) for a in node.args]
            if all(b is not None and len(b) == 1 for b in bounds):
                return list(range(*[b[0] for b in bounds]))
            return None
        if isinstance(node, (ast.Tuple, ast.List)):
            out: List[int] = []
            for e in node.elts:
                sub = SemanticModel._literal_ints(e)
                if sub is None or len(sub) != 1:
                    return None
                out.extend(sub)
            return out
        return None

    @staticmethod
    def _literal_strs(node: Optional[ast.expr]) -> Optional[List[str]]:
        if node is None:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out.append(e.value)
                else:
                    return None
            return out
        return None

    # public names for rules that read literal argnums/argnames themselves
    literal_ints = _literal_ints
    literal_strs = _literal_strs

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

    def _mark(self, target: CallTarget, tr: K.Transform, node: ast.AST, call: Optional[ast.Call],
              scope: Function) -> None:
        """Mark ``target`` as traced by transform ``tr`` applied at ``node``."""
        fn = target.function
        params = fn.params[target.bound_positional:]
        static: Set[str] = set(fn.params[:target.bound_positional]) | set(target.bound_keywords)
        nums, names = self.static_spec(tr, call)
        for i in nums:
            if -len(params) <= i < len(params):
                static.add(params[i])
        static.update(n for n in names if n in fn.param_nodes)
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
        traced: Set[str]
        if tr.kind == "grad" and call is not None and self._kw(call, "argnums") is not None:
            idx = self._literal_ints(self._kw(call, "argnums"))
            traced = {params[i] for i in (idx or []) if -len(params) <= i < len(params)} if idx is not None \
                else set(candidates)
        elif tr.kind == "grad":
            traced = set(params[:1]) - static
        elif tr.kind == "vmap" and call is not None and self._kw(call, "in_axes") is not None:
            axes = self._kw(call, "in_axes")
            if isinstance(axes, (ast.Tuple, ast.List)):
                traced = {p for p, ax in zip(params, axes.elts)
                          if not (isinstance(ax, ast.Constant) and ax.value is None)}
            else:
                traced = set(candidates)
        elif tr.kind == "filter":
            traced = {p for p in candidates if not self._is_config_param(fn, p)}
        elif tr.kind == "body":
            self._record_carry_init(fn, params, tr, call, scope)
            arity = self._body_arity(tr, call)
            if arity is None:
                traced = set(candidates)
            else:
                traced = set(params[:arity]) - static
                # parameters the primitive never passes keep their (static) defaults
                static |= {p for p in params[arity:] if p in fn.defaults}
        else:
            traced = set(candidates)
        traced -= static
        desc = self._describe_transform(tr, node, call)
        ctx = TraceContext(tr.name, CERTAIN, node, desc)
        # nested transforms (jax.jit(jax.grad(f))): the outer one traces everything
        for outer, outer_call in target.transforms:
            if outer.kind in ("jit", "trace", "pmap", "body", "filter"):
                traced |= set(candidates) - static
        self._add_context(fn, ctx, traced, static)

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

    def _carry_elements(self, fn: Function, name: str, n: int) -> Optional[List[int]]:
        """Kinds of the elements of a lax carry ``name`` whose initial value is a literal
        tuple of ``n`` items: each element is traced, and an array if its initial value is."""
        got = fn.param_inits.get(name)
        if got is None or name not in fn.traced_params:
            return None
        init, scope = got
        if not isinstance(init, (ast.Tuple, ast.List)) or len(init.elts) != n \
                or any(isinstance(e, ast.Starred) for e in init.elts):
            return None
        out = []
        for e in init.elts:
            k = self.kind(e, scope)
            if k & CONTAINER and not k & ARRAYISH:
                out.append(TRACED | CONTAINER)
            elif k & (JAX | NUMPY | TRACED):
                out.append(TRACED | JAX)
            else:
                out.append(TRACED)
        return out

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
                     static: Optional[Set[str]] = None) -> bool:
        changed = False
        if not fn.contexts or (ctx.confidence == CERTAIN and fn.confidence != CERTAIN):
            changed = True
        if not any(c.node is ctx.node and c.transform == ctx.transform for c in fn.contexts):
            fn.contexts.append(ctx)
        if static:
            fn.static_params |= static
        new = traced - fn.traced_params - fn.static_params
        if new:
            fn.traced_params |= new
            changed = True
        return changed

    def _is_config_param(self, fn: Function, p: str) -> bool:
        """A parameter that carries Python configuration rather than arrays:
        annotated with a scalar type (``bool``, ``int | None``, ``Optional[str]``,
        ``Literal[...]``) or defaulting to a bool/str literal."""
        a = fn.param_nodes.get(p)
        if a is not None and a.annotation is not None:
            ann = a.annotation
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                try:
                    ann = ast.parse(ann.value, mode="eval").body
                except SyntaxError:
                    ann = None
            if ann is not None:
                names = set()
                for n in ast.walk(ann):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
                    elif isinstance(n, ast.Attribute):
                        names.add(n.attr)
                if "Literal" in names:
                    return True
                if names & K.SCALAR_ANNOTATIONS and not names & {"Array", "ndarray", "ArrayLike", "Any"}:
                    return True
        d = fn.defaults.get(p)
        if isinstance(d, ast.Constant) and (isinstance(d.value, (bool, str))):
            return True
        return False

    def _seed_modules(self) -> None:
        for info in self.class_list:
            if not info.module_kind:
                continue
            for name, fn in info.methods.items():
                if fn.is_staticmethod:
                    continue
                traced_method = False
                if info.module_kind == "linen":
                    if name in K.LINEN_TRACED_METHODS:
                        traced_method = True
                    elif any(self.qualname(d, fn.parent) == K.LINEN_COMPACT for d in fn.decorators):
                        traced_method = True
                elif name == "__call__":
                    traced_method = True
                if not traced_method:
                    continue
                kind = {"linen": "Flax linen", "nnx": "Flax NNX", "equinox": "Equinox"}[info.module_kind]
                ctx = TraceContext(f"{info.module_kind}.Module", INFERRED, fn.node,
                                   f"a {kind} `Module` method, traced by `init`/`apply` under a transform")
                params = [p for p in fn.all_params() if p != fn.self_name]
                traced = {p for p in params if not self._is_config_param(fn, p)}
                static = set(params) - traced
                self._add_context(fn, ctx, traced, static)

    # ======================================================== propagation
    @staticmethod
    def _directly_traced(fn: Function) -> Set[str]:
        """Parameters a transform traces itself (not through a call site)."""
        if not any(c.transform != "call" for c in fn.contexts):
            return set()
        return fn.traced_params - set(fn.param_kinds)

    def _propagate(self) -> None:
        for _round in range(20):
            changed = False
            for fn in self.functions:
                fn._kinds = None
            self._return_kinds.clear()
            for fn in list(self.functions):
                if not fn.contexts:
                    continue
                if self._propagate_from(fn):
                    changed = True
            if not changed:
                break
        for fn in self.functions:
            fn._kinds = None
        self._return_kinds.clear()

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
            for fn in self.functions:
                fn._kinds = None
            self._return_kinds.clear()

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
                            traced = any(self.kind(a, fn) & TRACED for a in rest)
                            params = target.function.params[target.bound_positional:]
                            tp = set(params) if traced else set()
                            if self._add_context(target.function, TraceContext(
                                    "call", INFERRED, call, f"called from {fn.display()} via `{q}`", fn), tp):
                                changed = True
                        continue
                    if q in K.TRANSFORMS or q in K.PARTIAL:
                        continue
            target = self.resolve_callable(func, fn)
            if target is None:
                continue
            callee = target.function
            if callee is fn:
                continue
            pairs, _ = self.bind_arguments(target, call)
            traced = set()
            direct = self._directly_traced(callee)
            for p, a in pairs:
                k = self.kind(a, fn)
                if k & TRACED:
                    traced.add(p)
                    if p not in direct:
                        old = callee.param_kinds.get(p, 0)
                        new = old | (k & (TRACED | JAX | NUMPY | CONTAINER))
                        if new != old:
                            callee.param_kinds[p] = new
                            changed = True
            if target.transforms:
                desc = f"called from {fn.display()}"
            else:
                desc = f"called from {fn.display()} (line {call.lineno})"
            if self._add_context(callee, TraceContext("call", INFERRED, call, desc, fn), traced):
                changed = True
        return changed

    # ============================================================ values
    def kinds(self, fn: Function) -> Dict[str, int]:
        """Value kinds of the local names of ``fn`` (flow-insensitive)."""
        if fn._kinds is not None:
            return fn._kinds
        kinds: Dict[str, int] = {}
        fn._kinds = kinds   # guards recursion through closures
        evidence = self.container_evidence(fn)
        traced_ctx = bool(fn.contexts)
        for p in fn.all_params():
            k = 0
            if traced_ctx and p in fn.traced_params:
                k |= fn.param_kinds.get(p, TRACED | JAX)
            ann = fn.param_nodes[p].annotation
            if ann is not None:
                aq = self.qualname(ann if not isinstance(ann, ast.Subscript) else ann.value, fn.parent)
                if aq in K.ARRAY_ANNOTATIONS:
                    k |= JAX
                elif aq in K.CONTAINER_ANNOTATIONS:
                    k |= CONTAINER
            if p == fn.vararg or p == fn.kwarg or p in evidence:
                k |= CONTAINER
            if k:
                kinds[p] = k
        bindings = self._bindings(fn)
        for _ in range(12):
            changed = False
            for target, value, mode in bindings:
                k = self._binding_kind(value, mode, fn)
                if self._assign(target, k, kinds, fn, value, mode):
                    changed = True
            if not changed:
                break
        for name in evidence:
            if name in kinds:
                kinds[name] |= CONTAINER
        return kinds

    def container_evidence(self, fn: Function) -> Set[str]:
        """Names of ``fn`` used like a container: ``.append``, ``.items()``, ``x["key"]``."""
        if fn._container_evidence is not None:
            return fn._container_evidence
        ev: Set[str] = set()
        for call in fn.of_type(ast.Call):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr in K.CONTAINER_METHODS and isinstance(f.value, ast.Name):
                if f.attr == "get" and not call.args:
                    continue
                ev.add(f.value.id)
        # dictionary keys: ``for k, v in d.items()`` / ``for k in d.keys()``
        keys: Set[str] = set()
        iterated: Set[Tuple[str, str]] = set()    # (container, loop variable): for k in d
        for loop in fn.of_type(ast.For, ast.comprehension):
            it, tgt = loop.iter, loop.target
            if isinstance(it, ast.Name) and isinstance(tgt, ast.Name):
                iterated.add((it.id, tgt.id))
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
                if it.func.attr == "items" and isinstance(tgt, ast.Tuple) and tgt.elts \
                        and isinstance(tgt.elts[0], ast.Name):
                    keys.add(tgt.elts[0].id)
                elif it.func.attr == "keys" and isinstance(tgt, ast.Name):
                    keys.add(tgt.id)
        for sub in fn.of_type(ast.Subscript):
            if not isinstance(sub.value, ast.Name):
                continue
            sl = sub.slice
            if (isinstance(sl, ast.Constant) and isinstance(sl.value, str)) or \
                    (isinstance(sl, ast.Name) and (sl.id in keys or (sub.value.id, sl.id) in iterated)):
                # d["w"], d[k] for k in d.keys()/d.items(), d[k] for k in d: a mapping
                ev.add(sub.value.id)
        fn._container_evidence = ev
        return ev

    def _bindings(self, fn: Function) -> List[Tuple[ast.expr, ast.AST, str]]:
        out: List[Tuple[ast.expr, ast.AST, str]] = []
        for n in fn.of_type(ast.Assign):
            for t in n.targets:
                out.append((t, n.value, "="))
        for n in fn.of_type(ast.AnnAssign):
            if n.value is not None:
                out.append((n.target, n.value, "="))
        for n in fn.of_type(ast.AugAssign):
            out.append((n.target, n, "aug"))
        for n in fn.of_type(ast.NamedExpr):
            out.append((n.target, n.value, "="))
        for n in fn.of_type(ast.For, ast.AsyncFor):
            out.append((n.target, n.iter, "for"))
        for n in fn.of_type(ast.comprehension):
            out.append((n.target, n.iter, "for"))
        for n in fn.of_type(ast.withitem):
            if n.optional_vars is not None:
                out.append((n.optional_vars, n.context_expr, "="))
        return out

    def _binding_kind(self, value: ast.AST, mode: str, fn: Function) -> int:
        if mode == "aug":
            return self.kind(value.target, fn) | (self.kind(value.value, fn) & ~CONTAINER)
        return self.kind(value, fn)

    def _assign(self, target: ast.expr, k: int, kinds: Dict[str, int], fn: Function,
                value: ast.AST, mode: str) -> bool:
        t = target.__class__
        if t is ast.Name:
            old = kinds.get(target.id, 0)
            if mode == "for":
                k = self._iter_element_kind(value, fn, k)
            new = old | k
            if new != old:
                kinds[target.id] = new
                return True
            return False
        if t is ast.Tuple or t is ast.List:
            changed = False
            if mode == "elem" and k & CONTAINER and len(target.elts) == 2 and value is None \
                    and not k & ARRAYISH:
                # a (key, value) pair from d.items(): the key is static
                a = self._assign(target.elts[0], 0, kinds, fn, None, "elem")
                b = self._assign(target.elts[1], k & TRACED, kinds, fn, None, "elem")
                return a or b
            if mode == "=" and isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in value.elts):
                for te, ve in zip(target.elts, value.elts):
                    if self._assign(te, self.kind(ve, fn), kinds, fn, ve, "="):
                        changed = True
                return changed
            if mode == "for":
                elems = self._iter_tuple_kinds(value, fn, len(target.elts))
                if elems is not None:
                    for te, ek in zip(target.elts, elems):
                        if self._assign(te, ek, kinds, fn, None, "elem"):
                            changed = True
                    return changed
                k = self._iter_element_kind(value, fn, k)
            if mode == "=" and isinstance(value, ast.Name) and value.id in fn.param_inits:
                elems = self._carry_elements(fn, value.id, len(target.elts))
                if elems is not None:
                    for te, ek in zip(target.elts, elems):
                        if self._assign(te, ek, kinds, fn, None, "elem"):
                            changed = True
                    return changed
            # unpacking: the elements of a call's result (``q, r = jnp.linalg.qr(x)``)
            # share its array kind; elements of any other value (a carry tuple,
            # a pytree parameter) are only known to be traced
            if isinstance(value, ast.Call) and not (k & CONTAINER and not k & ARRAYISH):
                ek = k & ~CONTAINER
            else:
                ek = k & TRACED
            for te in target.elts:
                if self._assign(te, ek, kinds, fn, None, "elem"):
                    changed = True
            return changed
        if t is ast.Starred:
            return self._assign(target.value, k | CONTAINER, kinds, fn, None, "elem")
        return False

    def _iter_element_kind(self, it: ast.AST, fn: Function, k: int) -> int:
        """Kind of the loop variable of ``for x in <it>``."""
        it = self._unwrap_iterable(it, fn)
        if isinstance(it, ast.Call):
            q = self.qualname(it.func, fn)
            if q == "range":
                return 0
            if isinstance(it.func, ast.Attribute) and it.func.attr in ("keys",):
                return 0
            if isinstance(it.func, ast.Attribute) and it.func.attr in ("items",):
                return self.kind(it.func.value, fn) & TRACED | CONTAINER
        if k & CONTAINER and not (k & ARRAYISH):
            return k & TRACED
        return k & ~CONTAINER

    def _unwrap_iterable(self, it: ast.AST, fn: Function) -> ast.AST:
        """``sorted(d.items())``, ``list(...)``, ``tuple(...)``, ``reversed(...)`` iterate like their argument."""
        while isinstance(it, ast.Call) and len(it.args) == 1 and \
                self.qualname(it.func, fn) in ("sorted", "list", "tuple", "reversed"):
            it = it.args[0]
        return it

    def _iter_tuple_kinds(self, it: ast.AST, fn: Function, n: int) -> Optional[List[int]]:
        it = self._unwrap_iterable(it, fn)
        if not isinstance(it, ast.Call):
            return None
        q = self.qualname(it.func, fn)
        if q == "enumerate" and it.args and n == 2:
            inner = self._unwrap_iterable(it.args[0], fn)
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "items":
                # enumerate(d.items()): (index, (key, value)) -- the pair is a container
                return [0, CONTAINER | (self.kind(inner.func.value, fn) & TRACED)]
            return [0, self._iter_element_kind(it.args[0], fn, self.kind(it.args[0], fn))]
        if q == "zip" and len(it.args) == n and not any(isinstance(a, ast.Starred) for a in it.args):
            return [self._iter_element_kind(a, fn, self.kind(a, fn)) for a in it.args]
        if isinstance(it.func, ast.Attribute) and it.func.attr == "items" and n == 2:
            return [0, self.kind(it.func.value, fn) & TRACED]
        return None

    def name_kind(self, name: str, fn: Function) -> int:
        s = fn
        while s is not None:
            if name in s.locals and name not in s.globals_declared:
                if s.is_module:
                    return self.kinds(s).get(name, 0) & ~TRACED
                return self.kinds(s).get(name, 0)
            s = s.parent
        return 0

    def kind(self, e: Optional[ast.AST], fn: Function) -> int:
        """The value kind of expression ``e`` evaluated in scope ``fn``."""
        if e is None:
            return 0
        t = e.__class__
        if t is ast.Name:
            return self.name_kind(e.id, fn)
        if t is ast.Constant:
            return 0
        if t is ast.Attribute:
            if e.attr in K.STATIC_ATTRS or e.attr.startswith(K.STATIC_ATTR_PREFIXES) \
                    or e.attr in self.static_fields:
                return 0
            v = e.value
            if v.__class__ is ast.Name:
                owner = self._method_owner(fn)
                if owner is not None and v.id == owner.self_name and owner.cls is not None:
                    return self._self_attr_kind(owner, e.attr)
                if self.qualname(v, fn) is not None:
                    return 0   # a module attribute such as jnp.pi or jnp.float32
            vk = self.kind(v, fn)
            if e.attr in _ARRAY_VIEWS:
                return vk & (TRACED | JAX | NUMPY)
            # a field of a traced pytree (state.params, state.dynamic_scale): traced,
            # but not known to be an array (it may be None, a tuple, a dataclass)
            return vk & (TRACED | NUMPY)
        if t is ast.Subscript:
            vk = self.kind(e.value, fn)
            if vk & CONTAINER and not vk & ARRAYISH:
                return vk & TRACED
            return vk & ARRAYISH
        if t is ast.Call:
            return self._call_kind(e, fn)
        if t is ast.BinOp:
            lk, rk = self.kind(e.left, fn), self.kind(e.right, fn)
            k = lk | rk
            if (lk & CONTAINER and not lk & ARRAYISH) or (rk & CONTAINER and not rk & ARRAYISH):
                return k   # tuple/list concatenation or repetition
            if k & TRACED:
                return (k & ARRAYISH) | JAX
            return k & ARRAYISH
        if t is ast.UnaryOp:
            k = self.kind(e.operand, fn)
            if e.op.__class__ is ast.Not:
                return k & TRACED if self._truthiness_traced(k) else 0
            return k & ~CONTAINER
        if t is ast.BoolOp:
            k = 0
            for v in e.values:
                k |= self.kind(v, fn)
            return k
        if t is ast.Compare:
            for op in e.ops:
                if op.__class__ in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                    return 0
            k = self.kind(e.left, fn)
            for c in e.comparators:
                k |= self.kind(c, fn)
            if k & CONTAINER and not k & ARRAYISH:
                return k & TRACED
            if k & TRACED:
                return TRACED | JAX
            return k & ARRAYISH
        if t is ast.IfExp:
            return self.kind(e.body, fn) | self.kind(e.orelse, fn)
        if t is ast.Tuple or t is ast.List or t is ast.Set:
            k = CONTAINER
            for x in e.elts:
                k |= self.kind(x, fn) & TRACED
            return k
        if t is ast.Dict:
            k = CONTAINER
            for x in e.values:
                k |= self.kind(x, fn) & TRACED
            return k
        if t is ast.ListComp or t is ast.SetComp or t is ast.GeneratorExp:
            return CONTAINER | (self.kind(e.elt, fn) & TRACED)
        if t is ast.DictComp:
            return CONTAINER | (self.kind(e.value, fn) & TRACED)
        if t is ast.Starred or t is ast.NamedExpr or t is ast.Await:
            return self.kind(e.value, fn)
        return 0

    @staticmethod
    def _method_owner(fn: Function) -> Optional[Function]:
        return fn.enclosing_method()

    def _self_attr_kind(self, method: Function, attr: str) -> int:
        """Kind of ``self.<attr>``: Flax params/variables from ``setup`` are traced;
        attributes bound from JAX calls in ``__init__`` are (concrete) JAX arrays;
        everything else — module fields, configuration — is static."""
        info = method.cls
        values = info.setup_attrs.get(attr)
        if not values:
            return 0
        key = (id(info), attr)
        if key in self._attrs_in_progress:
            return 0   # self.x = f(self.x) in __init__: no new information
        self._attrs_in_progress.add(key)
        try:
            init = info.methods.get("setup" if info.module_kind == "linen" else "__init__")
            k = 0
            for v in values:
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                        and v.func.attr in ("param", "variable") and info.module_kind == "linen":
                    k |= TRACED | JAX if method.contexts else JAX
                elif init is not None:
                    k |= self.kind(v, init) & (JAX | NUMPY | CONTAINER)
            return k
        finally:
            self._attrs_in_progress.discard(key)

    def _call_kind(self, call: ast.Call, fn: Function) -> int:
        func = call.func
        term = func.attr if func.__class__ is ast.Attribute else (func.id if func.__class__ is ast.Name else "")
        if term.startswith(K.PREDICATE_PREFIXES):
            return 0
        traced_ctx = bool(fn.contexts) or self._in_traced(fn)
        q = self.qualname(func, fn) if func.__class__ in (ast.Name, ast.Attribute) else None
        if q is not None:
            if q in K.STATIC_RESULT_CALLS or q.startswith("math."):
                return 0
            if q in K.CONTAINER_CALLS:
                k = CONTAINER
                if q == "range":
                    return k
                for a in call.args:
                    k |= self.kind(a, fn) & TRACED
                return k
            if q in K.ARRAY_FUNCTIONS or (q.startswith(K.ARRAY_MODULES) and q not in K.NON_ARRAY):
                if q.startswith(K.PYTREE_FUNCTIONS_PREFIX):
                    return self._args_traced(call, fn)
                return JAX | (TRACED if traced_ctx else 0)
            if q.startswith("numpy."):
                return NUMPY | self._args_traced(call, fn)
            if q in ("jax.tree.map", "jax.tree.leaves", "jax.tree.flatten"):
                return self._args_traced(call, fn)
            if q.startswith("jax.") and (q.split(".")[-1] in K.TRANSFORM_TERMINALS):
                return 0
            if q in ("min", "max", "abs", "sum", "round", "pow", "divmod"):
                return self._args_traced(call, fn) | (self._args_kind(call, fn) & ARRAYISH)
            if q in _BUILTINS:
                return 0
        if func.__class__ is ast.Attribute:
            m = func.attr
            if m in K.CONCRETIZING_METHODS:
                return 0
            recv_node = func.value
            if recv_node.__class__ is ast.Name:
                owner = self._method_owner(fn)
                if owner is not None and owner.cls is not None and recv_node.id == owner.self_name \
                        and owner.cls.module_kind == "linen" and m in ("param", "variable"):
                    return TRACED | JAX if traced_ctx else JAX
            recv = self.kind(recv_node, fn)
            if recv & ARRAYISH:
                return (recv & ARRAYISH) | self._args_traced(call, fn)
            if recv & CONTAINER:
                return (recv & TRACED) | (CONTAINER if m in ("items", "values", "keys", "copy") else 0)
            return (recv & TRACED) | self._args_traced(call, fn)
        if q is None and func.__class__ in (ast.Name, ast.Attribute):
            target = self.resolve_callable(func, fn)
            if target is not None:
                return self.return_kind(target.function) | self._args_traced(call, fn)
        if func.__class__ is ast.Call:
            inner_q = self.qualname(func.func, fn)
            tr = K.transform_for(inner_q)
            k = self._args_traced(call, fn)
            if tr is not None:
                k |= JAX
            return k
        return self._args_traced(call, fn)

    def return_kind(self, fn: Function) -> int:
        """Union of the kinds ``fn`` returns (without TRACED: the caller decides
        whether the call happens under a trace)."""
        cache = self._return_kinds
        k = cache.get(id(fn))
        if k is not None:
            return k
        cache[id(fn)] = 0          # recursion guard
        k = 0
        if fn.is_lambda:
            k = self.kind(fn.node.body, fn)
        else:
            for ret in fn.of_type(ast.Return):
                if ret.value is not None:
                    k |= self.kind(ret.value, fn)
        k &= JAX | NUMPY | CONTAINER
        cache[id(fn)] = k
        return k

    @staticmethod
    def _in_traced(fn: Function) -> bool:
        return fn.parent is not None and fn.parent.under_trace

    def _args_traced(self, call: ast.Call, fn: Function) -> int:
        for a in call.args:
            if self.kind(a, fn) & TRACED:
                return TRACED
        for kw in call.keywords:
            if self.kind(kw.value, fn) & TRACED:
                return TRACED
        return 0

    def _args_kind(self, call: ast.Call, fn: Function) -> int:
        k = 0
        for a in call.args:
            k |= self.kind(a, fn)
        return k

    # ------------------------------------------------------- conveniences
    @staticmethod
    def _truthiness_traced(k: int) -> bool:
        """``bool(v)`` needs a tracer's value: not for a container (its length decides)."""
        return bool(k & TRACED) and bool(k & JAX) and not (k & CONTAINER)

    def truth_traced(self, e: ast.AST, fn: Function) -> bool:
        """Does ``bool(e)`` (an ``if``/``while``/``and``/``not`` test) need a traced value?"""
        if isinstance(e, ast.BoolOp):
            return any(self.truth_traced(v, fn) for v in e.values)
        return self._truthiness_traced(self.kind(e, fn))

    def is_traced(self, e: ast.AST, fn: Function) -> bool:
        return bool(fn.contexts or self._in_traced(fn)) and bool(self.kind(e, fn) & TRACED)

    def traced_culprit(self, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """The innermost-leftmost sub-expression that makes ``e`` traced.

        Used in messages: "`if` on traced value `x`".  Returns a Name when
        one carries the taint, else the smallest traced call or attribute.
        """
        if not self.kind(e, fn) & TRACED:
            return None
        t = e.__class__
        if t is ast.Name:
            return e
        if t is ast.Call:
            if isinstance(e.func, ast.Attribute):
                c = self.traced_culprit(e.func.value, fn)
                if c is not None:
                    return c
            for a in list(e.args) + [k.value for k in e.keywords]:
                c = self.traced_culprit(a, fn)
                if c is not None:
                    return c
            return e
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                c = self.traced_culprit(child, fn)
                if c is not None:
                    return c
        return e

    def is_array(self, e: ast.AST, fn: Function) -> bool:
        """A JAX array for sure: traced array or bound from a jax call, never a NumPy array or container."""
        k = self.kind(e, fn)
        return bool(k & JAX) and not (k & (NUMPY | CONTAINER))

    def loggers(self) -> Set[str]:
        """Names bound to ``logging.getLogger(...)`` results anywhere in the module."""
        if self._loggers is None:
            out: Set[str] = set()
            for fn in self.functions:
                for n in fn.of_type(ast.Assign):
                    if isinstance(n.value, ast.Call) and self.qualname(n.value.func, fn) in K.LOGGER_FACTORIES:
                        for t in n.targets:
                            if isinstance(t, ast.Name):
                                out.add(t.id)
                            elif isinstance(t, ast.Attribute):
                                out.add(t.attr)
            self._loggers = out
        return self._loggers


import builtins as _b  # noqa: E402

_BUILTINS = frozenset(n for n in dir(_b) if not n.startswith("_"))

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

# attributes of an array that are arrays again
_ARRAY_VIEWS = frozenset({"T", "mT", "real", "imag", "at", "flat"})

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
