"""Objects that are mutable by design: Flax NNX ``Variable``\\ s and JAX refs (made by
``jax.new_ref``, or handed to a Pallas kernel by ``pallas_call``: :func:`kernel_ref`).

``v[...] += 1`` on an ``nnx.Param``, ``m[...] = x`` on a ``jax.new_ref(...)``
and ``var.value += x`` on a linen ``self.variable(...)`` are the APIs those
objects offer for in-place updates, and NNX transforms (``nnx.jit``,
``nnx.scan``...) carry the updates back to the caller.  Rules that report
item assignment on immutable arrays (JAX301) or mutation of arguments under a
transform (JAX105) ask :func:`mutable_by_design` first.
"""
from __future__ import annotations

import ast
from typing import Optional

from . import knowledge as K
from .statics import ARRAY_METHODS
from .scopes import Function

# calls that make a ref: its ``[...]`` is written on purpose
REF_MAKERS = frozenset({
    "jax.new_ref", "jax.array_ref", "jax.experimental.mutable_array", "jax._src.core.mutable_array",
    "jax.experimental.new_ref",
})
# annotations of a ref or a Variable
MUTABLE_ANNOTATIONS = frozenset({"Ref", "Variable", "Param", "BatchStat", "Cache", "VariableState",
                                 "MutableArray", "ArrayRef"})
# flax.linen scope methods returning a Variable
LINEN_VARIABLE_METHODS = frozenset({"variable"})


def _nnx_class(q: Optional[str]) -> bool:
    """``flax.nnx.Param``, ``flax.nnx.Variable``, ``flax.nnx.BatchStat``...: a class of
    flax.nnx (capitalised), i.e. a Variable type or a Module, both mutable objects."""
    if q is None or not q.startswith("flax.nnx."):
        return False
    last = q.rsplit(".", 1)[1]
    return last[:1].isupper()


def made_mutable(model, value: Optional[ast.AST], scope: Function) -> bool:
    """Is ``value`` an expression that makes a Variable or a ref?"""
    if not isinstance(value, ast.Call):
        return False
    q = model.qualname(value.func, scope)
    if q in REF_MAKERS or _nnx_class(q):
        return True
    f = value.func
    return (isinstance(f, ast.Attribute) and f.attr in LINEN_VARIABLE_METHODS and isinstance(f.value, ast.Name)
            and f.value.id == scope.self_name)


def mutable_by_design(model, e: ast.AST, fn: Function, _depth: int = 0) -> bool:
    """Does ``e`` (the object written into) hold an NNX Variable or a JAX ref?

    Known from its binding (``v = nnx.Param(1)``, ``m = jax.new_ref(x)``,
    ``baz = self.variable("counts", "baz", ...)``), its annotation
    (``m: jax.Ref``), from being a parameter of a function traced by an NNX
    transform (which passes Variables and Modules by reference), a ``.value``
    written through a parameter of a method under a Flax linen lifted transform,
    or a parameter every call site of this module fills with such an object."""
    through_value = False
    while isinstance(e, ast.Attribute) and e.attr == "value":
        e, through_value = e.value, True
    if not isinstance(e, ast.Name):
        return False
    scope = model.resolve_scope(e.id, fn)
    if scope is None:
        return False
    if made_mutable(model, model.single_value(e.id, scope), scope):
        return True
    arg = scope.param_nodes.get(e.id)
    if arg is None:
        return False
    ann = arg.annotation
    head = ann.value if isinstance(ann, ast.Subscript) else ann
    if isinstance(head, (ast.Name, ast.Attribute)):
        last = head.id if isinstance(head, ast.Name) else head.attr
        if last in MUTABLE_ANNOTATIONS:
            return True
    if any(c.transform.startswith("flax.nnx.") for c in scope.contexts):
        return True
    if through_value and any(c.transform.startswith("flax.linen.") for c in scope.contexts):
        return True
    return _depth < 2 and _filled_with_mutables(model, scope, e.id, _depth)


