"""``custom_jvp``/``custom_vjp`` rules: which of their parameters are traced, and what
the backward rule's residuals and cotangent hold (a part of
:class:`~jaxlint.analysis.model.SemanticModel`)."""
from __future__ import annotations

import ast
from typing import Dict, List

from . import knowledge as K
from .kinds import CONTAINER, TRACED
from .scopes import CERTAIN, Function, TraceContext


class CustomRulesMixin:
    def _custom_rules(self) -> None:
        """Find the rules of each ``custom_jvp``/``custom_vjp`` function; they run traced
        exactly when their function does (:meth:`_follow_custom_rules`).

        ``f.defvjp(fwd, bwd)``: ``fwd`` takes the primal's arguments (its
        ``nondiff_argnums`` stay static); ``bwd`` and ``@f.defjvp`` rules take
        the non-differentiable arguments first, then traced values.
        """
        self._pending_rules: List[tuple] = []
        custom: Dict[int, List[int]] = {}
        for site in self.transform_sites:
            if site.target is not None and site.transform.name in ("jax.custom_jvp", "jax.custom_vjp"):
                nums, names = self.static_spec(site.transform, site.call)
                primal = site.target.function
                nums = list(nums) + [primal.params.index(n) for n in names if n in primal.params]
                custom[id(primal)] = sorted(set(nums))
        if not custom:
            return

        primals: Dict[int, Function] = {}

        def mark(rule: Function, node: ast.AST, nondiff: List[int], leading: bool) -> None:
            params = rule.params
            if leading:
                static = set(params[:len(nondiff)])
            else:
                static = {params[i] for i in nondiff if -len(params) <= i < len(params)}
            traced = set(rule.all_params()) - static
            self._pending_rules.append((primals[id(node)], rule, node, traced, static))

        for fn in self.functions:
            for call in fn.of_type(ast.Call):
                f = call.func
                if isinstance(f, ast.Attribute) and f.attr in ("defjvp", "defvjp", "defjvps"):
                    base = self.resolve_callable(f.value, fn)
                    if base is None or id(base.function) not in custom:
                        continue
                    nondiff = custom[id(base.function)]
                    primals[id(call)] = base.function
                    rules = []
                    for i, a in enumerate(call.args[:2]):
                        tgt = self.resolve_callable(a, fn)
                        rules.append(tgt)
                        if tgt is not None:
                            mark(tgt.function, call, nondiff, leading=(f.attr != "defvjp" or i == 1))
                    if f.attr == "defvjp" and len(rules) == 2 and None not in rules:
                        self._record_residuals(rules[0].function, rules[1].function, len(nondiff))
            for dec_fn in fn.children:
                for d in dec_fn.decorators:
                    if isinstance(d, ast.Attribute) and d.attr in ("defjvp", "defvjp"):
                        base = self.resolve_callable(d.value, fn)
                        if base is not None and id(base.function) in custom:
                            primals[id(d)] = base.function
                            mark(dec_fn, d, custom[id(base.function)], leading=True)

    def _follow_custom_rules(self) -> bool:
        """The derivative rules of a custom function that runs traced run traced too (JAX calls
        them on the values the function is given); a rule's context is found again by
        ``_rule_primal``.  True when a rule got its context now."""
        changed = False
        for primal, rule, node, traced, static in getattr(self, "_pending_rules", ()):
            if primal.contexts and not any(c.node is node for c in rule.contexts):
                self._add_context(rule, TraceContext("jax.custom_vjp", CERTAIN, node, "a custom derivative rule"),
                                  traced, static)
                changed = True
        return changed

    def _record_residuals(self, fwd: Function, bwd: Function, nondiff: int) -> None:
        """``fwd`` returning ``out, (a, n, x.shape)`` (or a name bound once to that
        tuple): remember the tuple for ``bwd``'s residual parameter."""
        rets = fwd.of_type(ast.Return)
        if len(rets) != 1 or nondiff >= len(bwd.params):
            return
        v = rets[0].value
        if not isinstance(v, ast.Tuple) or len(v.elts) != 2:
            return
        self._record_cotangent(fwd, v.elts[0], bwd, nondiff + 1)
        res = v.elts[1]
        if isinstance(res, ast.Name):
            bound = [(t, val) for t, val, mode in self.binding_table(fwd).entries
                     if t.__class__ is ast.Name and t.id == res.id]
            if len(bound) != 1 or bound[0][1] is None:
                return
            res = bound[0][1]
        if isinstance(res, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in res.elts):
            bwd.param_residuals[bwd.params[nondiff]] = (res, fwd)

    def _record_cotangent(self, fwd: Function, out: ast.expr, bwd: Function, index: int) -> None:
        """The cotangent parameter of ``bwd`` has the structure of the primal output
        ``out`` (what ``fwd`` returns first): unless that is plainly one array (an
        arithmetic result or a ``jax.numpy``/``lax`` call, or a name bound once to
        one), it may be a tuple or list of arrays -- ``g[1] = ...`` can be a list
        update."""
        if index >= len(bwd.params):
            return
        if out.__class__ is ast.Name:
            v = self.single_value(out.id, fwd)
            out = v if v is not None else out
        if out.__class__ is ast.BinOp:
            return
        if out.__class__ is ast.Call and out.func.__class__ in (ast.Name, ast.Attribute):
            q = self.qualname(out.func, fwd) or ""
            if q.startswith(K.SINGLE_ARRAY_MODULES) and q not in K.MULTI_ARRAY_RESULTS:
                return
        p = bwd.params[index]
        bwd.param_kinds[p] = bwd.param_kinds.get(p, 0) | TRACED | CONTAINER
