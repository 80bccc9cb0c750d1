"""Names the PRNG fixes write: how the module spells ``jax.random.split`` and fresh names for
the keys a fix introduces (JAX401's split subkey, JAX402's hoisted base key)."""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Tuple

from ...analysis import Function
from ...fixes.edits import Edit
from ...fixes.imports import module_alias
from ...fixes.names import fresh_name, names_in_scope
from ..base import Context

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def split_spelling(ctx: Context, fn: Function) -> Tuple[str, List[Edit]]:
    """How this module spells ``jax.random.split`` (``jr.split``, ``random.split``, ``split``),
    adding ``import jax`` when it has no spelling; ``(text, import edits)``."""
    m = ctx.model
    local = m.imports.local_name_for("jax.random.split")
    if local is not None:
        owner = m.resolve_scope(local.split(".")[0], fn)
        if owner is None or owner.is_module:      # not shadowed by a local of a function
            return local, []
    jax_name, edits = module_alias(m, ctx.source, "jax", "jax")
    return f"{jax_name}.random.split", edits


def _split_style(ctx: Context) -> Optional[Tuple[str, str]]:
    """The module's own split naming: ("prefix", "sub") from ``key, subkey = split(key)``,
    ("suffix", "_sub") from ``rng, rng_sub = split(rng)``."""
    m = ctx.model
    for fn in m.functions:
        for node in fn.of_type(ast.Assign):
            t = node.targets[0]
            v = node.value
            if not (isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(v, ast.Call) and v.args
                    and all(isinstance(e, ast.Name) for e in t.elts) and isinstance(v.args[0], ast.Name)):
                continue
            a, b = t.elts[0].id, t.elts[1].id
            if v.args[0].id != a or m.qualname(v.func, fn) != "jax.random.split":
                continue
            if b.endswith(a) and "sub" in b[: -len(a)]:
                return ("prefix", b[: -len(a)])
            if b.startswith(a) and "sub" in b[len(a):]:
                return ("suffix", b[len(a):])
    return None


def subkey_name(ctx: Context, fn: Function, name: str) -> str:
    """A fresh name for the subkey split off ``name``, in the module's naming style
    (``subkey``, ``dropout_subkey``, ``rng_sub``)."""
    kind, affix = _split_style(ctx) or ("prefix", "sub")
    if kind == "prefix":
        head, sep, last = name.rpartition("_")
        base = f"{head}{sep}{affix}{last}"
    else:
        base = name + affix
    if not _IDENTIFIER.fullmatch(base):
        base = "sub" + name
    return fresh_name(names_in_scope(ctx.model, fn) | {name}, base)


_BASE_PREFIXES = ("base_", "outer_", "root_")


def base_key_name(ctx: Context, fn: Function, name: str) -> str:
    """A new name for a key hoisted above a loop: ``base_key`` (``outer_key`` when hoisting
    ``base_key``)."""
    root = name
    for p in _BASE_PREFIXES:
        if root.startswith(p) and len(root) > len(p):
            root = root[len(p):]
            break
    cands = [p + root for p in _BASE_PREFIXES if p + root != name]
    return fresh_name(names_in_scope(ctx.model, fn), cands[0], alternatives=cands[1:])
