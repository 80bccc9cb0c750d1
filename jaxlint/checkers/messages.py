"""Message text shared by every rule: how code is quoted in a finding."""
from __future__ import annotations

import ast

# the longest code excerpt a message quotes before it is cut with "..."
SHORT_LIMIT = 40


def short(node: ast.AST, limit: int = SHORT_LIMIT) -> str:
    """``node`` as source text on one line, cut to ``limit`` characters.

    Every rule quotes code through this one function so that messages read
    alike: a name as itself, anything else unparsed with its whitespace
    collapsed (a call spread over lines reads as one line) and cut with
    ``...`` when longer than ``limit``.
    """
    text = node.id if isinstance(node, ast.Name) else ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
