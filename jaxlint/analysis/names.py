"""Import aliases: from local spellings to qualified names.

``import jax.numpy as jnp``            jnp   -> jax.numpy
``import jax.numpy``                   jax   -> jax   (and jax.numpy.* resolves through it)
``from jax import jit, random as jr``  jit   -> jax.jit, jr -> jax.random
``from functools import partial``      partial -> functools.partial
``from flax import nnx``               nnx   -> flax.nnx

Imports anywhere in the file (module level, inside functions, under ``try``)
are recorded; a later import of the same local name wins, which matches the
common ``try: import a as x / except ImportError: import b as x`` idiom well
enough for linting.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Optional


# the top-level packages of the JAX ecosystem (a name bound to one of them wins over a fallback)
_JAX_TOPS = frozenset({"jax", "jaxlib", "flax", "optax", "equinox", "haiku", "chex"})


class ImportTable:
    def __init__(self, package: Optional[str] = None) -> None:
        """``package``: the package this module belongs to (``pkg.sub`` for
        ``pkg/sub/train.py``; ``""`` for a top-level module): relative imports
        then resolve to absolute names.  ``None``: unknown, relative imports keep
        their leading dots."""
        self.aliases: Dict[str, str] = {}
        # names bound both to a JAX-ecosystem module and to another (``import jax.numpy as np`` at
        # the top, ``import numpy as np`` in a branch): which one code outside a trace sees
        # depends on the order it runs in
        self.ambiguous: set = set()
        self.modules: set = set()
        self.package = package

    def _relative_base(self, level: int, module: Optional[str]) -> Optional[str]:
        """The absolute package a relative import names, or None."""
        if self.package is None:
            return None
        parts = self.package.split(".") if self.package else []
        if level - 1 > len(parts):
            return None
        parts = parts[:len(parts) - (level - 1)]
        if module:
            parts.append(module)
        return ".".join(parts)

    def _bind(self, alias: str, target: str) -> None:
        """``alias`` now names ``target`` -- unless it already names a JAX-ecosystem module and
        ``target`` is a fallback (``try: import jax.numpy as jnp`` / ``except ImportError:
        import numpy as jnp``): code that JAX traces runs with JAX imported, so under a trace the
        name is JAX's."""
        old = self.aliases.get(alias)
        if old is not None and (old.split(".")[0] in _JAX_TOPS) != (target.split(".")[0] in _JAX_TOPS):
            self.ambiguous.add(alias)
        if old is not None and old.split(".")[0] in _JAX_TOPS and target.split(".")[0] not in _JAX_TOPS:
            return
        self.aliases[alias] = target

    def add(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                self.modules.add(a.name.split(".")[0])
                if a.asname:
                    self._bind(a.asname, a.name)
                else:
                    top = a.name.split(".")[0]
                    self.aliases.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative import: a sibling module of this package
                absolute = self._relative_base(node.level, node.module)
                base = absolute if absolute is not None else "." * node.level + (node.module or "")
            else:
                base = node.module or ""
            if base and not node.level:
                self.modules.add(base.split(".")[0])
            for a in node.names:
                if a.name == "*":
                    continue
                self._bind(a.asname or a.name, f"{base}.{a.name}" if base else a.name)

    def resolve(self, name: str) -> Optional[str]:
        return self.aliases.get(name)

    def mentions_any(self, tops: Iterable[str]) -> bool:
        return any(t in self.modules for t in tops)

    def local_name_for(self, qualname: str) -> Optional[str]:
        """A local spelling that reaches ``qualname`` (``jax.numpy`` -> ``jnp``)."""
        best = None
        for local, q in self.aliases.items():
            if q == qualname:
                return local
            if qualname.startswith(q + "."):
                cand = local + qualname[len(q):]
                if best is None or len(cand) < len(best):
                    best = cand
        return best


def class_like(f: ast.AST) -> bool:
    """A callee named like a class (``Problem``, ``gwb.GWBarycenterProblem``): a constructor."""
    name = f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else ""
    return name[:1].isupper() and not name.isupper()
