"""Inputs from the module's own call sites, and the configuration entry to suggest (no JAX here).

Where the module calls a function with arguments whose values the code states
(``jnp.ones((8, 3))``, ``jax.random.normal(key, (8, 3))``, ``jax.random.key(0)``,
literals, names bound once to those), :func:`call_site_specs` turns them into
argument specs that :func:`jaxlint.confirm.synth.candidates` uses as they are.
:func:`suggestion` writes the ``[tool.jaxlint.confirm]`` line a user can paste
when no inputs could be built.
"""
from __future__ import annotations

import ast
import json
from typing import Dict, List, Optional, Tuple

from ..analysis import Function, SemanticModel
from .synth import param_tracer


def _int_tuple(e: ast.AST, consts: Dict[str, int]) -> Optional[List[int]]:
    items = e.elts if isinstance(e, (ast.Tuple, ast.List)) else [e]
    out = []
    for x in items:
        if isinstance(x, ast.Constant) and isinstance(x.value, int) and not isinstance(x.value, bool):
            out.append(x.value)
        elif isinstance(x, ast.Name) and x.id in consts:
            out.append(consts[x.id])
        else:
            return None
    return out


_DTYPE_NAMES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
                "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8", "uint32": "uint32",
                "bool_": "bool", "bool": "bool", "int16": "int16", "complex64": "complex64"}


def sized_spec(model: SemanticModel, e: ast.AST, scope: Function, consts: Dict[str, int],
               static: bool, depth: int = 0) -> Optional[dict]:
    """The spec of an argument expression whose value the code states: literals,
    ``jnp.ones((8, 3))``, ``jax.random.normal(key, (8, 3))``, ``jax.random.key(0)``."""
    if depth > 4:
        return None
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float, str, bool)) or \
            isinstance(e, ast.Constant) and e.value is None:
        if static or isinstance(e.value, str) or e.value is None:
            return {"t": "static", "v": e.value}
        dt = "bool" if isinstance(e.value, bool) else "int32" if isinstance(e.value, int) else "float32"
        return {"t": "array", "dtype": dt, "shape": [], "weak": dt != "bool"}
    if isinstance(e, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in e.keys):
        items = {}
        for k, v in zip(e.keys, e.values):
            s = sized_spec(model, v, scope, consts, static, depth + 1)
            if s is None:
                return None
            items[k.value] = s
        return {"t": "dict", "items": items}
    if isinstance(e, (ast.Tuple, ast.List)) and not any(isinstance(x, ast.Starred) for x in e.elts):
        items = [sized_spec(model, x, scope, consts, static, depth + 1) for x in e.elts]
        if any(i is None for i in items):
            return None
        return {"t": "tuple" if isinstance(e, ast.Tuple) else "list", "items": items}
    if isinstance(e, ast.Name):
        v = model.single_value(e.id, scope)
        return sized_spec(model, v, scope, consts, static, depth + 1) if v is not None else None
    if not isinstance(e, ast.Call):
        return None
    q = model.call_qualname(e, scope) or ""
    short = q.rsplit(".", 1)[-1]
    if q in ("jax.random.PRNGKey", "jax.random.key"):
        return {"t": "key", "shape": []}
    dtype = "float32"
    for k in e.keywords:
        if k.arg == "dtype":
            dq = model.qualname(k.value, scope) or getattr(k.value, "attr", None) or ""
            dtype = _DTYPE_NAMES.get(dq.rsplit(".", 1)[-1], dtype)
    if q.startswith(("jax.numpy.", "numpy.")) and short in ("zeros", "ones", "empty", "full") and e.args:
        shape = _int_tuple(e.args[0], consts)
        return None if shape is None else {"t": "array", "dtype": dtype, "shape": shape}
    if q.startswith("jax.random.") and len(e.args) > 1:
        shape = _int_tuple(e.args[1], consts)
        if shape is None:
            return None
        return {"t": "array", "dtype": "int32" if short in ("randint", "choice", "permutation") else dtype,
                "shape": shape}
    return None


def module_ints(model: SemanticModel) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for n in model.module.of_type(ast.Assign):
        if len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant) \
                and isinstance(n.value.value, int) and not isinstance(n.value.value, bool):
            out[n.targets[0].id] = n.value.value
    return out


def call_site_specs(model: SemanticModel, fn: Function) -> Tuple[Dict[str, dict], Optional[int]]:
    """Specs for ``fn``'s parameters from the first call in the module whose arguments can be sized."""
    consts = module_ints(model)
    best: Dict[str, dict] = {}
    line = None
    for scope in model.functions:
        for call in scope.of_type(ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id != fn.name or \
                    isinstance(call.func, ast.Attribute) and call.func.attr != fn.name or \
                    not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            target = model.resolve_callable(call.func, scope)
            if target is None or target.function is not fn:
                continue
            pairs, _ = model.bind_arguments(target, call)
            got = {}
            for p, a in pairs:
                s = sized_spec(model, a, scope, consts, static=not param_tracer(model, fn, p))
                if s is not None:
                    got[p] = s
            if len(got) > len(best):
                best, line = got, call.lineno
    return best, line


def ctor_call_specs(model: SemanticModel, cls, init: Function) -> Tuple[Dict[str, dict], Optional[int]]:
    """Specs for the constructor parameters of ``cls`` from the module's own ``Cls(...)`` call whose
    arguments can be sized best: the values the program constructs it with, as Python values (a
    constructor's arguments are not traced)."""
    from ..analysis.scopes import CallTarget
    consts = module_ints(model)
    best: Dict[str, dict] = {}
    line = None
    target = CallTarget(init, 1)        # `self` is bound by the call
    for scope in model.functions:
        for call in scope.of_type(ast.Call):
            if not (isinstance(call.func, ast.Name) and call.func.id == cls.name):
                continue
            if model.lookup_function(cls.name, scope) is not None:
                continue        # the name is a function here, not the class
            pairs, unknown = model.bind_arguments(target, call)
            if unknown:
                continue
            got = {}
            for p, a in pairs:
                sp = sized_spec(model, a, scope, consts, static=True)
                if sp is not None:
                    got[p] = sp
            if len(got) > len(best):
                best, line = got, call.lineno
    return best, line


# ------------------------------------------------------------ the entry to suggest
def toml_value(spec: dict) -> str:
    from .specs import describe
    t = spec["t"]
    if t == "concrete":
        return toml_value(spec["of"])
    if t == "static":
        return json.dumps(spec["v"]) if spec["v"] is not None else '"None"'
    if t in ("list", "tuple"):
        return "[" + ", ".join(toml_value(s) for s in spec["items"]) + "]"
    if t in ("dict", "ns", "pyobj"):
        return "{ " + ", ".join(f"{k} = {toml_value(s)}" for k, s in spec["items"].items()) + " }"
    return json.dumps(describe(spec))


def suggestion(key: str, call: Optional[dict], params: List[dict]) -> str:
    """The ``[tool.jaxlint.confirm]`` line to paste (unknown parameters as "?")."""
    if call is not None:
        if call["kwargs"]:
            names = [p["name"] for p in params if p["kind"] == "pos"]
            kw = dict(zip(names, call["args"]))
            kw.update(call["kwargs"])
            body = "{ " + ", ".join(f"{k} = {toml_value(s)}" for k, s in kw.items()) + " }"
        else:
            body = "[" + ", ".join(toml_value(s) for s in call["args"]) + "]"
    else:
        names = [p["name"] for p in params if p["kind"] not in ("var", "varkw") and not p["has_default"]]
        body = "{ " + ", ".join(f'{n} = "?"' for n in names) + " }"
    return f'"{key}" = {body}'
