"""Attribute and method names that hold static Python values, wherever a class
declares them.

A pytree class says which of its fields are static metadata
(``flax.struct.field(pytree_node=False)``, ``eqx.field(static=True)``) and
which of its methods return Python values (``def num_links(self) -> int``).
Code that receives such an object under ``jit`` -- often in another module --
reads ``sys.link_types`` or ``range(sys.num_links())``: static values, not
tracers.  These declarations are collected per module (and over the whole
project by :mod:`jaxlint.analysis.project`) and the model treats the names as
static.  Names are matched without types, so the collection only ever makes
jaxlint quieter, and it leaves out method names that JAX arrays also have
(``x.sum()`` stays an array).
"""
from __future__ import annotations

import ast
from typing import Set, Tuple

# return annotations of methods whose result is a Python value
STATIC_RETURNS = frozenset({"int", "bool", "str", "bytes"})
# methods of jax.Array: a class's `def sum(self) -> int` must not make `x.sum()` static everywhere
ARRAY_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argsort", "astype", "clip", "conj", "conjugate", "copy",
    "cumprod", "cumsum", "diagonal", "dot", "flatten", "item", "max", "mean", "min", "nonzero",
    "prod", "ptp", "ravel", "repeat", "reshape", "round", "searchsorted", "sort", "squeeze",
    "std", "sum", "swapaxes", "take", "tolist", "trace", "transpose", "var", "view", "block_until_ready",
})
_FIELD_CALLS = frozenset({"field", "static_field"})


def _terminal(e: ast.AST) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    return ""


def _static_field(value: ast.AST) -> bool:
    """``struct.field(pytree_node=False)``, ``eqx.field(static=True)``, ``static_field()``."""
    if not isinstance(value, ast.Call) or _terminal(value.func) not in _FIELD_CALLS:
        return False
    if _terminal(value.func) == "static_field":
        return True
    for kw in value.keywords:
        if isinstance(kw.value, ast.Constant):
            if kw.arg == "pytree_node" and kw.value.value is False:
                return True
            if kw.arg == "static" and kw.value.value is True:
                return True
    return False


def _static_return(fn: ast.AST) -> bool:
    ann = fn.returns
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if ann is None:
        return False
    # ``Optional[int]``, ``int | None``, ``Union[int, None]``: still a Python value
    if isinstance(ann, ast.Subscript) and _terminal(ann.value) in ("Optional", "Union"):
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    elif isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [ann.left, ann.right]
    else:
        parts = [ann]
    parts = [x for x in parts if not (isinstance(x, ast.Constant) and x.value is None)]
    return bool(parts) and all(_terminal(x) in STATIC_RETURNS for x in parts)


def static_names(tree: ast.Module) -> Tuple[Set[str], Set[str]]:
    """``(attribute names, method names)`` declared static by the classes of ``tree``."""
    fields: Set[str] = set()
    methods: Set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                        and stmt.value is not None and _static_field(stmt.value):
                    fields.add(stmt.target.id)
                elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and _static_return(stmt) \
                        and stmt.name not in ARRAY_METHODS and not stmt.name.startswith("__"):
                    if any(_terminal(d) == "property" for d in stmt.decorator_list):
                        fields.add(stmt.name)
                    else:
                        methods.add(stmt.name)
                elif isinstance(stmt, ast.ClassDef):
                    todo.append(stmt)
        elif isinstance(node, (ast.If, ast.Try)):
            todo.extend(node.body)
    return fields, methods


ENUM_BASES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})


def module_constants(tree: ast.Module) -> Set[str]:
    """Names (relative to the module) of its string constants (``MODE_TRAIN = "train"``)
    and enum members (``Mode.TRAIN`` of ``class Mode(enum.Enum)``): values another module
    compares configuration with, never arrays."""
    out: Set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            out.add(stmt.targets[0].id)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            out.add(stmt.target.id)
        elif isinstance(stmt, ast.ClassDef) and any(_terminal(b) in ENUM_BASES for b in stmt.bases):
            for item in stmt.body:
                if isinstance(item, ast.Assign):
                    out.update(f"{stmt.name}.{t.id}" for t in item.targets if isinstance(t, ast.Name))
    return out