def _filled_with_mutables(model, fn: Function, param: str, depth: int) -> bool:
    """Every call of ``fn`` in this module passes a Variable or ref as ``param``."""
    if fn.is_lambda or fn.is_module:
        return False
    found = False
    for scope in model.functions:
        for call in scope.of_type(ast.Call):
            if not (isinstance(call.func, ast.Name) and call.func.id == fn.name):
                continue
            target = model.resolve_callable(call.func, scope)
            if target is None or target.function is not fn:
                continue
            pairs, _ = model.bind_arguments(target, call)
            args = [a for p, a in pairs if p == param]
            if not args or not all(mutable_by_design(model, a, scope, depth + 1) for a in args):
                return False
            found = True
    return found


# builtins whose argument is walked as a Python sequence
_SEQUENCE_CONSUMERS = frozenset({"enumerate", "zip", "list", "tuple", "reversed", "map"})
# methods only Python lists have (a JAX array has none of them)
_LIST_METHODS = frozenset({"append", "extend", "insert", "remove", "pop"})
# container types an ``isinstance`` test names
_CONTAINER_TYPES = frozenset({"list", "tuple", "dict", "Sequence", "Mapping", "MutableSequence",
                              "MutableMapping"})


def _root_name(e: ast.AST) -> Optional[str]:
    while isinstance(e, ast.Subscript):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def held_as_sequence(e: ast.AST, fn: Function) -> bool:
    """Does ``fn`` treat ``e`` (a name, or an item of one) as a Python container of arrays?

    A pytree of arrays (a list of per-layer caches, the cotangent of a function
    returning a list, the gradient of a list of parameters) is as traced as one
    array, and item assignment into it is fine.  The evidence, any of: the name is
    iterated (``for g in xs``, ``enumerate(xs)``, ``zip(xs, ...)``), has a list method
    called on it (``xs.append``), is tested with ``isinstance(xs, dict|list|...)``, or
    an item of it is updated functionally (``xs[i].at[...]``: an array holding arrays
    would be written ``xs.at[i, ...]``), or an item of it has an attribute no array has
    (``states[i].params``: the items are objects, a list of train states)."""
    name = _root_name(e)
    if name is None:
        return False

    def is_name(n: ast.AST) -> bool:
        return isinstance(n, ast.Name) and n.id == name

    for n in fn.walk():
        if isinstance(n, (ast.For, ast.comprehension)) and is_name(n.iter):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                if f.id in _SEQUENCE_CONSUMERS and any(is_name(a) for a in n.args):
                    return True
                if f.id == "isinstance" and len(n.args) == 2 and is_name(n.args[0]):
                    types = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
                    if any((t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute)
                            else "") in _CONTAINER_TYPES for t in types):
                        return True
            elif isinstance(f, ast.Attribute) and f.attr in _LIST_METHODS and is_name(f.value):
                return True
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Subscript) and is_name(n.value.value) \
                and (n.attr == "at" or not _array_attribute(n.attr)):
            return True
    return False


def _array_attribute(name: str) -> bool:
    """An attribute or method a JAX array has (``shape``, ``T``, ``at``, ``sum``, ``astype``...)."""
    return name in K.STATIC_ATTRS or name in _ARRAY_ATTRS or name in ARRAY_METHODS


# attributes of ``jax.Array`` besides its metadata (``knowledge.STATIC_ATTRS``) and methods
_ARRAY_ATTRS = frozenset({"T", "mT", "real", "imag", "at", "flat", "device", "devices", "addressable_shards",
                          "is_fully_replicated", "block_until_ready", "copy_to_host_async", "conj", "conjugate",
                          "item", "tolist", "view", "squeeze", "reshape", "astype"})


def ref_named(e: ast.AST) -> bool:
    """Is ``e`` (a written target) reached through a name spelled like a Pallas or
    state ref (``o_ref``, ``scratch_refs``, ``metadata_ref.offsets``)?  Kernels write
    their refs in place on purpose, inside loops included; the name is the
    convention Pallas code follows, since a kernel's parameters carry no type."""
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        if isinstance(e, ast.Attribute) and e.attr.lower().endswith(("ref", "refs")):
            return True
        e = e.value
    return isinstance(e, ast.Name) and e.id.lower().endswith(("ref", "refs"))


