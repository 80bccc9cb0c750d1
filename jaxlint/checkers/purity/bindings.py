"""Binding facts: where module-level and closed-over names are bound, rebound
and mutated.

The purity rules (JAX102, JAX103, JAX105, JAX106) ask questions such as
"which scope does this name refer to?", "is this module-level name rebound
after the function that reads it was defined?", "is this dict mutated by some
other function?" or "is this name bound to ``absl.flags.FLAGS``?".  The
answers come from one statement-level walk per scope (class bodies excluded:
their names are class attributes, invisible to methods) plus one pass over the
mutating calls and stores of every scope, both computed lazily and cached per
:class:`~jaxlint.analysis.model.SemanticModel`.

Entry point: :func:`bindings_for` (``BindingFacts``).

Why not the model's binding table (``model.bindings``/``lookup``)?  These
questions are about *when* a name changes, not only what it is bound to:
each :class:`Binding` here also carries the branch path and the loops around
its statement (two assignments in the two arms of one ``if`` are exclusive; a
rebinding inside a loop repeats), plus ``del`` and ``except ... as`` targets,
which the model's flow-insensitive table does not need.  Name *resolution*
follows the same rules as ``model.resolve_scope``.
"""
from __future__ import annotations

import ast
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel

# ----------------------------------------------------------------- vocabulary
# methods that mutate a Python container in place
LIST_METHODS = frozenset({"append", "extend", "insert", "appendleft", "extendleft", "popleft",
                          "setdefault", "popitem"})
# methods that mutate a container but share their name with non-container APIs
# (``optimizer.update(grads, state)``, ``array.clear``...): need container evidence
AMBIGUOUS_METHODS = frozenset({"update", "pop", "clear", "remove", "add", "discard", "sort", "reverse"})
MUTATING_METHODS = LIST_METHODS | AMBIGUOUS_METHODS

CONTAINER_FACTORIES = frozenset({
    "list", "dict", "set", "bytearray",
    "collections.defaultdict", "collections.OrderedDict", "collections.deque", "collections.Counter",
    "collections.ChainMap", "weakref.WeakValueDictionary", "weakref.WeakKeyDictionary", "weakref.WeakSet",
})
_CONTAINER_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)

# command-line flag objects: their values are set after import and can change
FLAG_PREFIXES = ("absl.flags.DEFINE", "ml_collections.config_flags.DEFINE", "tensorflow.compat.v1.flags.DEFINE",
                 "tensorflow.flags.DEFINE", "tensorflow.app.flags.DEFINE")
ARGPARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})
# methods that set flags again after start-up
FLAG_REWRITES = frozenset({"set_default", "unparse_flags", "_set_value", "override_value"})

# binding kinds that make a name a variable (not an import, def or class)
VARIABLE_KINDS = frozenset({"assign", "aug", "ann", "for", "with", "del", "except"})


def is_flags_qualname(q: Optional[str]) -> bool:
    return q is not None and (q == "absl.flags.FLAGS" or q.endswith("flags.FLAGS"))


class Binding:
    """One statement that binds (or deletes) a name in a scope."""

    __slots__ = ("name", "stmt", "kind", "value", "path", "loops")

    def __init__(self, name: str, stmt: ast.AST, kind: str, value: Optional[ast.AST],
                 path: Tuple, loops: Tuple):
        self.name = name
        self.stmt = stmt
        self.kind = kind          # assign | aug | ann | for | with | del | except | import | def | class
        self.value = value        # the bound expression, when there is exactly one
        self.path = path          # ((id(compound statement), branch), ...) from the scope's body
        self.loops = loops        # the loops of this scope around the statement

    @property
    def line(self) -> int:
        return self.stmt.lineno

    def in_loop_around(self, node: ast.AST) -> bool:
        """Is ``node`` inside one of the loops around this binding?"""
        line = node.lineno
        return any(lp.lineno <= line <= (lp.end_lineno or lp.lineno) for lp in self.loops)

    def __repr__(self) -> str:  # pragma: no cover
        return f"Binding({self.name!r}, {self.kind}, line {self.line})"


