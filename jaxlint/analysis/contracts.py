"""Library contracts: functions that a library traces although no ``jax.jit``
is in sight.

An optax ``GradientTransformation``'s ``update`` function, a learning-rate
schedule handed to an optimizer, a Haiku module's ``__call__``, a function given
to ``hk.transform``, a brax environment's ``step``: library authors write these
knowing that whoever uses them jits them.  A Python ``if`` on ``state.count``
inside an optax ``update_fn`` is a bug even though the file never calls
``jax.jit``.

Each row below is one contract.  The model applies them after the transforms
it can see (:func:`apply_contracts`), marking the function traced with
confidence ``inferred`` (a contract is a strong expectation, not a transform
applied in this file).  Users add their own in ``[tool.jaxlint]
traced-functions`` (see :mod:`jaxlint.analysis.project`).

Adding a contract is one row here.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .model import Function, SemanticModel


@dataclass(frozen=True)
class CallContract:
    """A call whose callable arguments the library traces later.

    ``positions``/``keywords``: where the traced callables are passed.
    ``any_call_prefix``: instead of one callable, every call whose qualified
    name starts with this prefix (``optax.`` for ``learning_rate=schedule``).
    """

    name: str                          # qualified name of the call, or a prefix
    positions: Tuple[int, ...]
    keywords: Tuple[str, ...]
    role: str                          # what the traced function is, for messages
    any_call_prefix: bool = False
    # the product's ``apply`` takes this many arguments before the function's own
    # (``hk.transform(f).apply(params, rng, *args)``: 2): ``jax.jit(t.apply, static_argnums=3)``
    # makes ``f``'s second parameter static
    apply_offset: Optional[int] = None


@dataclass(frozen=True)
class SubclassContract:
    """Methods of subclasses of a library base class that the library traces."""

    base: str                          # qualified name of the base class
    methods: Tuple[str, ...]
    role: str


CALL_CONTRACTS: Tuple[CallContract, ...] = (
    CallContract("optax.GradientTransformation", (0, 1), ("init", "update"),
                 "an optax `GradientTransformation` function, traced when the optimizer runs under `jit`"),
    CallContract("optax.GradientTransformationExtraArgs", (0, 1), ("init", "update"),
                 "an optax `GradientTransformation` function, traced when the optimizer runs under `jit`"),
    CallContract("optax.stateless", (0,), ("f",),
                 "an optax `stateless` update function, traced when the optimizer runs under `jit`"),
    CallContract("optax.stateless_with_tree_map", (0,), ("f",),
                 "an optax `stateless` update function, traced when the optimizer runs under `jit`"),
    CallContract("optax.scale_by_schedule", (0,), ("step_size_fn",),
                 "an optax schedule, called with the traced step count inside the optimizer's update"),
    CallContract("optax.", (), ("learning_rate", "step_size_fn", "schedule"),
                 "an optax schedule, called with the traced step count inside the optimizer's update",
                 any_call_prefix=True),
    CallContract("haiku.transform", (0,), ("f",),
                 "a function given to `hk.transform`, traced by `init`/`apply` under a transform",
                 apply_offset=2),
    CallContract("haiku.transform_with_state", (0,), ("f",),
                 "a function given to `hk.transform_with_state`, traced by `init`/`apply` under a transform",
                 apply_offset=3),
    CallContract("haiku.multi_transform", (0,), ("f",),
                 "a function given to `hk.multi_transform`, traced by `init`/`apply` under a transform"),
)

SUBCLASS_CONTRACTS: Tuple[SubclassContract, ...] = (
    SubclassContract("haiku.Module", ("__call__",),
                     "a Haiku `Module` method, traced by `init`/`apply` under a transform"),
    SubclassContract("brax.envs.base.Env", ("reset", "step"),
                     "a brax environment method, jitted by the training loop that steps it"),
    SubclassContract("brax.envs.Env", ("reset", "step"),
                     "a brax environment method, jitted by the training loop that steps it"),
    SubclassContract("brax.envs.base.PipelineEnv", ("reset", "step"),
                     "a brax environment method, jitted by the training loop that steps it"),
    SubclassContract("brax.envs.PipelineEnv", ("reset", "step"),
                     "a brax environment method, jitted by the training loop that steps it"),
    SubclassContract("gymnax.environments.environment.Environment", ("step_env", "reset_env"),
                     "a gymnax environment method, jitted by the training loop that steps it"),
)

_EXACT: Dict[str, CallContract] = {c.name: c for c in CALL_CONTRACTS if not c.any_call_prefix}
_PREFIXES: Tuple[CallContract, ...] = tuple(c for c in CALL_CONTRACTS if c.any_call_prefix)
_BASES: Dict[str, SubclassContract] = {c.base: c for c in SUBCLASS_CONTRACTS}
# modules whose presence in a file's imports makes contracts worth looking for
CONTRACT_MODULES = frozenset({"optax", "haiku", "brax", "gymnax"})


def call_contract(qualname: Optional[str]) -> Optional[CallContract]:
    if qualname is None:
        return None
    c = _EXACT.get(qualname)
    if c is not None:
        return c
    for p in _PREFIXES:
        if qualname.startswith(p.name):
            return p
    return None


def contract_arguments(call: ast.Call, contract: CallContract):
    """The callable arguments of ``call`` that ``contract`` traces."""
    for i in contract.positions:
        if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
            yield call.args[i]
    for kw in call.keywords:
        if kw.arg in contract.keywords:
            yield kw.value


def subclass_contract(model: "SemanticModel", info) -> Optional[SubclassContract]:
    """The contract of a class through its (local or library) bases."""
    seen = set()
    todo = list(info.bases)
    while todo:
        b = todo.pop()
        if b in seen:
            continue
        seen.add(b)
        c = _BASES.get(b)
        if c is not None:
            return c
        local = model.classes.get(b)
        if local is not None:
            todo.extend(local.bases)
    return None


def apply_contracts(model: "SemanticModel") -> None:
    """Mark the functions this module hands to a library that traces them.

    Called by the model after the transforms it sees and before propagation.
    Parameters annotated or defaulted as Python configuration stay static, as
    for module methods."""
    from .model import INFERRED, TraceContext

    if not model.imports.mentions_any(CONTRACT_MODULES):
        return
    for scope in model.functions:
        for call in scope.of_type(ast.Call):
            contract = call_contract(model.call_qualname(call, scope))
            if contract is None:
                continue
            for arg in contract_arguments(call, contract):
                target = model.resolve_callable(arg, scope)
                if target is None or target.transforms:
                    continue
                fn = target.function
                params = fn.params[target.bound_positional:]
                static = _static_through_apply(model, scope, call, contract, params)
                _mark(model, fn, params, TraceContext("contract", INFERRED, call, contract.role), static)
    for info in model.class_list:
        contract = subclass_contract(model, info)
        if contract is None:
            continue
        for name in contract.methods:
            fn = info.methods.get(name)
            if fn is None or fn.is_staticmethod:
                continue
            params = [p for p in fn.all_params() if p != fn.self_name]
            _mark(model, fn, params, TraceContext("contract", INFERRED, fn.node, contract.role))


def _static_through_apply(model: "SemanticModel", scope: "Function", call: ast.Call, contract: CallContract,
                          params) -> set:
    """``t = hk.transform(f)`` ... ``jax.jit(t.apply, static_argnums=3)``: the parameters of
    ``f`` that the jit of the product's ``apply`` declares static (``apply(params, rng, *args)``
    shifts positions by ``contract.apply_offset``)."""
    if contract.apply_offset is None:
        return set()
    target = model.binding_target(call, scope)
    if not isinstance(target, ast.Name):
        return set()
    static = set()
    for site in model.transform_sites:
        c = site.call
        if c is None or site.scope is not scope or not c.args:
            continue
        f = c.args[0]
        if not (isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(f.value, ast.Name)
                and f.value.id == target.id):
            continue
        nums, names = model.static_spec(site.transform, c)
        for i in nums:
            j = i - contract.apply_offset
            if 0 <= j < len(params):
                static.add(params[j])
        static.update(n for n in names if n in params)
    return static


def _mark(model: "SemanticModel", fn: "Function", params, ctx, static=frozenset()) -> None:
    traced = {p for p in params if p not in static and not model._is_config_param(fn, p)}
    model._add_context(fn, ctx, traced, set(params) - traced)
