"""Literal parsers for transform arguments: ``static_argnums=(0, 2)``,
``static_argnums=range(3)``, ``static_argnames=("n", "mode")``."""
from __future__ import annotations

import ast
from typing import List, Optional


def literal_ints(node: Optional[ast.expr]) -> Optional[List[int]]:
    """The ints of a literal int, ``-int``, ``range(literals)`` or tuple/list of them;
    ``[]`` for no node, ``None`` when not a literal."""
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return [node.value]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return [-v] if isinstance(v, int) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and 1 <= len(node.args) <= 3 and not node.keywords:
        bounds = [literal_ints(a) for a in node.args]
        if all(b is not None and len(b) == 1 for b in bounds):
            return list(range(*[b[0] for b in bounds]))
        return None
    if isinstance(node, (ast.Tuple, ast.List)):
        out: List[int] = []
        for e in node.elts:
            sub = literal_ints(e)
            if sub is None or len(sub) != 1:
                return None
            out.extend(sub)
        return out
    return None

def literal_strs(node: Optional[ast.expr]) -> Optional[List[str]]:
    """The strings of a literal str or tuple/list of them; ``[]`` for no node, ``None``
    when not a literal."""

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
