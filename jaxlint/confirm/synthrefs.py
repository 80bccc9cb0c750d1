"""What synthesized inputs refer to in the module: its module-level model and optimizer
objects, the TrainState it creates, the ranks ``axis=`` arguments need, and the
references of ``init`` specs to other parameters (helpers of :mod:`jaxlint.confirm.synth`)."""
from __future__ import annotations

import ast
import json
from typing import List, Optional, Tuple

from ..analysis import Function, SemanticModel

TRAINSTATE_METHODS = ("apply_gradients", "apply_fn")


TRAINSTATE_FIELDS = ("params", "apply_fn", "apply_gradients", "tx", "opt_state", "step", "replace", "create")


def _state_objects(model: SemanticModel) -> Tuple[Optional[str], Optional[str]]:
    models, txs = [], []
    named_model = named_tx = None
    for stmt in model.tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call):
            q = model.call_qualname(stmt.value) or ""
            f = stmt.value.func
            info = model.classes.get(f.id) if isinstance(f, ast.Name) else None
            if q.startswith("optax."):
                txs.append(stmt.targets[0].id)
            elif info is not None and getattr(info, "module_kind", None) == "linen":
                models.append(stmt.targets[0].id)
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "create":
            for k in node.keywords:
                v = k.value
                if k.arg == "apply_fn" and isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) \
                        and v.attr == "apply" and v.value.id in models:
                    named_model = v.value.id
                elif k.arg == "tx" and isinstance(v, ast.Name) and v.id in txs:
                    named_tx = v.id
    return (named_model or (models[0] if len(models) == 1 else None),
            named_tx or (txs[0] if len(txs) == 1 else None))


def _is_create(e: Optional[ast.AST]) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "create" and \
        any(k.arg == "apply_fn" for k in e.keywords)


def _state_global(model: SemanticModel) -> Optional[str]:
    """A module-level name bound to ``SomeState.create(apply_fn=...)``: the module's own TrainState."""
    for stmt in model.tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and _is_create(stmt.value):
            return stmt.targets[0].id
    return None


def _is_module_object(model: SemanticModel, fn: Function, e: ast.AST) -> bool:
    """A module-level name bound to a constructed object (``model = MLP()``, ``tx = optax.adam(...)``)."""
    if not isinstance(e, ast.Name) or model.lookup_function(e.id, fn) is not None:
        return False
    v = model.single_value(e.id, model.module)
    return isinstance(v, ast.Call)


def _axis_rank(call: ast.Call) -> int:
    """The rank an ``axis=`` argument needs: ``axis=(1, 2, 3)`` -> 4, ``axis=-2`` -> 2."""
    for k in call.keywords:
        if k.arg in ("axis", "axes"):
            vals = k.value.elts if isinstance(k.value, ast.Tuple) else [k.value]
            best = 0
            for v in vals:
                if isinstance(v, ast.Constant) and isinstance(v.value, int):
                    best = max(best, v.value + 1 if v.value >= 0 else -v.value)
                elif isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
                    best = max(best, int(v.operand.value))
            return best
    return 0


def _resolve_inits(args: list, kwargs: dict, names: List[str], default: dict) -> None:
    """Replace the references of ``init`` specs to other parameters by those parameters' specs
    (``default``, an array, for an argument that is not one of them); give dicts whose keys the
    code does not spell the keys of another dict argument."""
    def bare(spec):
        # a spec built as a concrete value ({"t": "concrete", "of": ...}) is its inner spec here
        while isinstance(spec, dict) and spec.get("t") == "concrete":
            spec = spec["of"]
        return spec
    by_name = {k: bare(v) for k, v in zip(names, args)}
    by_name.update({k: bare(v) for k, v in kwargs.items()})
    known = [s for s in by_name.values() if isinstance(s, dict) and s.get("t") == "dict" and s["items"]]
    for s in by_name.values():
        if isinstance(s, dict) and s.pop("like", False) and known:
            s["items"] = json.loads(json.dumps(known[0]["items"]))

    def at(spec, path):
        spec = bare(spec)
        for kind, v in path:
            items = spec.get("items")
            if kind in ("key", "attr") and isinstance(items, dict) and v in items:
                spec = items[v]
            elif kind == "idx" and isinstance(items, list) and -len(items) <= v < len(items):
                spec = items[v]
            elif kind == "elem" and isinstance(items, list) and items:
                spec = items[0]
            else:
                return None
            spec = bare(spec)
        return spec

    def fix(spec, final, depth=0):
        spec = bare(spec)
        if not isinstance(spec, dict) or depth > 8:
            return
        if spec.get("t") == "init" and "refs" in spec:
            got = [at(by_name[ref[0]], ref[1]) if ref and ref[0] in by_name else dict(default)
                   for ref in spec["refs"]]
            if all(g is not None and "refs" not in g for g in got):      # an init may use another one's result
                del spec["refs"], spec["fallback"]
                spec["args"] = got
            elif final or any(g is None for g in got):
                fallback = spec["fallback"]
                spec.clear()
                spec.update(fallback)
        items = spec.get("items")
        for child in (items.values() if isinstance(items, dict) else items or []):
            fix(child, final, depth + 1)
    for final in (False, False, True):
        for spec in list(by_name.values()):
            fix(spec, final)
