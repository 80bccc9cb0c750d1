"""Fresh identifiers for fixes that introduce a name (a hoisted key, a loop body, ...).

One helper for every rule, so two fixes agree on what "free" means:

    taken = names_in_scope(ctx.model, fn)
    name = fresh_name(taken, "loop_body", sep="_")         # loop_body, loop_body_2, loop_body_3, ...
    name = fresh_name(taken | {old}, "subkey")              # subkey, subkey2, ...
    name = fresh_name(taken, "base_key", alternatives=("outer_key", "root_key"))
"""
from __future__ import annotations

import ast
import keyword
from typing import AbstractSet, Iterable, Set

__all__ = ["fresh_name", "names_in_scope"]


def fresh_name(taken: AbstractSet[str], base: str, *, alternatives: Iterable[str] = (),
               sep: str = "", start: int = 2) -> str:
    """The first of ``base``, then ``alternatives``, then ``base{sep}{start}``,
    ``base{sep}{start+1}``, ... that is not in ``taken`` and is not a Python keyword.

    ``base`` must be an identifier; callers that derive it from user code check that
    first (``str.isidentifier``).  Pass the name being replaced in ``taken`` when the
    new name must differ from it.
    """
    if not base.isidentifier():
        raise ValueError(f"fresh_name: {base!r} is not an identifier")

    def free(name: str) -> bool:
        return name.isidentifier() and not keyword.iskeyword(name) and name not in taken

    for cand in (base, *alternatives):
        if free(cand):
            return cand
    i = start
    while not free(f"{base}{sep}{i}"):
        i += 1
    return f"{base}{sep}{i}"


def _loaded(node: ast.AST) -> Set[str]:
    body = getattr(node, "body", None)
    roots = body if isinstance(body, list) else [body if body is not None else node]
    out: Set[str] = set()
    for r in roots:
        for n in ast.walk(r):
            if n.__class__ is ast.Name:
                out.add(n.id)
    return out


def names_in_scope(model, fn, *, include_children: bool = True) -> Set[str]:
    """Every name a new binding in ``fn`` could clash with.

    The module's bindings and import aliases, the bindings of ``fn`` and every
    enclosing scope, every name read or written in the enclosing function
    scopes (globals and builtins they use), and, with ``include_children``,
    the bindings and names of functions nested in ``fn``.  A superset is safe:
    it only makes the chosen name longer.
    """
    taken: Set[str] = set(model.module.locals) | set(model.imports.aliases)
    s = fn
    while s is not None:
        taken |= set(s.locals)
        if not s.is_module:
            taken |= _loaded(s.node)
        s = s.parent
    if include_children and fn is not None:
        for child in fn.children:
            taken |= set(child.locals)
            taken |= _loaded(child.node)
    return taken
