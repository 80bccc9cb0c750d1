"""Bindings: what each scope binds, and where a name resolves (a part of
:class:`~jaxlint.analysis.model.SemanticModel`)."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from .scopes import Function


class BindingsMixin:
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
