from __future__ import annotations

import ast
from typing import Iterator, List, Set

from ...analysis import CERTAIN, ClassInfo, Function, SemanticModel
from ..base import Context, Finding, Rule, register
from ..messages import short
from .linen import flax_facts

# methods in which a linen module may still set its own attributes
_UNFROZEN = frozenset({"setup", "__post_init__", "__init__", "__setattr__"})


@register
class FlaxModuleAttributeAssignment(Rule):
    """
    ## What it does
    Flags `self.x = ...` (and `self.x += ...`) inside a method of a Flax linen
    `nn.Module` other than `setup`: in `__call__`, in an `@nn.compact` method,
    in a method `apply(..., method=Cls.encode)` (or `method="encode"`) runs,
    or in any helper method they call that is not only called from `setup`.

    ## Why is this bad?
    In PyTorch, `forward` may stash things on the module: `self.last_hidden =
    h`, a buffer created lazily on the first call, a layer built the first time
    the input shape is known. Linen modules are frozen dataclasses: outside
    `setup` every attribute assignment raises
    `SetAttributeFrozenModuleError: Module instance is frozen outside of setup
    method` when `init` or `apply` runs the method. Submodules belong in `setup`
    or inline in an `@nn.compact` method; state that changes between calls
    belongs in a variable collection (`self.variable`, `self.sow`), and values
    you want out of the method are returned.

    ## Example
    ```python
    class Encoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            self.hidden = nn.Dense(32)(x)
            return nn.relu(self.hidden)
    ```

    ## Use instead
    ```python
    class Encoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            hidden = nn.Dense(32)(x)
            self.sow("intermediates", "hidden", hidden)
            return nn.relu(hidden)
    ```
    Assignments in `setup` (and in helpers only `setup` calls), `self.param`,
    `self.variable`, `self.sow` and Flax NNX modules (which are mutable Python
    objects) are not flagged. A property setter (`@encoder.setter`) is
    checked where it is invoked: `self.encoder = ...` in `setup` is allowed,
    anywhere else it raises at that assignment.

    ## Fix safety
    No fix: whether the value should be a local, a submodule defined in
    `setup`, or a variable collection depends on what the code means.
    """

    # a submodule built and assigned outside `setup`/`@compact` raises AssignSubModuleError at the line
    confirm = ("trace-error", "SetAttributeFrozenModuleError", "AssignSubModuleError")
    summary = "`self.x = ...` in a Flax linen module method other than `setup` raises: linen modules are frozen"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for info in m.class_list:
            if info.module_kind != "linen":
                continue
            from_setup = self._setup_helpers(ctx, info)
            applied = self._applied_methods(ctx, info)
            for name, fn in info.methods.items():
                if name in _UNFROZEN or name in from_setup or fn.is_staticmethod or fn.is_lambda:
                    continue
                # only methods that run bound, under ``init``/``apply`` (an unbound module is not
                # frozen yet): ``__call__``, ``@nn.compact`` methods and what they call, and the
                # methods ``apply(..., method=...)`` runs
                if not fn.is_traced and name not in applied:
                    continue
                if any(m.qualname(d, fn.parent) in ("classmethod", "staticmethod") for d in fn.decorators):
                    continue
                if any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in fn.decorators):
                    # a property setter runs inside the ``self.prop = v`` that invokes it: allowed in
                    # ``setup``, and raising at that assignment (checked where it is) anywhere else
                    continue
                selfname = fn.self_name
                if selfname is None:
                    continue
                for node in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
                    if isinstance(node, ast.AnnAssign) and node.value is None:
                        continue   # ``self.head: nn.Module`` declares, assigns nothing
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    attrs = [a for t in targets for a in _self_attributes(t, selfname)]
                    if not attrs:
                        continue
                    shown = ", ".join(f"`{short(a)}`" for a in attrs)
                    yield ctx.finding(
                        self, attrs[0],
                        f"{shown} assigned in `{info.name}.{name}`: a Flax linen module is frozen outside "
                        f"`setup`, so `init`/`apply` raise `SetAttributeFrozenModuleError`; use a local, "
                        f"define it in `setup`, or keep it in a variable (`self.variable`/`self.sow`)",
                        confidence=CERTAIN, end_node=attrs[-1])

    @staticmethod
    def _applied_methods(ctx: Context, info: ClassInfo) -> Set[str]:
        """Methods an ``apply``/``init`` of an instance of ``info`` in this module runs by
        ``method=Cls.name`` or ``method="name"``, and those they call on ``self``."""
        names: Set[str] = set()
        for site in flax_facts(ctx.model).apply_sites():
            inst = site.instance
            kw = site.keyword("method")
            if kw is None or inst is None or inst.info is not info:
                continue
            v = kw.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                names.add(v.value)
            elif isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == info.name:
                names.add(v.attr)
            elif isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and \
                    isinstance(site.call.func, ast.Attribute) and isinstance(site.call.func.value, ast.Name) and \
                    site.call.func.value.id == v.value.id:
                names.add(v.attr)   # ``model.apply(..., method=model.decode_step)``: the same instance
        if not names:
            return names
        return names | FlaxModuleAttributeAssignment._called_on_self(ctx, info, [n for n in names])

    @staticmethod
    def _called_on_self(ctx: Context, info: ClassInfo, start: List[str]) -> Set[str]:
        """Methods called (transitively) through ``self.name(...)`` from the methods ``start``."""
        m = ctx.model
        out: Set[str] = set()
        todo: List[Function] = [f for f in (m.class_method(info, n) for n in start) if f is not None]
        while todo:
            fn = todo.pop()
            for call in fn.of_type(ast.Call):
                f = call.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == fn.self_name:
                    callee = m.class_method(info, f.attr)
                    if callee is not None and f.attr not in out:
                        out.add(f.attr)
                        todo.append(callee)
        return out

    @staticmethod
    def _setup_helpers(ctx: Context, info: ClassInfo) -> Set[str]:
        """Methods called (transitively) from ``setup`` through ``self.name(...)``."""
        m = ctx.model
        setup = m.class_method(info, "setup")
        out: Set[str] = set()
        todo: List[Function] = [setup] if setup is not None else []
        while todo:
            fn = todo.pop()
            for call in fn.of_type(ast.Call):
                f = call.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == fn.self_name:
                    callee = m.class_method(info, f.attr)
                    if callee is not None and f.attr not in out:
                        out.add(f.attr)
                        todo.append(callee)
        return out


def _self_attributes(t: ast.AST, selfname: str) -> Iterator[ast.Attribute]:
    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == selfname:
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _self_attributes(e, selfname)
    elif isinstance(t, ast.Starred):
        yield from _self_attributes(t.value, selfname)
