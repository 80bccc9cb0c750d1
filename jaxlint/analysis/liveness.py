"""Dead values: is what a statement bound ever read?

``eval_keys = setup(key)`` followed by a loop whose body rebinds ``eval_keys`` before it
reads it, and a rebinding after the loop: the value the first statement made is never
read on any path.  Rules ask this (through ``SemanticModel.dead_after``) when a finding
would rest on a value nobody reads -- the numbers a key consumer drew and then threw away
repeat nothing.

The scan is conservative: a read on any path, a ``break``/``continue`` that leaves the
straight line, a nested function or class that mentions the name, or the end of a block
that is not the function's own body all count as "maybe read".
"""
from __future__ import annotations

import ast
from typing import FrozenSet, Iterable, List, Optional, Set, Tuple

READ = "read"

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def bound_names(t: ast.AST) -> List[str]:
    """The plain names an assignment target binds (``a, (b, *c)`` -> a, b, c)."""
    if t.__class__ is ast.Name:
        return [t.id]
    if t.__class__ in (ast.Tuple, ast.List):
        out: List[str] = []
        for e in t.elts:
            out.extend(bound_names(e))
        return out
    if t.__class__ is ast.Starred:
        return bound_names(t.value)
    return []


def _reads(node: Optional[ast.AST], alive: Set[str]) -> bool:
    if node is None or not alive:
        return False
    for n in ast.walk(node):
        if n.__class__ is ast.Name and n.id in alive and n.ctx.__class__ is not ast.Store:
            return True
    return False


def _target_reads(t: ast.AST, alive: Set[str]) -> bool:
    """Parts of a target that are evaluated (``x[i] = ...`` reads ``x`` and ``i``)."""
    if t.__class__ is ast.Name:
        return False
    if t.__class__ in (ast.Tuple, ast.List):
        return any(_target_reads(e, alive) for e in t.elts)
    if t.__class__ is ast.Starred:
        return _target_reads(t.value, alive)
    return _reads(t, alive)


def scan(stmts: Iterable[ast.stmt], alive: Set[str], exits: bool = True) -> Tuple[str, Set[str]]:
    """Run ``stmts`` in order: (READ, _) when some path reads a name of ``alive`` before
    rebinding it; else ("ok", the names some path leaves un-rebound at the end; empty when
    every path rebinds them all or, with ``exits``, leaves the function)."""
    alive = set(alive)
    for s in stmts:
        if not alive:
            return "ok", alive
        c = s.__class__
        if c is ast.Assign:
            if _reads(s.value, alive) or any(_target_reads(t, alive) for t in s.targets):
                return READ, alive
            for t in s.targets:
                alive.difference_update(bound_names(t))
        elif c is ast.AnnAssign:
            if _reads(s.value, alive) or _target_reads(s.target, alive):
                return READ, alive
            if s.value is not None:
                alive.difference_update(bound_names(s.target))
        elif c is ast.AugAssign:
            if _reads(s.value, alive) or _reads(s.target, alive) or \
                    (s.target.__class__ is ast.Name and s.target.id in alive):
                return READ, alive
        elif c in _LOOPS:
            head = s.test if c is ast.While else s.iter
            if _reads(head, alive) or (c is not ast.While and _target_reads(s.target, alive)):
                return READ, alive
            inner = alive - (set(bound_names(s.target)) if c is not ast.While else set())
            if _loop_exits(s.body) or scan(s.body, inner, exits)[0] == READ:
                return READ, alive
            # the body may run zero times: what it rebinds stays alive after the loop
            got, after = scan(s.orelse, alive, exits)
            if got == READ:
                return READ, alive
            alive = after
        elif c is ast.If:
            if _reads(s.test, alive):
                return READ, alive
            a, a_after = scan(s.body, alive, exits)
            b, b_after = scan(s.orelse, alive, exits)
            if READ in (a, b):
                return READ, alive
            alive = a_after | b_after
        elif c in (ast.With, ast.AsyncWith):
            if any(_reads(i.context_expr, alive) or
                   (i.optional_vars is not None and _target_reads(i.optional_vars, alive)) for i in s.items):
                return READ, alive
            for i in s.items:
                if i.optional_vars is not None:
                    alive.difference_update(bound_names(i.optional_vars))
            got, alive = scan(s.body, alive, exits)
            if got == READ:
                return READ, alive
        elif c is ast.Try or c.__name__ == "TryStar":
            got, after = scan(s.body, alive, exits)
            if got == READ:
                return READ, alive
            outs = [after]
            for h in s.handlers:
                # a handler may start anywhere in the body: from the names alive before it
                got, h_after = scan(h.body, alive, exits)
                if got == READ:
                    return READ, alive
                outs.append(h_after)
            got, e_after = scan(s.orelse, after, exits)
            if got == READ:
                return READ, alive
            outs[0] = e_after
            alive = set().union(*outs)
            got, alive = scan(s.finalbody, alive, exits)
            if got == READ:
                return READ, alive
        elif c is ast.Return:
            if _reads(s.value, alive):
                return READ, alive
            return "ok", set() if exits else alive
        elif c is ast.Raise:
            if _reads(s.exc, alive) or _reads(s.cause, alive):
                return READ, alive
            return "ok", set() if exits else alive
        elif c in (ast.Break, ast.Continue):
            return READ, alive          # (leaves the straight line: not followed)
        elif c in _DEFS:
            if _reads(s, alive):
                return READ, alive
            alive.discard(getattr(s, "name", None))
        elif c is ast.Delete:
            if any(_target_reads(t, alive) for t in s.targets):
                return READ, alive
            for t in s.targets:
                alive.difference_update(bound_names(t))
        elif c in (ast.Global, ast.Nonlocal):
            if alive & set(s.names):
                return READ, alive
        elif c in (ast.Pass,):
            pass
        else:
            if _reads(s, alive):
                return READ, alive
    return "ok", alive