def exclusive(a: Binding, b: Binding) -> bool:
    """Can at most one of two bindings run (``if``/``else`` branches, ``try``/``except``)?"""
    for x, y in zip(a.path, b.path):
        if x == y:
            continue
        return x[0] == y[0]   # the same compound statement, different branches
    return False


class ScopeBindings:
    """Statement-level bindings of one scope: the module or a function body."""

    def __init__(self, scope: Function):
        self.scope = scope
        self.names: Dict[str, List[Binding]] = {}
        self.loops: List[ast.AST] = []      # every loop statement of the scope's own body
        node = scope.node
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            self._walk(node.body, (), ())

    def get(self, name: str) -> List[Binding]:
        return self.names.get(name, [])

    def is_variable(self, name: str) -> bool:
        return any(b.kind in VARIABLE_KINDS for b in self.names.get(name, ()))

    # ------------------------------------------------------------ walk
    def _add(self, name: str, stmt, kind, value, path, loops) -> None:
        lst = self.names.get(name)
        b = Binding(name, stmt, kind, value, path, loops)
        if lst is None:
            self.names[name] = [b]
        else:
            lst.append(b)

    def _targets(self, target, stmt, kind, value, path, loops) -> None:
        t = target.__class__
        if t is ast.Name:
            self._add(target.id, stmt, kind, value, path, loops)
        elif t is ast.Tuple or t is ast.List:
            for e in target.elts:
                self._targets(e, stmt, kind, None, path, loops)
        elif t is ast.Starred:
            self._targets(target.value, stmt, kind, None, path, loops)

    def _walk(self, stmts, path, loops) -> None:
        for st in stmts:
            t = st.__class__
            if t is ast.Assign:
                for tg in st.targets:
                    self._targets(tg, st, "assign", st.value, path, loops)
            elif t is ast.AugAssign:
                self._targets(st.target, st, "aug", st.value, path, loops)
            elif t is ast.AnnAssign:
                if st.value is not None:
                    self._targets(st.target, st, "ann", st.value, path, loops)
            elif t is ast.For or t is ast.AsyncFor:
                inner = loops + (st,)
                self.loops.append(st)
                self._targets(st.target, st, "for", None, path, inner)
                self._walk(st.body, path + ((id(st), "body"),), inner)
                self._walk(st.orelse, path, loops)
            elif t is ast.While:
                self.loops.append(st)
                self._walk(st.body, path + ((id(st), "body"),), loops + (st,))
                self._walk(st.orelse, path, loops)
            elif t is ast.If:
                self._walk(st.body, path + ((id(st), "if"),), loops)
                self._walk(st.orelse, path + ((id(st), "else"),), loops)
            elif t is ast.With or t is ast.AsyncWith:
                for item in st.items:
                    if item.optional_vars is not None:
                        self._targets(item.optional_vars, st, "with", None, path, loops)
                self._walk(st.body, path, loops)
            elif t is ast.Try or t.__name__ == "TryStar":
                self._walk(st.body, path + ((id(st), "body"),), loops)
                for i, h in enumerate(st.handlers):
                    hp = path + ((id(st), f"h{i}"),)
                    if h.name:
                        self._add(h.name, h, "except", None, hp, loops)
                    self._walk(h.body, hp, loops)
                self._walk(st.orelse, path + ((id(st), "body"),), loops)
                self._walk(st.finalbody, path, loops)
            elif t.__name__ == "Match":
                for i, case in enumerate(st.cases):
                    self._walk(case.body, path + ((id(st), f"c{i}"),), loops)
            elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
                self._add(st.name, st, "def", None, path, loops)
            elif t is ast.ClassDef:
                self._add(st.name, st, "class", None, path, loops)
            elif t is ast.Import or t is ast.ImportFrom:
                for a in st.names:
                    if a.name != "*":
                        self._add((a.asname or a.name).split(".")[0], st, "import", None, path, loops)
            elif t is ast.Delete:
                for tg in st.targets:
                    self._targets(tg, st, "del", None, path, loops)


