"""Attribute and method names that hold static Python values, wherever a class
declares them.

A pytree class says which of its fields are static metadata -- JAX's registration rules as
data: ``flax.struct.field(pytree_node=False)``, ``eqx.field(static=True)``,
``dataclasses.field(metadata=dict(static=True))`` and ``register_dataclass(...,
meta_fields=[...])``, every attribute of a ``register_static`` class, the auxiliary data a
``tree_flatten`` returns -- and
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
from typing import Dict, List, Optional, Set, Tuple

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
    """A field JAX's pytree registration leaves out of the leaves: ``struct.field(pytree_node=False)``
    (Flax), ``eqx.field(static=True)``/``static_field()`` (Equinox), and a dataclass field whose
    metadata says ``static`` (``dataclasses.field(metadata=dict(static=True))``, read by
    ``jax.tree_util.register_dataclass``)."""
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
        if kw.arg == "metadata" and _says_static(kw.value):
            return True
    return False


def _says_static(meta: ast.AST) -> bool:
    """``dict(static=True)`` or ``{"static": True}``."""
    if isinstance(meta, ast.Call) and _terminal(meta.func) == "dict":
        return any(kw.arg == "static" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                   for kw in meta.keywords)
    if isinstance(meta, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "static" and isinstance(v, ast.Constant)
                   and v.value is True for k, v in zip(meta.keys, meta.values))
    return False


def _strings(e: Optional[ast.AST]) -> List[str]:
    """The string literals of a list/tuple display (``meta_fields=["n", "axis"]``)."""
    if isinstance(e, (ast.List, ast.Tuple)):
        return [x.value for x in e.elts if isinstance(x, ast.Constant) and isinstance(x.value, str)]
    return []


def _registration(call: ast.AST) -> Tuple[Optional[str], List[str]]:
    """``(kind, meta fields)`` of a pytree registration call or decorator:
    ``register_static`` (every attribute is static) or ``register_dataclass(..., meta_fields=[...])``
    (those fields are), also spelled ``functools.partial(register_dataclass, meta_fields=...)``."""
    if not isinstance(call, (ast.Call, ast.Name, ast.Attribute)):
        return None, []
    if isinstance(call, ast.Call) and _terminal(call.func) == "partial" and call.args:
        inner = ast.Call(func=call.args[0], args=[], keywords=call.keywords)
        return _registration(inner)
    term = _terminal(call.func if isinstance(call, ast.Call) else call)
    if term == "register_static":
        return "static", []
    if term == "register_dataclass" and isinstance(call, ast.Call):
        meta = next((kw.value for kw in call.keywords if kw.arg == "meta_fields"), None)
        if meta is None and len(call.args) >= 3:
            meta = call.args[2]
        return "dataclass", _strings(meta)
    return None, []


def _attributes_of(cls: ast.ClassDef) -> Set[str]:
    """Every attribute a class declares or assigns (``x: int``, ``self.x = ...``)."""
    out: Set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            out.add(n.attr)
    return out


def _dataclass_fields(cls: ast.ClassDef):
    """``(name, default)`` of the annotated fields of a class body."""
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            yield stmt.target.id, stmt.value


def _aux_attributes(cls: ast.ClassDef) -> Set[str]:
    """The attributes a ``tree_flatten(self)`` returns as auxiliary data (its second item:
    ``return (self.a,), (self.n,)``): JAX keeps them in the treedef, static."""
    return _flattened_attributes(cls, 1)


def _flattened_attributes(cls: ast.ClassDef, item: int) -> Set[str]:
    """The ``self`` attributes item ``item`` of what a ``tree_flatten(self)`` returns holds (0: the
    children, 1: the auxiliary data), as a tuple, a list, a dict's values or one attribute."""
    out: Set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "tree_flatten":
            for r in ast.walk(stmt):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple) and len(r.value.elts) == 2:
                    part = r.value.elts[item]
                    items = list(part.values) if isinstance(part, ast.Dict) else \
                        (part.elts if isinstance(part, (ast.Tuple, ast.List)) else [part])
                    out.update(x.attr for x in items if isinstance(x, ast.Attribute)
                               and isinstance(x.value, ast.Name) and x.value.id == "self")
    return out


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
    classes: Dict[str, ast.ClassDef] = {}
    calls: List[ast.Call] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args \
                and isinstance(node.value.args[0], ast.Name):
            calls.append(node.value)
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
            for dec in node.decorator_list:
                kind, meta = _registration(dec)
                if kind == "static":
                    fields |= _attributes_of(node)
                fields.update(meta)
            fields |= _aux_attributes(node)
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
    for call in calls:
        # ``jax.tree_util.register_static(Config)``, ``register_dataclass(State, [...], [...])``
        registered = classes.get(call.args[0].id)
        kind, meta = _registration(call)
        if registered is not None and kind == "static":
            fields |= _attributes_of(registered)
        elif registered is not None and kind == "dataclass":
            fields.update(meta)
            fields.update(f for f, v in _dataclass_fields(registered) if v is not None and _static_field(v))
    return fields, methods