def _loop_exits(body: List[ast.stmt]) -> bool:
    """A ``break`` of this loop (not of a nested one) somewhere in its body."""
    todo = list(body)
    while todo:
        s = todo.pop()
        if s.__class__ is ast.Break:
            return True
        if s.__class__ in _LOOPS or s.__class__ in _DEFS:
            continue
        for f in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(s, f, None) or [])
    return False


def dead_after(block: List[ast.stmt], stmt: ast.stmt, names: FrozenSet[str], exits: bool, whole: bool,
               closures: Iterable[ast.AST] = ()) -> bool:
    """Every name of ``names`` that ``stmt`` (a statement of ``block``) binds is rebound
    before any read on every path after it, or (``exits``: leaving the function counts)
    never read before the function returns (``whole``: ``block`` is the function's body,
    so falling off its end returns).  A nested function anywhere in the function
    (``closures``) that mentions one of them keeps it alive."""
    if not names:
        return True
    alive = set(names)
    for d in closures:
        if _reads(d, alive):
            return False
    i = next((j for j, s in enumerate(block) if s is stmt), None)
    if i is None:
        return False
    got, after = scan(block[i + 1:], alive, exits)
    if got == READ:
        return False
    return not after or (exits and whole)


# statements after which nothing of their block runs
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_BLOCKS = ("body", "orelse", "finalbody")


def unreachable_spans(tree: ast.Module) -> List[Tuple[int, int]]:
    """The line spans of statements no run reaches: those after a ``return``, ``raise``,
    ``continue`` or ``break`` in the same block (``return project(x)`` followed by the old
    ``x = lax.cond(...)`` a refactoring left behind).  Only the straight line counts: a block
    that ends in an ``if`` whose branches all return is not followed up (rare, and a
    conservative miss)."""
    spans: List[Tuple[int, int]] = []
    stack: List[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if isinstance(stmt, EXITS) and i + 1 < len(block):
                    rest = block[i + 1:]
                    spans.append((rest[0].lineno, getattr(rest[-1], "end_lineno", None) or rest[-1].lineno))
                    block = block[:i + 1]
                    break
            stack.extend(s for s in block if isinstance(s, ast.stmt))
        for h in getattr(node, "handlers", None) or ():
            stack.append(h)
        for c in getattr(node, "cases", None) or ():
            stack.append(c)
    return spans