class Mutation:
    """A place that changes the value of a scope's name without rebinding it."""

    __slots__ = ("fn", "node", "kind", "method")

    def __init__(self, fn: Function, node: ast.AST, kind: str, method: Optional[str] = None):
        self.fn = fn          # the scope the mutation is written in
        self.node = node      # the call or the statement
        self.kind = kind      # call | item | attr | global | nonlocal
        self.method = method  # the mutating method for kind == "call"

    @property
    def line(self) -> int:
        return self.node.lineno


def root_name(e: ast.AST) -> Optional[ast.Name]:
    """``a`` for ``a``, ``a.b[c].d``; None when a call or other expression intervenes."""
    while True:
        t = e.__class__
        if t is ast.Name:
            return e
        if t is ast.Attribute or t is ast.Subscript:
            e = e.value
            continue
        return None


def store_targets(stmt: ast.AST) -> Iterator[ast.expr]:
    """Targets of an assignment-like statement, tuples flattened."""
    t = stmt.__class__
    if t is ast.Assign:
        stack = list(stmt.targets)
    elif t is ast.AugAssign or t is ast.AnnAssign:
        stack = [stmt.target]
    elif t is ast.Delete:
        stack = list(stmt.targets)
    else:
        return
    while stack:
        x = stack.pop()
        if x.__class__ in (ast.Tuple, ast.List):
            stack.extend(x.elts)
        elif x.__class__ is ast.Starred:
            stack.append(x.value)
        else:
            yield x


