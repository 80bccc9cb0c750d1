"""Classes of this module that are surely *not* pytrees, and values that are surely
instances of one.  Anything in doubt (an imported base, a decorator, a metaclass, a
registration call, a class defined elsewhere) counts as a pytree: the rule stays silent."""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set

from ...analysis import ClassInfo, Function, SemanticModel

# bases that keep a class a plain Python object
PLAIN_BASES = frozenset({"object", "abc.ABC"})
# decorators that keep a class a plain Python object (a plain dataclass is not a pytree:
# shown with JAX, ``TypeError: Error interpreting argument ... as an abstract array``)
PLAIN_DECORATORS = frozenset({"dataclasses.dataclass", "functools.total_ordering"})
# methods that make JAX see through (or convert) an object
PYTREE_METHODS = frozenset({"tree_flatten", "tree_unflatten", "tree_flatten_with_keys",
                            "__jax_array__", "__array__"})


class PlainClasses:
    def __init__(self, model: SemanticModel):
        self.m = model
        self._plain: Dict[int, bool] = {}
        self._registered: Optional[Set[str]] = None

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
    def instance_of(self, e: ast.expr, scope: Function) -> Optional[ClassInfo]:
        """The plain class ``e`` is surely an instance of: ``Config(...)`` or a name bound
        only to such calls."""
        if isinstance(e, ast.Call):
            return self._constructed(e, scope)
        if isinstance(e, ast.Name):
            values = bindings(scope, e.id)
            if not values:
                return None
            classes = {id(c): c for c in (self._constructed(v, s) for v, s in values)}
            if len(classes) == 1 and None not in classes.values():
                return next(iter(classes.values()))
        return None

    def _constructed(self, e: ast.expr, scope: Function) -> Optional[ClassInfo]:
        if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Name):
            return None
        name = e.func.id
        info = self.m.classes.get(name)
        if info is None or self.m.qualname(e.func, scope) is not None:
            return None
        s = scope
        while s is not None and not s.is_module:
            if name in s.locals:
                return None    # a local of that name hides the class
            s = s.parent
        return info if self.is_plain(info) else None


def bindings(scope: Function, name: str):
    """``[(value, scope)]`` of every binding of ``name`` in the scope that owns it, if each is
    a plain ``name = value``; ``[]`` when any binding is something else (a parameter, a loop
    target, unpacking, ``global``)."""
    s = scope
    while s is not None and not (name in s.locals and name not in s.globals_declared):
        s = s.parent
    if s is None or name in s.param_nodes:
        return []
    out = []
    for a in s.of_type(ast.Assign):
        for t in a.targets:
            if isinstance(t, ast.Name):
                if t.id == name:
                    out.append((a.value, s))
            elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                return []
    for a in s.of_type(ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.withitem,
                       ast.comprehension):
        t = getattr(a, "target", None) or getattr(a, "optional_vars", None)
        if t is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
            if isinstance(a, ast.AnnAssign) and a.value is not None and isinstance(t, ast.Name):
                out.append((a.value, s))
                continue
            return []
    for fn in s.children:
        if name in fn.globals_declared:
            return []
    return out


def plain_classes(model: SemanticModel) -> PlainClasses:
    return model.facts(PlainClasses)
