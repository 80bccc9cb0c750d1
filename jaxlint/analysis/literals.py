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


def literal_elements(node: Optional[ast.expr]) -> Optional[List[ast.expr]]:
    """The element nodes of a tuple/list display, also spelled with ``+`` and ``* n``
    (``in_axes=[0] + [None] * 9``); None when it is not one."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return None if any(isinstance(e, ast.Starred) for e in node.elts) else list(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = literal_elements(node.left), literal_elements(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for seq, n in ((node.left, node.right), (node.right, node.left)):
            elts = literal_elements(seq)
            count = literal_ints(n)
            if elts is not None and count is not None and len(count) == 1 and 0 <= count[0] <= 256:
                return elts * count[0]
    return None