class BindingFacts:
    """Binding and mutation facts of one file, computed on demand."""

    def __init__(self, model: SemanticModel):
        self.model = model
        self._scopes: Dict[int, ScopeBindings] = {}
        self._decls: Dict[int, Tuple[Set[str], Set[str]]] = {}
        self._writers: Optional[Dict[Tuple[int, str], List[Mutation]]] = None
        self._local_stores: Dict[int, Set[str]] = {}
        self._program_calls: Dict[int, List[ast.Call]] = {}
        self._outer: Optional[Dict[int, Function]] = None
        self._outer_vars: Optional[Set[str]] = None
        self._globals: Optional[Set[str]] = None
        self._flags_rewritten: Optional[int] = None
        self._reach: Dict[int, Optional[Set[str]]] = {}

    # ------------------------------------------------------------ scopes
    def scope(self, fn: Function) -> ScopeBindings:
        sb = self._scopes.get(id(fn))
        if sb is None:
            sb = ScopeBindings(fn)
            self._scopes[id(fn)] = sb
        return sb

    @property
    def module(self) -> ScopeBindings:
        return self.scope(self.model.module)

    def declarations(self, fn: Function) -> Tuple[Set[str], Set[str]]:
        """(names declared ``global``, names declared ``nonlocal``) in ``fn``."""
        d = self._decls.get(id(fn))
        if d is None:
            g: Set[str] = set()
            n: Set[str] = set()
            if fn.globals_declared:
                for node in fn.of_type(ast.Global):
                    g.update(node.names)
                for node in fn.of_type(ast.Nonlocal):
                    n.update(node.names)
            d = (g, n)
            self._decls[id(fn)] = d
        return d

    def outer_variable(self, name: str, fn: Function) -> Optional[Function]:
        """The scope outside ``fn`` that binds ``name`` as a variable: the module
        (a module-level variable) or an enclosing function (a variable or parameter
        there, other than its ``self``); None for ``fn``'s own names, imports,
        defs, classes and unknown names."""
        scope = self.resolve(name, fn)
        if scope is None or scope is fn:
            return None
        if scope.is_module:
            return scope if self.module.is_variable(name) else None
        if not (self.scope(scope).is_variable(name) or name in scope.param_nodes) or name == scope.self_name:
            return None
        return scope

    def resolve(self, name: str, fn: Function) -> Optional[Function]:
        """The scope whose binding of ``name`` code in ``fn`` sees: ``fn`` itself,
        an enclosing function, the module, or None (a builtin or unknown name)."""
        module = self.model.module
        s: Optional[Function] = fn
        while s is not None:
            if s.is_module:
                return module if name in self.module.names or name in self.global_names() else None
            g, n = self.declarations(s)
            if name in g:
                return module
            if name in n:
                s = s.parent
                continue
            if name in s.locals:
                return s
            s = s.parent
        return None

    def global_names(self) -> Set[str]:
        """Names some function declares ``global`` (module-level even when no
        top-level statement binds them)."""
        if self._globals is None:
            out: Set[str] = set()
            for fn in self.model.functions:
                if fn.globals_declared:
                    out |= self.declarations(fn)[0]
            self._globals = out
        return self._globals

    def locally_stored(self, fn: Function) -> Set[str]:
        """Names rebound by ``fn``'s own statements (assignments, loops, ``with``, walrus)."""
        out = self._local_stores.get(id(fn))
        if out is None:
            out = set()
            for node in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete):
                for t in store_targets(node):
                    if t.__class__ is ast.Name:
                        out.add(t.id)
            for node in fn.of_type(ast.For, ast.AsyncFor, ast.comprehension):
                for x in ast.walk(node.target):
                    if x.__class__ is ast.Name:
                        out.add(x.id)
            for node in fn.of_type(ast.withitem):
                if node.optional_vars is not None:
                    for x in ast.walk(node.optional_vars):
                        if x.__class__ is ast.Name:
                            out.add(x.id)
            for node in fn.of_type(ast.NamedExpr):
                out.add(node.target.id)
            self._local_stores[id(fn)] = out
        return out

    # --------------------------------------------------------- writers
    def outer_scopes(self) -> Dict[int, Function]:
        """The module and every function that encloses a traced function: the
        scopes whose names a traced function can read or write from outside."""
        if self._outer is None:
            out = {id(self.model.module): self.model.module}
            for fn in self.model.functions:
                if fn.contexts:
                    s = fn.parent
                    while s is not None and not s.is_module and id(s) not in out:
                        out[id(s)] = s
                        s = s.parent
            self._outer = out
        return self._outer

    def outer_variables(self) -> Set[str]:
        """Names bound as variables (not imports, defs or classes) in the module or
        in a function around a traced function, and the parameters of the latter."""
        if self._outer_vars is None:
            out: Set[str] = set()
            for scope in self.outer_scopes().values():
                for name, bs in self.scope(scope).names.items():
                    if any(x.kind in VARIABLE_KINDS for x in bs):
                        out.add(name)
                if not scope.is_module:
                    out.update(scope.param_nodes)
            out |= self.global_names()
            self._outer_vars = out
        return self._outer_vars

    def writers(self) -> Dict[Tuple[int, str], List[Mutation]]:
        """Every ``global``/``nonlocal`` rebinding and every container/attribute
        mutation of a name, keyed by (id(binding scope), name)."""
        if self._writers is not None:
            return self._writers
        out: Dict[Tuple[int, str], List[Mutation]] = {}
        m = self.model
        outer = self.outer_scopes()
        watch = self.outer_variables()

        def add(scope: Optional[Function], name: str, mut: Mutation) -> None:
            if scope is None or id(scope) not in outer:
                return
            out.setdefault((id(scope), name), []).append(mut)

        for fn in m.functions:
            g, n = self.declarations(fn) if fn.globals_declared else ((), ())
            # a name local to a function no traced function nests in cannot matter
            own = fn.locals if id(fn) not in outer else ()
            for call in fn.of_type(ast.Call):
                f = call.func
                if f.__class__ is ast.Attribute and f.attr in MUTATING_METHODS:
                    r = root_name(f.value)
                    if r is not None and r.id in watch and r.id not in own:
                        add(self.resolve(r.id, fn), r.id, Mutation(fn, call, "call", f.attr))
            for node in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete):
                nt = node.__class__
                if nt is ast.Assign:
                    tg = node.targets
                    if len(tg) == 1 and tg[0].__class__ is ast.Name and not g and not n:
                        continue   # the common ``x = ...``: a local binding
                elif nt is ast.AnnAssign and node.value is None:
                    continue
                for t in store_targets(node):
                    tt = t.__class__
                    if tt is ast.Name:
                        if t.id in g:
                            add(m.module, t.id, Mutation(fn, node, "global"))
                        elif t.id in n:
                            add(self.resolve(t.id, fn), t.id, Mutation(fn, node, "nonlocal"))
                    elif tt is ast.Subscript or tt is ast.Attribute:
                        r = root_name(t)
                        if r is not None and r.id in watch and r.id not in own:
                            kind = "item" if tt is ast.Subscript else "attr"
                            add(self.resolve(r.id, fn), r.id, Mutation(fn, node, kind))
            if g or n:
                for node in fn.of_type(ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr):
                    tgt = node.target if node.__class__ is not ast.withitem else node.optional_vars
                    if tgt is None:
                        continue
                    for x in ast.walk(tgt):
                        if x.__class__ is ast.Name and (x.id in g or x.id in n):
                            scope = m.module if x.id in g else self.resolve(x.id, fn)
                            add(scope, x.id, Mutation(fn, node, "global" if x.id in g else "nonlocal"))
        self._writers = out
        return out

    def writers_of(self, scope: Function, name: str) -> List[Mutation]:
        return self.writers().get((id(scope), name), [])

    # ------------------------------------------------------ value facts
    def container_bound(self, scope: Function, name: str) -> bool:
        """Is ``name`` bound in ``scope`` to a Python list/dict/set (display or constructor)?"""
        for b in self.scope(scope).get(name):
            if b.value is not None and self.is_container_value(b.value, scope):
                return True
        return False

    def numpy_bound(self, scope: Function, name: str) -> bool:
        """Is ``name`` bound in ``scope`` to a NumPy array (``np.zeros(...)``)?"""
        for _b, q in self.value_qualnames(scope, name):
            if q is not None and q.startswith("numpy.") and not q.startswith("numpy.random."):
                return True
        return False

    def is_container_value(self, v: ast.AST, scope: Function) -> bool:
        if isinstance(v, _CONTAINER_DISPLAYS):
            return True
        if isinstance(v, ast.Call):
            q = self.model.qualname(v.func, scope)
            return q in CONTAINER_FACTORIES
        return False

    def value_qualnames(self, scope: Function, name: str) -> Iterator[Tuple[Binding, Optional[str]]]:
        """(binding, qualified name of the bound value or of the called function)."""
        m = self.model
        for b in self.scope(scope).get(name):
            v = b.value
            if v is None:
                continue
            if isinstance(v, ast.Call):
                yield b, m.qualname(v.func, scope)
            elif isinstance(v, (ast.Name, ast.Attribute)):
                yield b, m.qualname(v, scope)

    def flag_kind(self, scope: Function, name: str) -> Optional[str]:
        """"flags" when ``name`` holds absl/ml_collections flags or a flag holder,
        "args" for an argparse namespace, else None."""
        for b in self.scope(scope).get(name):
            v = b.value
            if v is None and b.kind == "assign" and isinstance(b.stmt, ast.Assign):
                v = b.stmt.value   # ``args, rest = parser.parse_known_args()``
            if v is None:
                continue
            if isinstance(v, (ast.Name, ast.Attribute)):
                if is_flags_qualname(self.model.qualname(v, scope)):
                    return "flags"
            elif isinstance(v, ast.Call):
                q = self.model.qualname(v.func, scope)
                if q is not None and q.startswith(FLAG_PREFIXES):
                    return "flags"
                if isinstance(v.func, ast.Attribute) and v.func.attr in ARGPARSE_METHODS:
                    return "args"
        return None

    def flags_rewritten(self) -> Dict[str, int]:
        """Flags a function of this module sets again, each with the line:
        ``FLAGS.lr = 0.1`` and ``FLAGS.set_default("lr", ...)`` give ``lr``;
        ``_LR.value = ...`` gives the holder's name ``_LR``; ``FLAGS.unparse_flags()``
        gives ``*`` (every flag).  Flags parsed once at start-up are constants
        by the time anything is traced; only a later write makes a traced read stale."""
        if self._flags_rewritten is None:
            out: Dict[str, int] = {}
            m = self.model
            for fn in m.functions:
                if fn.is_module:
                    continue
                for node in fn.of_type(ast.Assign, ast.AugAssign, ast.Call):
                    if isinstance(node, ast.Call):
                        f = node.func
                        if not (isinstance(f, ast.Attribute) and f.attr in FLAG_REWRITES and self._is_flags(f.value, fn)):
                            continue
                        arg = node.args[0] if node.args else None
                        key = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "*"
                        out.setdefault(key, node.lineno)
                        continue
                    for t in store_targets(node):
                        if not isinstance(t, ast.Attribute):
                            continue
                        r = t.value
                        if self._is_flags(r, fn):
                            holder = isinstance(r, ast.Name) and self._holder(r.id, fn)
                            out.setdefault(r.id if holder else t.attr, node.lineno)
            self._flags_rewritten = out
        return self._flags_rewritten

    def _holder(self, name: str, fn: Function) -> bool:
        """``name`` holds one flag (``flags.DEFINE_integer(...)``), not the FLAGS object."""
        scope = self.resolve(name, fn)
        if scope is None:
            return False
        for b in self.scope(scope).get(name):
            if isinstance(b.value, ast.Call):
                return True
        return False

    def _is_flags(self, e: ast.AST, fn: Function) -> bool:
        if is_flags_qualname(self.model.qualname(e, fn)):
            return True
        if isinstance(e, ast.Name):
            scope = self.resolve(e.id, fn)
            return scope is not None and self.flag_kind(scope, e.id) == "flags"
        return False

    # --------------------------------------------------------- rebinding
    def program_calls(self, scope: Function) -> List[ast.Call]:
        """Calls written in ``scope``'s own statements (decorators excluded) of
        functions defined in this file: ``train_step(...)``, ``main()``.  Any of
        them may trace a function of the file."""
        out = self._program_calls.get(id(scope))
        if out is not None:
            return out
        out = []
        decorators: Set[int] = set()
        for child in scope.children:
            for d in child.decorators:
                for x in ast.walk(d):
                    decorators.add(id(x))
        for node in scope.of_type(ast.ClassDef):
            for d in node.decorator_list:
                for x in ast.walk(d):
                    decorators.add(id(x))
        for call in scope.of_type(ast.Call):
            f = call.func
            if f.__class__ is not ast.Name or id(call) in decorators:
                continue
            where = self.resolve(f.id, scope)
            if where is None:
                continue
            kinds = {b.kind for b in self.scope(where).get(f.id)}
            if "def" in kinds or (kinds & VARIABLE_KINDS and "import" not in kinds):
                out.append(call)
        self._program_calls[id(scope)] = out
        return out

    def reaching_names(self, fn: Function) -> Optional[Set[str]]:
        """Module-level names whose call may run ``fn`` (a function defined at
        module level, or a method): its own name, aliases such as
        ``step = jax.jit(_step)``, its class, and module functions and classes
        whose source mentions one of those (transitively).  None without source
        text (every call is then assumed to reach it)."""
        key = id(fn)
        if key in self._reach:
            return self._reach[key]
        src = getattr(self.model, "source", None)
        text = getattr(src, "text", None)
        if text is None:
            self._reach[key] = None
            return None
        module = self.model.module
        seeds: Set[str] = set()
        if not fn.is_lambda:
            seeds.add(fn.name)
        if fn.cls is not None:
            seeds.add(fn.cls.name)
        # module-level holders of the function: ``step = jax.jit(_step)``, ``model = Model()``
        holders = [(t.id, n.value) for n in module.of_type(ast.Assign) for t in n.targets
                   if isinstance(t, ast.Name)]
        units = [(name, d.node) for name, d in module.defs.items()] + \
                [(name, info.node) for name, info in self.model.classes.items()]
        pending = list(units)
        for _ in range(6):
            # (a module-level function is not reached through an attribute of that name,
            # ``opt.update(...)`` for a function ``update``, nor by a method defined with it; a
            # method is reached through attributes)
            lead = r"\b" if fn.cls is not None else r"(?<![\w.])(?<!def )"
            pattern = re.compile(lead + r"(?:" + "|".join(sorted(map(re.escape, seeds))) + r")\b") if seeds else None
            if pattern is None:
                break
            grown = False
            for name, value in holders:
                if name not in seeds and fn.node is not value:
                    a, b = src.node_span(value)
                    if pattern.search(text, a, b) or (fn.is_lambda and value.lineno <= fn.node.lineno
                                                      <= (value.end_lineno or value.lineno)):
                        seeds.add(name)
                        grown = True
            rest = []
            for name, node in pending:
                if name in seeds:
                    continue
                a, b = src.node_span(node)
                if pattern.search(text, a, b):
                    seeds.add(name)
                    grown = True
                else:
                    rest.append((name, node))
            pending = rest
            if not grown:
                break
        self._reach[key] = seeds
        return seeds

    def changes_after_use(self, scope: Function, line: int, loops: Tuple, defined: ast.AST,
                          reach: Optional[Set[str]] = None) -> bool:
        """Can a change at ``line`` of ``scope``'s own code (inside ``loops``) make a
        function defined by ``defined`` run with a stale value?  Only when some call
        of the file's functions that may reach it (named in ``reach``, when given)
        runs in a loop around the change, or runs after the definition and before
        the change (tracing it) and another runs after the change (using that
        trace) — not after the function was defined anew under the same name."""
        end = getattr(defined, "end_lineno", None) or defined.lineno
        if line <= end:
            return False
        if any(lp.lineno <= defined.lineno <= (lp.end_lineno or lp.lineno) for lp in loops):
            return False   # the definition re-runs with it: a fresh function each time
        name = getattr(defined, "name", None)
        # later definitions of the same name (a notebook re-running an edited cell): calls after
        # one of them run a new function, traced afresh
        redefined = [b.line for b in self.scope(scope).get(name) if b.line > end] if name else []
        traced: Dict[str, int] = {}    # called name -> the last line a call of it may have traced
        for call in sorted(self.program_calls(scope), key=lambda c: c.lineno):
            if reach is not None and call.func.id not in reach:
                continue
            u = call.lineno
            if u <= end:
                continue
            called = call.func.id
            if called == name and any(r <= u for r in redefined):
                continue   # a later definition of the same name runs here, not this one
            if any(lp.lineno <= u <= (lp.end_lineno or lp.lineno) for lp in loops):
                return True
            if u < line:
                traced[called] = u
            elif traced and not self._fresh_product_between(scope, called, traced.get(called), u):
                return True   # traced with the old value, called again after the change
        return False

    def _fresh_product_between(self, scope: Function, called: str, since: Optional[int], until: int) -> bool:
        """``called`` was bound anew to a transform's product of a new function object
        (``get_abundance = jit(vmap(g))`` in a later notebook cell) after its last tracing call
        (``since``) and before ``until``: the call at ``until`` runs a new compiled function with
        its own trace.  ``jit(g)`` of the same ``g`` again is not one: JAX keys its cache on the
        function, so the new wrapper reuses the old trace (checked with JAX 0.10.2).  (A name never
        called before the change (``since`` None) is not followed: some other traced caller
        may reach the reader.)"""
        if since is None:
            return False
        for b in self.scope(scope).get(called):
            if since < b.line < until and b.kind in ("assign", "ann") and not b.path and not b.loops \
                    and isinstance(b.value, ast.Call) and b.value.args \
                    and isinstance(b.value.args[0], (ast.Call, ast.Lambda)) \
                    and K.transform_for(self.model.qualname(b.value.func, scope)) is not None:
                return True   # (``jit(f)`` of the same ``f`` again shares its compiled cache: not fresh)
        return False

    def rebinding_after(self, scope: Function, name: str, after) -> Optional[Binding]:
        """A binding of ``name`` in ``scope``'s own code that changes an earlier
        value: it runs repeatedly (in a loop) or follows another binding (or the
        parameter of that name), and ``after(line, loops)`` says it can come
        after a reader was traced (see :meth:`changes_after_use`)."""
        bindings = [b for b in self.scope(scope).get(name) if b.kind in VARIABLE_KINDS]
        param = not scope.is_module and name in scope.param_nodes
        for b in bindings:
            if not b.loops and not param and not any(o is not b and not exclusive(b, o) for o in bindings):
                continue
            if after(b.line, b.loops):
                return b
        return None

    def loops_around(self, scope: Function, node: ast.AST) -> Tuple:
        line = node.lineno
        return tuple(lp for lp in self.scope(scope).loops if lp.lineno <= line <= (lp.end_lineno or lp.lineno))


def bindings_for(model: SemanticModel) -> BindingFacts:
    """The (cached) binding facts of a model."""
    return model.facts(BindingFacts)
