"""Bindings: what each scope binds, and where a name resolves (a part of
:class:`~jaxlint.analysis.model.SemanticModel`).

One :class:`BindingTable` per scope (built lazily, cached on the
:class:`~jaxlint.analysis.scopes.Function`), and three queries every
collector uses instead of walking the scope chain by hand:

``model.resolve_scope(name, scope)``
    The scope whose binding of ``name`` code in ``scope`` sees: the nearest
    scope, walking outward, that binds ``name`` (parameter, assignment target,
    loop/``with``/comprehension target, ``def``, ``class``, ``import``),
    honouring ``global``/``nonlocal``; class bodies belong to their enclosing
    scope, as everywhere in the model.  ``None`` when no scope of the module
    binds it (a builtin, or undefined).
``model.bindings(name, scope)``
    Every :class:`Binding` of ``name`` in ``scope`` itself (no walk), in source
    order, parameters first.
``model.lookup(name, scope)``
    ``bindings(name, resolve_scope(name, scope))``: the bindings code in
    ``scope`` may see (``[]`` when unresolved).
``model.single_value(name, scope)``
    the value of the one plain ``name = value`` that binds ``name`` where it
    resolves (``None`` when bound otherwise or more than once).
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from .scopes import Function

# the kinds of binding (``Binding.kind``)
PARAM, DEF, CLASS, IMPORT = "param", "def", "class", "import"
ASSIGN, AUG, FOR, WITH = "=", "aug", "for", "with"


class Binding:
    """One binding of one name in one scope.

    ``kind``: ``param``, ``def``, ``class``, ``import``, ``=`` (``x = v``,
    ``x: T = v``, ``(x := v)``), ``aug`` (``x += v``), ``for`` (a ``for`` or
    comprehension target), ``with`` (``with v as x``).
    ``node``: the binding statement or expression (the ``ast.arg`` of a
    parameter, the ``def``/``class``/``import`` statement, the ``Assign``,
    ``AnnAssign``, ``NamedExpr``, ``AugAssign``, ``For``, ``comprehension``,
    ``withitem``).
    ``value``: the whole bound expression: the right-hand side (for ``aug``
    the ``AugAssign``'s operand), the iterable of a loop, the context
    expression of a ``with``; ``None`` for parameters, defs, classes, imports.
    ``path``: where the name sits in an unpacking target, ``()`` when it is
    the whole target (``a, (b, *c) = v``: ``a`` (0,), ``b`` (1, 0), ``c`` (1, 1)).
    """

    __slots__ = ("name", "kind", "node", "value", "path")

    def __init__(self, name: str, kind: str, node: ast.AST, value: Optional[ast.AST], path: Tuple[int, ...]):
        self.name = name
        self.kind = kind
        self.node = node
        self.value = value
        self.path = path

    @property
    def element(self) -> Optional[ast.AST]:
        """The sub-expression of ``value`` bound to the name: ``value`` itself when
        the name is the whole target; the matching element when ``value`` is a
        tuple/list display with as many elements as the target (and no ``*``) at
        every level of ``path``; else ``None`` (an element of an opaque value)."""
        v = self.value
        for i in self.path:
            if not isinstance(v, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in v.elts):
                return None
            if i >= len(v.elts):
                return None
            v = v.elts[i]
        return v

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Binding({self.name!r}, {self.kind!r}, line {getattr(self.node, 'lineno', '?')}, path={self.path})"


class BindingTable:
    """The bindings of one scope.

    ``entries``: ``(target, value, mode)`` per binding statement, the input of the
    value-kind fixpoint (``mode`` is ``=``, ``aug`` -- with the ``AugAssign`` as
    value --, or ``for``).  :meth:`of`: the :class:`Binding` records of a name.
    """

    __slots__ = ("scope", "_entries", "_names", "_aliases")

    def __init__(self, scope: Function):
        self.scope = scope
        self._entries: Optional[List[Tuple[ast.expr, ast.AST, str]]] = None
        self._names: Optional[Dict[str, List[Binding]]] = None
        self._aliases: Optional[Dict[str, ast.expr]] = None

    @property
    def entries(self) -> List[Tuple[ast.expr, ast.AST, str]]:
        if self._entries is None:
            fn = self.scope
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
            self._entries = out
        return self._entries

    def of(self, name: str) -> List[Binding]:
        """Every binding of ``name`` in this scope (parameters first, then source order)."""
        if self._names is None:
            self._names = self._collect()
        return self._names.get(name, [])

    def names(self) -> List[str]:
        if self._names is None:
            self._names = self._collect()
        return list(self._names)

    def aliases(self) -> Dict[str, ast.expr]:
        """``name = <callable expression>`` (a call, name, attribute or lambda) where
        ``name`` is the whole target of exactly one plain assignment (``=``) in this
        scope: ``step = jax.jit(train_step)``."""
        if self._aliases is None:
            counts: Dict[str, int] = {}
            found: Dict[str, ast.expr] = {}
            for node in self.scope.of_type(ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        counts[t.id] = counts.get(t.id, 0) + 1
                        if isinstance(node.value, (ast.Call, ast.Name, ast.Attribute, ast.Lambda)):
                            found[t.id] = node.value
            self._aliases = {k: v for k, v in found.items() if counts.get(k) == 1}
        return self._aliases

    # ------------------------------------------------------------ collect
    def _collect(self) -> Dict[str, List[Binding]]:
        fn = self.scope
        found: List[Tuple[Tuple[int, int], Binding]] = []

        def add(name: str, kind: str, node: ast.AST, value: Optional[ast.AST], path: Tuple[int, ...]) -> None:
            found.append(((getattr(node, "lineno", 0), getattr(node, "col_offset", 0)),
                          Binding(name, kind, node, value, path)))

        def targets(t: ast.AST, kind: str, node: ast.AST, value: Optional[ast.AST], path: Tuple[int, ...]) -> None:
            c = t.__class__
            if c is ast.Name:
                add(t.id, kind, node, value, path)
            elif c is ast.Tuple or c is ast.List:
                for i, e in enumerate(t.elts):
                    targets(e.value if e.__class__ is ast.Starred else e, kind, node, value, path + (i,))
            elif c is ast.Starred:
                targets(t.value, kind, node, value, path)

        for n in fn.of_type(ast.Assign):
            for t in n.targets:
                targets(t, ASSIGN, n, n.value, ())
        for n in fn.of_type(ast.AnnAssign):
            if n.value is not None:
                targets(n.target, ASSIGN, n, n.value, ())
        for n in fn.of_type(ast.NamedExpr):
            targets(n.target, ASSIGN, n, n.value, ())
        for n in fn.of_type(ast.AugAssign):
            targets(n.target, AUG, n, n.value, ())
        for n in fn.of_type(ast.For, ast.AsyncFor):
            targets(n.target, FOR, n, n.iter, ())
        for n in fn.of_type(ast.comprehension):
            targets(n.target, FOR, n, n.iter, ())
        for n in fn.of_type(ast.withitem):
            if n.optional_vars is not None:
                targets(n.optional_vars, WITH, n, n.context_expr, ())
        for n in fn.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
            add(n.name, DEF, n, None, ())
        for n in fn.of_type(ast.ClassDef):
            add(n.name, CLASS, n, None, ())
        for n in fn.of_type(ast.Import, ast.ImportFrom):
            for a in n.names:
                if a.name != "*":
                    add((a.asname or a.name).split(".")[0], IMPORT, n, None, ())
        classes = fn.of_type(ast.ClassDef)
        if classes:
            # a class body binds class attributes, not names of this scope: ``predict`` defined as
            # a method does not rebind a module-level ``predict = jax.jit(model.apply)``
            inside = _class_body_nodes(classes)
            found = [item for item in found if id(item[1].node) not in inside]
        found.sort(key=lambda item: item[0])
        out: Dict[str, List[Binding]] = {}
        for p, a in fn.param_nodes.items():
            out[p] = [Binding(p, PARAM, a, None, ())]
        for _, b in found:
            lst = out.get(b.name)
            if lst is None:
                out[b.name] = [b]
            else:
                lst.append(b)
        return out


def _class_body_nodes(classes) -> set:
    """The ids of the nodes the bodies of these classes hold (the statements of nested
    functions excluded: they are other scopes)."""
    out = set()
    todo = [stmt for c in classes for stmt in c.body]
    while todo:
        n = todo.pop()
        out.add(id(n))
        if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


class BindingsMixin:
    def binding_table(self, scope: Function) -> BindingTable:
        """The (cached) binding table of ``scope``."""
        t = scope.binding_table
        if t is None:
            t = scope.binding_table = BindingTable(scope)
        return t

    def bindings(self, name: str, scope: Function) -> List[Binding]:
        """Every binding of ``name`` in ``scope`` itself (no walk), parameters first."""
        return self.binding_table(scope).of(name)

    @staticmethod
    def resolve_scope(name: str, scope: Optional[Function]) -> Optional[Function]:
        """The scope whose binding of ``name`` code in ``scope`` sees (walking outward,
        honouring ``global``/``nonlocal``); ``None`` when no scope of the module binds it."""
        s = scope
        while s is not None:
            if name in s.locals:
                return s
            s = s.parent
        return None

    def lookup(self, name: str, scope: Function) -> List[Binding]:
        """The bindings of ``name`` that code in ``scope`` may see: those of the scope
        it resolves to (``[]`` for a builtin or an undefined name)."""
        s = self.resolve_scope(name, scope)
        return [] if s is None else self.binding_table(s).of(name)

    def single_value(self, name: str, scope: Function) -> Optional[ast.expr]:
        """The value ``name`` surely holds where it resolves from ``scope``: that scope
        binds it exactly once, by a plain ``name = value`` or ``name: T = value`` with
        ``name`` as the whole target, or by a parallel assignment (``a, b = x, y``: its
        element).  ``None`` for a parameter, def, class, import, an unresolved name, or one
        also bound by ``+=``, a loop/``with``/walrus target or other unpacking."""
        bs = self.lookup(name, scope)
        if len(bs) != 1:
            return None
        b = bs[0]
        if b.kind != ASSIGN or b.node.__class__ not in (ast.Assign, ast.AnnAssign):
            return None
        if b.path:
            # ``env, buffer = Env(), Buffer()``: a parallel assignment gives each name its element
            t = b.node.targets[0] if b.node.__class__ is ast.Assign and len(b.node.targets) == 1 else None
            v = b.value
            if len(b.path) != 1 or t.__class__ not in (ast.Tuple, ast.List) \
                    or v.__class__ not in (ast.Tuple, ast.List) or len(t.elts) != len(v.elts) \
                    or any(e.__class__ is ast.Starred for e in t.elts + v.elts):
                return None
            return v.elts[b.path[0]]
        return b.value   # type: ignore[return-value]

    # ------------------------------------------------- the model's own uses
    def _bindings(self, fn: Function) -> List[Tuple[ast.expr, ast.AST, str]]:
        return self.binding_table(fn).entries

    def _alias(self, name: str, scope: Function) -> Optional[ast.expr]:
        """``name = <callable expression>`` bound once in the scope ``name`` resolves to."""
        s = self.resolve_scope(name, scope)
        return None if s is None else self.binding_table(s).aliases().get(name)

    def _aliases_of(self, scope: Function) -> Dict[str, ast.expr]:
        return self.binding_table(scope).aliases()