# Bases and decorators that make a class a pytree whose fields are leaves (traced under a
# transform) unless declared static: ``typing.NamedTuple``, ``flax.struct.PyTreeNode``,
# ``equinox.Module``, Flax's ``TrainState``; ``@flax.struct.dataclass``, ``@chex.dataclass``,
# ``register_dataclass`` and ``register_pytree_node_class`` (whose ``tree_flatten`` names the
# children).  Matched by the dotted spelling, since a plain ``@dataclasses.dataclass`` is no pytree.
_RECORD_BASES = frozenset({"NamedTuple", "typing.NamedTuple", "PyTreeNode", "struct.PyTreeNode",
                           "flax.struct.PyTreeNode", "eqx.Module", "equinox.Module",
                           "TrainState", "train_state.TrainState", "flax.training.train_state.TrainState"})
_RECORD_DECORATORS = frozenset({"struct.dataclass", "flax.struct.dataclass", "chex.dataclass",
                                "register_dataclass", "jax.tree_util.register_dataclass",
                                "tree_util.register_dataclass"})
_NODE_CLASS_DECORATORS = frozenset({"register_pytree_node_class", "register_pytree_with_keys_class"})
# what ``from flax.struct import dataclass`` / ``from chex import dataclass`` make ``@dataclass`` mean
_RECORD_DATACLASS_MODULES = frozenset({"flax.struct", "chex"})
# fields of library pytrees that hold arrays: Flax's ``TrainState`` (``step``, ``params``,
# ``opt_state``) and optax's optimizer states (``count``, ``mu``, ``nu``...), what the
# init/update and create/apply_gradients protocols hand to traced code
LIBRARY_DATA_FIELDS = frozenset({"step", "params", "opt_state", "count", "mu", "nu", "batch_stats",
                                 "inner_state", "hyperparams"})


def _dotted(e: ast.AST) -> str:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
        return ".".join(reversed(parts))
    return ""


def data_names(tree: ast.Module) -> Set[str]:
    """Field names that a pytree class of ``tree`` declares as leaves (data, traced under a
    transform): the annotated fields of a NamedTuple, a ``flax.struct`` dataclass, a
    registered dataclass, an Equinox module, a ``TrainState`` subclass (less those declared
    static), a ``namedtuple(...)``'s fields, and the ``self`` attributes a ``tree_flatten``
    returns as children.  An attribute of an object whose class the analysis cannot name is
    known to be traced only when its name is one of these (or a library pytree's data field):
    JAX traces a pytree's leaves and keeps its metadata static, and which is which is declared
    by the class."""
    out: Set[str] = set()
    record_dataclass = False
    records: Set[str] = set()
    classes: Dict[str, ast.ClassDef] = {}
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args \
                and isinstance(node.value.args[0], ast.Name):
            # ``jax.tree_util.register_dataclass(State, ...)``, ``register_pytree_node_class(C)``
            term = _terminal(node.value.func)
            cls = classes.get(node.value.args[0].id)
            if cls is not None and term == "register_dataclass":
                out.update(f for f, v in _dataclass_fields(cls) if v is None or not _static_field(v))
            elif cls is not None and term in _NODE_CLASS_DECORATORS:
                out |= _child_attributes(cls)
        elif isinstance(node, ast.ImportFrom) and node.module in _RECORD_DATACLASS_MODULES \
                and any(a.name == "dataclass" and a.asname is None for a in node.names):
            record_dataclass = True
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _terminal(node.value.func) in ("namedtuple", "NamedTuple") and len(node.value.args) >= 2:
            fields = node.value.args[1]
            if isinstance(fields, ast.Constant) and isinstance(fields.value, str):
                out.update(fields.value.replace(",", " ").split())
            elif isinstance(fields, (ast.List, ast.Tuple)):
                for x in fields.elts:
                    if isinstance(x, ast.Tuple) and x.elts:
                        x = x.elts[0]
                    if isinstance(x, ast.Constant) and isinstance(x.value, str):
                        out.add(x.value)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
            decorators = [_dotted(d.func if isinstance(d, ast.Call) and _terminal(d.func) != "partial"
                                  else (d.args[0] if isinstance(d, ast.Call) and d.args else d))
                          for d in node.decorator_list]
            record = any(b in _RECORD_BASES or b in records for b in map(_dotted, node.bases)) \
                or any(d in _RECORD_DECORATORS or (d == "dataclass" and record_dataclass) for d in decorators)
            if record:
                records.add(node.name)
                out.update(f for f, v in _dataclass_fields(node) if v is None or not _static_field(v))
            if any(d.rpartition(".")[2] in _NODE_CLASS_DECORATORS for d in decorators):
                out |= _child_attributes(node)
            todo.extend(s for s in node.body if isinstance(s, ast.ClassDef))
        elif isinstance(node, (ast.If, ast.Try)):
            todo.extend(node.body)
    return out


def _child_attributes(cls: ast.ClassDef) -> Set[str]:
    """The ``self`` attributes a ``tree_flatten(self)`` returns as children (its first item)."""
    return _flattened_attributes(cls, 0)


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



def is_staticmethod(node: ast.AST) -> bool:
    """``@staticmethod``: no ``self`` to leave out of its parameters; one plain function at every
    access."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def plain_method_names(tree: ast.Module) -> Set[str]:
    """The method names every class of ``tree`` that defines them declares ``@staticmethod``."""
    static, other = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    (static if is_staticmethod(f) else other).add(f.name)
    return static - other
