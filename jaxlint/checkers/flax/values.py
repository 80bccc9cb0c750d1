"""Values the Flax linen analysis reads off the syntax tree: constant strings, Python literals,
the :data:`UNKNOWN` marker for what a partial evaluation cannot decide, and the depth limit of
the analysis' recursive walks."""
from __future__ import annotations

import ast
from typing import Iterable, Optional, Set

# how deep the recursive walks (variables shapes, the module-body evaluator) go
MAX_DEPTH = 8


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover
        return "UNKNOWN"


UNKNOWN = _Unknown()


def const_str(e: Optional[ast.AST]) -> Optional[str]:
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    return None


def const_strs(nodes: Iterable[Optional[ast.AST]]) -> Optional[Set[str]]:
    """The constant strings ``nodes`` are (None if any one is not a constant string)."""
    out = set()
    for n in nodes:
        s = const_str(n)
        if s is None:
            return None
        out.add(s)
    return out


def dict_keys(e: ast.AST) -> Optional[Set[str]]:
    """The constant string keys of a dict literal (None if any key is not one, or ``**``)."""
    if not isinstance(e, ast.Dict):
        return None
    return const_strs(e.keys)


def literal(e: Optional[ast.AST]) -> object:
    """The value of a constant or ``not <constant>``; :data:`UNKNOWN` for anything else."""
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = literal(e.operand)
        return UNKNOWN if v is UNKNOWN else (not v)
    return UNKNOWN