def kernel_ref_params(model) -> dict:
    """``{id(function): parameter names}`` of this module's Pallas kernels: a function given to
    ``pallas_call`` (or ``run_scoped``, ``emit_pipeline``), directly or through
    ``functools.partial``, receives a ref for every parameter the partial leaves unbound (its
    inputs, outputs and scratch buffers).  JAX's rule, not a naming convention."""
    got = model.__dict__.get("_kernel_ref_params")
    if got is not None:
        return got
    got = {}
    for scope in model.functions:
        for call in scope.of_type(ast.Call):
            if not call.args or not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            if model.qualname(call.func, scope) not in K.REF_KERNEL_CALLS:
                continue
            target = model.resolve_callable(call.args[0], scope)
            if target is None or target.transforms:
                continue
            fn = target.function
            names = [a.arg for a in fn.node.args.posonlyargs + fn.node.args.args][target.bound_positional:] \
                if hasattr(fn.node, "args") else []
            names += [a.arg for a in fn.node.args.kwonlyargs] if hasattr(fn.node, "args") else []
            if fn.node.args.vararg is not None:
                names.append(fn.node.args.vararg.arg)
            got.setdefault(id(fn), set()).update(n for n in names if n not in target.bound_keywords)
    model._kernel_ref_params = got
    return got


def kernel_ref(model, e: ast.AST, fn: Function) -> bool:
    """Is ``e`` (a written target) a ref of a Pallas kernel?  ``o_ref[...] = x`` on a kernel's
    parameter, read from this function or a function nested in the kernel, and
    ``buf.at[i][...] = x`` (a ref view: an array's ``.at[i]`` supports no item assignment)."""
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Subscript) \
                and isinstance(e.value.value, ast.Attribute) and e.value.value.attr == "at":
            return True
        e = e.value
    if not isinstance(e, ast.Name):
        return False
    scope = model.resolve_scope(e.id, fn)
    if scope is None or scope.is_module or e.id not in scope.param_nodes:
        return False
    return e.id in kernel_ref_params(model).get(id(scope), ())


def tuple_tree(model, fn: Function, value: ast.AST, depth: int = 0) -> bool:
    """``tree_map(lambda x: tuple(x.logical_axes) if ... else (), cache)``: a ``tree_map`` whose
    function returns only Python tuples or constants (logical axis names, partition specs),
    or a call such as ``to_pure_dict(v)`` on a name bound once in ``fn`` to one.  Static
    metadata, the same on every trace: setting it on ``self`` at trace time is harmless."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    q = model.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
    if q in ("jax.tree_util.tree_map", "jax.tree.map", "jax.tree_map") and value.args:
        mapped = value.args[0]
        if isinstance(mapped, ast.Lambda):
            returns = [mapped.body]
        elif isinstance(mapped, ast.Name):
            inner = next((c for c in fn.children if not c.is_lambda and c.name == mapped.id), None)
            if inner is None:
                return False
            returns = [r.value for r in inner.of_type(ast.Return)]
            if not returns or any(r is None for r in returns):
                return False
        else:
            return False
        return all(_tuple_expr(r) for r in returns)
    if depth == 0 and len(value.args) == 1 and not value.keywords and isinstance(value.args[0], ast.Name):
        bound = model.single_value(value.args[0].id, fn)
        return bound is not None and tuple_tree(model, fn, bound, 1)
    return False


def _tuple_expr(e: ast.AST) -> bool:
    """A Python tuple or constant: ``()``, ``(name,)``, ``tuple(x.names)``, a conditional of those."""
    if isinstance(e, ast.IfExp):
        return _tuple_expr(e.body) and _tuple_expr(e.orelse)
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.Tuple):
        return all(isinstance(x, (ast.Constant, ast.Name, ast.Attribute)) for x in e.elts)
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "tuple"
