"""What a linen module needs when ``apply`` runs it with a site's arguments: a small partial
evaluator over the module's method.

It runs the method with the literal arguments of the apply call (``train=True``), the
instance's constructor fields and the class defaults, through ``@nn.compact`` bodies, ``setup``
attributes, helper methods and submodules of this file.  A layer of :data:`.contracts.LAYERS`
whose switch evaluates to "on" (``deterministic=False``, ``use_running_average=False``) on a path
that certainly runs needs its rng stream or its collection; so do ``self.make_rng("dropout")``
and updates of ``self.variable("counter", ...).value``.  Anything the evaluator cannot decide (a
flag from a traced argument, a branch on a config object, a module defined in another file) is
not a certain need, and rules stay silent on it.

:class:`ModuleEvaluator` is a part of :class:`.linen.FlaxFacts`; it reads the call sites the rest
of the class finds.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

from ...analysis import ClassInfo, Function, SemanticModel
from ...analysis import knowledge as K
from .contracts import APPLY_KEYWORDS, INIT_METHODS, Layer, layer_for
from .values import MAX_DEPTH, UNKNOWN, const_str, literal

if TYPE_CHECKING:  # pragma: no cover
    from .linen import ApplySite


# the kind of a :class:`Need` for a collection the module reads on every run (``batch_stats`` of
# ``nn.BatchNorm``, whatever ``use_running_average`` is): ``apply`` must be given it
READS = "reads"
# the kind of a :class:`Need` for a statement that certainly raises when the module runs bound
# (``self.x = ...`` outside ``setup``): what else the apply call needs is moot
RAISES = "raises"


@dataclass(frozen=True)
class Need:
    """Something the module needs when applied with a site's arguments."""

    kind: str            # rng | collection (updated) | reads (collection read on every run)
    name: str            # the stream (``dropout``) or the collection (``batch_stats``)
    node: ast.AST        # the layer call, ``make_rng`` call or variable update
    what: str            # how messages name it: "`nn.Dropout`", "`self.make_rng('dropout')`"
    owner: str           # the class whose code holds it


@dataclass
class _Frame:
    info: ClassInfo
    fields: Dict[str, object]
    env: Dict[str, object] = field(default_factory=dict)
    ctors: Dict[str, Tuple[ast.Call, "Function"]] = field(default_factory=dict)
    variables: Dict[str, str] = field(default_factory=dict)   # local name -> collection
    # ``norm = functools.partial(nn.BatchNorm, use_running_average=not train)``
    partials: Dict[str, Tuple[ast.Call, "Function"]] = field(default_factory=dict)

    def drop(self, name: str) -> None:
        """Forget what ``name`` held: it is rebound in a way the evaluator does not follow."""
        self.env[name] = UNKNOWN
        self.ctors.pop(name, None)
        self.partials.pop(name, None)


class ModuleEvaluator:
    """``needs``: what a linen module of this file needs for an apply site's arguments."""

    model: SemanticModel

    def needs(self, site: ApplySite) -> List[Need]:
        """What the module certainly needs when run with this site's arguments."""
        inst = site.instance
        if inst is None or inst.info is None or site.has_star_kwargs:
            return []
        chosen = site.keyword("method")
        name = "__call__"
        if chosen is not None:
            # ``apply(v, x, method=model.embed)`` / ``method="embed"`` / ``method=Net.embed``: that
            # method of the module's class runs instead of ``__call__``
            v = chosen.value
            name = v.attr if isinstance(v, ast.Attribute) else v.value if isinstance(v, ast.Constant) and \
                isinstance(v.value, str) else None
            if name is None:
                return []
        method = self.model.class_method(inst.info, name)
        if method is None:
            return []
        fields = self._fields(inst.info, inst.ctor, inst.scope, {}, None)
        if fields is None:
            return []
        args = list(site.call.args[1:])
        keywords = {kw.arg: kw.value for kw in site.call.keywords
                    if kw.arg not in APPLY_KEYWORDS and kw.arg != "variables"}
        if site.method in INIT_METHODS:
            return []
        # a flag passed on from a parameter of the enclosing function (``train=train``) takes
        # each literal value the calls of that function give it (or its default)
        # (also inside an expression: ``deterministic=not training``)
        choices: Dict[str, List[object]] = {}
        for a in args + list(keywords.values()):
            for n in ast.walk(a):
                if isinstance(n, ast.Name) and n.id not in choices:
                    got = self.param_literals(n.id, site.scope)
                    if got:
                        choices[n.id] = got
        combos: List[Dict[str, object]] = [{}]
        for name, values in choices.items():
            combos = [dict(c, **{name: v}) for c in combos for v in values][:8]
        reads: Optional[List[Need]] = None
        for combo in combos:
            env = self._bind(method, args, keywords, lambda e: self._site_value(e, combo))
            if env is None:
                return []
            out: List[Need] = []
            self._run(inst.info, method, fields, env, out, 0, set())
            if any(n.kind != READS for n in out):
                return out
            # a collection read whatever the flags: one every combination reads
            got = [n for n in out if n.kind == READS]
            reads = got if reads is None else [n for n in reads if any(g.name == n.name for g in got)]
        return reads or []

    def _site_value(self, e: ast.expr, combo: Dict[str, object]) -> object:
        """An apply argument's value given the literal each parameter flag takes in ``combo``:
        a literal, a flag, or ``not``/``and``/``or`` of them."""
        if isinstance(e, ast.Name):
            return combo.get(e.id, UNKNOWN)
        if isinstance(e, (ast.UnaryOp, ast.BoolOp)):
            return self._eval(e, combo, None)
        return literal(e)

    def param_literals(self, name: str, scope: Function) -> List[object]:
        """The literal values calls of this file give the parameter ``name`` seen from ``scope``
        (the default where a call leaves it out); [] when some call gives something else, when
        the parameter is rebound, or when nothing in this file calls the function."""
        owner = self.model.resolve_scope(name, scope)
        if owner is None or owner.is_module or name not in owner.param_nodes:
            return []
        if any(b.kind != "param" for b in self.model.bindings(name, owner)):
            return []
        sites = self.call_sites(owner)
        if not sites:
            return []
        values: List[object] = []
        for call, _, target in sites:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return []
            pairs, _ = self.model.bind_arguments(target, call)
            given = [a for p, a in pairs if p == name]
            v = literal(given[0]) if given else (
                literal(owner.defaults[name]) if name in owner.defaults else UNKNOWN)
            if v is UNKNOWN:
                return []
            if v not in values:
                values.append(v)
        return values

    def _fields(self, info: ClassInfo, ctor: ast.Call, scope: Function, outer_env: Dict[str, object],
                outer: Optional[_Frame]) -> Optional[Dict[str, object]]:
        """Field values of an instance: constructor arguments, then class defaults."""
        order = self._field_order(info)
        values: Dict[str, object] = {}
        for name, default in order:
            values[name] = self._eval(default, {}, None) if default is not None else UNKNOWN
        if any(isinstance(a, ast.Starred) for a in ctor.args) or any(k.arg is None for k in ctor.keywords):
            return None
        for (name, _), a in zip(order, ctor.args):
            values[name] = self._eval(a, outer_env, outer)
        for kw in ctor.keywords:
            values[kw.arg] = self._eval(kw.value, outer_env, outer)
        return values

    def _field_order(self, info: ClassInfo, _seen=None) -> List[Tuple[str, Optional[ast.expr]]]:
        _seen = _seen or set()
        _seen.add(info.name)
        out: List[Tuple[str, Optional[ast.expr]]] = []
        for b in info.bases:
            base = self.model.classes.get(b)
            if base is not None and base.name not in _seen:
                out.extend(self._field_order(base, _seen))
        for stmt in info.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                out = [(n, d) for n, d in out if n != stmt.target.id]
                out.append((stmt.target.id, stmt.value))
        return out

    def _bind(self, method: Function, args: List[ast.expr], keywords: Dict[str, ast.expr], ev) \
            -> Optional[Dict[str, object]]:
        params = method.params[1:] if not method.is_staticmethod else method.params
        env: Dict[str, object] = {}
        if any(isinstance(a, ast.Starred) for a in args):
            return None
        for p in params + method.kwonly:
            d = method.defaults.get(p)
            env[p] = literal(d) if d is not None else UNKNOWN
        for p, a in zip(params, args):
            env[p] = ev(a)
        for k, v in keywords.items():
            if k in env:
                env[k] = ev(v)
        return env

    def _eval(self, e: Optional[ast.AST], env: Dict[str, object], frame: Optional[_Frame]) -> object:
        if e is None:
            return UNKNOWN
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, (ast.Tuple, ast.List)):
            # ``dilations: tuple = (1, 2, 4)``: a display of known values (a loop over it runs)
            vals = [self._eval(x, env, frame) for x in e.elts]
            if any(v is UNKNOWN or isinstance(x, ast.Starred) for v, x in zip(vals, e.elts)):
                return UNKNOWN
            return tuple(vals) if isinstance(e, ast.Tuple) else vals   # (``(1, 2) == [1, 2]`` is False)
        if isinstance(e, ast.Name):
            return env.get(e.id, UNKNOWN)
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and frame is not None \
                and e.value.id == "self":
            return frame.fields.get(e.attr, UNKNOWN)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self._eval(e.operand, env, frame)
            return UNKNOWN if v is UNKNOWN else (not v)
        if isinstance(e, ast.BoolOp):
            vals = [self._eval(v, env, frame) for v in e.values]
            if isinstance(e.op, ast.And):
                if any(v is not UNKNOWN and not v for v in vals):
                    return False
                return UNKNOWN if any(v is UNKNOWN for v in vals) else all(vals)
            if any(v is not UNKNOWN and v for v in vals):
                return True
            return UNKNOWN if any(v is UNKNOWN for v in vals) else any(vals)
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            a = self._eval(e.left, env, frame)
            b = self._eval(e.comparators[0], env, frame)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            op = e.ops[0]
            try:
                if isinstance(op, (ast.Eq, ast.Is)):
                    return a == b
                if isinstance(op, (ast.NotEq, ast.IsNot)):
                    return a != b
            except Exception:  # pragma: no cover - literals always compare
                return UNKNOWN
            return UNKNOWN
        if isinstance(e, ast.IfExp):
            t = self._eval(e.test, env, frame)
            if t is UNKNOWN:
                a, b = self._eval(e.body, env, frame), self._eval(e.orelse, env, frame)
                return a if a is not UNKNOWN and a == b else UNKNOWN
            return self._eval(e.body if t else e.orelse, env, frame)
        return UNKNOWN

    def _run(self, info: ClassInfo, method: Function, fields: Dict[str, object], env: Dict[str, object],
             out: List[Need], depth: int, active: Set[Tuple[int, int]]) -> None:
        key = (id(method), depth)
        if depth > MAX_DEPTH or id(method) in {k for k, _ in active}:
            return
        active = active | {key}
        frame = _Frame(info, fields, dict(env))
        self._block(method.node.body, frame, method, True, out, depth, active)

    def _block(self, stmts, frame: _Frame, method: Function, certain: bool, out: List[Need],
               depth: int, active) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                t = self._eval(s.test, frame.env, frame)
                self._exprs(s.test, frame, method, certain, out, depth, active)
                if t is UNKNOWN:
                    self._block(s.body, frame, method, False, out, depth, active)
                    self._block(s.orelse, frame, method, False, out, depth, active)
                    self._forget(s, frame)
                else:
                    self._block(s.body if t else s.orelse, frame, method, certain, out, depth, active)
                continue
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                self._exprs(s.iter if not isinstance(s, ast.While) else s.test, frame, method, certain, out,
                            depth, active)
                self._forget(s, frame)
                # a loop over ``self.features`` or ``range(n)`` may run zero times; one over a
                # non-empty display (``for width in (64, 64):``) or ``range(3)`` runs at least once
                runs = _runs_once(s) or (isinstance(s, (ast.For, ast.AsyncFor)) and _non_empty(
                    self._eval(s.iter, frame.env, frame)))     # ``for d in self.dilations`` = (1, 2, 4)
                self._block(s.body, frame, method, certain and runs, out, depth, active)
                self._block(s.orelse, frame, method, False, out, depth, active)
                self._forget(s, frame)
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                self._block(s.body, frame, method, certain, out, depth, active)
                continue
            if isinstance(s, ast.Try):
                self._block(s.body, frame, method, False, out, depth, active)
                for h in s.handlers:
                    self._block(h.body, frame, method, False, out, depth, active)
                self._block(s.orelse, frame, method, False, out, depth, active)
                self._block(s.finalbody, frame, method, certain, out, depth, active)
                self._forget(s, frame)
                continue
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            self._exprs(s, frame, method, certain, out, depth, active)
            if isinstance(s, ast.Assign):
                self._assign(s, frame, method)
            elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                frame.env[s.target.id] = UNKNOWN
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    self._variable_update(t, frame, method, certain, out)
                    if certain and (s.value is not None or not isinstance(s, ast.AnnAssign)) and \
                            method.name != "setup" and any(
                                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and
                                n.value.id == method.self_name for n in _store_targets(t)):
                        # ``self.x = ...`` outside setup: the bound module is frozen, apply raises
                        # here whatever else the call does (JAX611 names it)
                        out.append(Need(RAISES, "SetAttributeFrozenModuleError", s,
                                        f"`{ast.unparse(t)} = ...`", frame.info.name))
            if isinstance(s, (ast.Return, ast.Raise)):
                return

    @staticmethod
    def _forget(s: ast.stmt, frame: _Frame) -> None:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                frame.drop(n.id)

    def _assign(self, s: ast.Assign, frame: _Frame, method: Function) -> None:
        if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            frame.env[name] = self._eval(s.value, frame.env, frame)
            v = s.value
            if isinstance(v, ast.Call):
                frame.ctors.pop(name, None)
                frame.partials.pop(name, None)
                if self._submodule_kind(v, method) is not None:
                    frame.ctors[name] = (v, method)
                elif self.model.qualname(v.func, method) in K.PARTIAL and v.args and \
                        isinstance(v.args[0], (ast.Name, ast.Attribute)) and \
                        self._submodule_kind(ast.Call(func=v.args[0], args=[], keywords=[]), method) is not None:
                    frame.partials[name] = (v, method)
                coll = self._variable_collection(v, method)
                if coll is not None:
                    frame.variables[name] = coll
            elif isinstance(v, ast.Lambda) and not v.args.args and not v.args.vararg and not v.args.kwarg \
                    and isinstance(v.body, ast.Call) and self._submodule_kind(v.body, method) is not None:
                # ``norm = lambda: nn.BatchNorm(use_running_average=not train)``, then ``norm()(x)``:
                # a layer factory, like ``partial(nn.BatchNorm, ...)``
                frame.ctors.pop(name, None)
                frame.partials[name] = (ast.Call(func=ast.Name(id="partial", ctx=ast.Load()),
                                                 args=[v.body.func] + list(v.body.args),
                                                 keywords=list(v.body.keywords)), method)
            return
        for t in s.targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    frame.drop(n.id)

    @staticmethod
    def _variable_collection(call: ast.Call, method: Function) -> Optional[str]:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "variable" and isinstance(f.value, ast.Name) \
                and f.value.id == method.self_name and call.args:
            coll = const_str(call.args[0])
            if coll is not None and coll != "params":
                return coll
        return None

    def _variable_update(self, t: ast.AST, frame: _Frame, method: Function, certain: bool,
                         out: List[Need]) -> None:
        """``v.value = ...`` where ``v = self.variable("counter", ...)`` (here or in setup)."""
        if not (certain and isinstance(t, ast.Attribute) and t.attr == "value"):
            return
        holder = t.value
        coll = None
        if isinstance(holder, ast.Name):
            coll = frame.variables.get(holder.id)
        elif isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name) \
                and holder.value.id == method.self_name:
            setup = self.model.class_method(frame.info, "setup")
            values = self._setup_values(frame.info, holder.attr)
            if setup is not None and len(values) == 1 and isinstance(values[0], ast.Call):
                coll = self._variable_collection(values[0], setup)
        if coll is not None:
            out.append(Need("collection", coll, t, f"`{ast.unparse(t)} = ...`",
                            frame.info.name))

    def _setup_values(self, info: ClassInfo, attr: str, _seen=None) -> List[ast.expr]:
        got = info.setup_attrs.get(attr)
        if got:
            return got
        _seen = _seen or set()
        _seen.add(info.name)
        for b in info.bases:
            base = self.model.classes.get(b)
            if base is not None and base.name not in _seen:
                got = self._setup_values(base, attr, _seen)
                if got:
                    return got
        return []

    def _submodule_kind(self, ctor: ast.Call, scope: Function):
        f = ctor.func
        layer = layer_for(self.model.qualname(f, scope))
        if layer is not None:
            return layer
        if isinstance(f, ast.Name):
            info = self.model.classes.get(f.id)
            if info is not None and info.module_kind == "linen":
                return info
        return None

    def _exprs(self, node: ast.AST, frame: _Frame, method: Function, certain: bool, out: List[Need],
               depth: int, active) -> None:
        for n in _walk_no_defs(node):
            if isinstance(n, ast.Call):
                self._call(n, frame, method, certain, out, depth, active)

    def _call(self, call: ast.Call, frame: _Frame, method: Function, certain: bool, out: List[Need],
              depth: int, active) -> None:
        f = call.func
        selfname = method.self_name
        # self.make_rng("dropout")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == selfname:
            if f.attr == "make_rng":
                stream = const_str(call.args[0]) if call.args else "params"
                if stream is not None and certain:
                    out.append(Need("rng", stream, call, f"`self.make_rng({stream!r})`", frame.info.name))
                return
            if f.attr == "put_variable" and call.args:
                coll = const_str(call.args[0])
                if coll is not None and coll != "params" and certain:
                    out.append(Need("collection", coll, call, f"`self.put_variable({coll!r}, ...)`",
                                    frame.info.name))
                return
            # a submodule made in setup, or a helper method
            values = self._setup_values(frame.info, f.attr)
            if values:
                setup = self.model.class_method(frame.info, "setup")
                if len(values) == 1 and isinstance(values[0], ast.Call) and setup is not None:
                    self._apply_submodule(values[0], setup, call, frame, method, certain, out, depth,
                                          active, ctor_in_setup=True)
                return
            helper = self.model.class_method(frame.info, f.attr)
            if helper is not None and not helper.is_staticmethod:
                sub = self._call_method(frame.info, helper, frame.fields, call, frame, depth, active)
                out.extend(n for n in sub if certain)
            return
        # nn.Dropout(...)(x) / Block(...)(x)
        if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id in frame.partials:
            part, scope = frame.partials[f.func.id]
            merged = ast.Call(func=part.args[0], args=list(part.args[1:]) + list(f.args),
                              keywords=list(part.keywords) + list(f.keywords))
            self._apply_submodule(merged, scope, call, frame, method, certain, out, depth, active)
            return
        if isinstance(f, ast.Call):
            if self._submodule_kind(f, method) is not None:
                self._apply_submodule(f, method, call, frame, method, certain, out, depth, active)
            return
        # drop = nn.Dropout(...); drop(x)
        if isinstance(f, ast.Name) and f.id in frame.ctors:
            ctor, scope = frame.ctors[f.id]
            self._apply_submodule(ctor, scope, call, frame, method, certain, out, depth, active)

    def _apply_submodule(self, ctor: ast.Call, ctor_scope: Function, call: ast.Call, frame: _Frame,
                         method: Function, certain: bool, out: List[Need], depth: int, active,
                         ctor_in_setup: bool = False) -> None:
        kind = self._submodule_kind(ctor, ctor_scope)
        # constructor arguments evaluated where the constructor runs: in setup only fields are known
        ctor_env = {} if ctor_in_setup else frame.env
        if isinstance(kind, Layer):
            if not certain:
                return
            self._layer(kind, ctor, call, frame, ctor_env, out)
        elif isinstance(kind, ClassInfo):
            fields = self._fields(kind, ctor, ctor_scope, ctor_env, frame)
            sub_method = self.model.class_method(kind, "__call__")
            if fields is None or sub_method is None:
                return
            sub = self._call_method(kind, sub_method, fields, call, frame, depth, active)
            if certain:
                out.extend(sub)

    def _call_method(self, info: ClassInfo, method: Function, fields: Dict[str, object], call: ast.Call,
                     frame: _Frame, depth: int, active) -> List[Need]:
        """What ``method`` of ``info`` (a helper method or a submodule's ``__call__``) needs when
        ``call`` in ``frame`` runs it, its arguments evaluated there; [] when they cannot be
        bound (``**kwargs``, ``*args``)."""
        if any(k.arg is None for k in call.keywords):
            return []
        keywords = {k.arg: k.value for k in call.keywords}
        env = self._bind(method, list(call.args), keywords, lambda e: self._eval(e, frame.env, frame))
        if env is None:
            return []
        sub: List[Need] = []
        self._run(info, method, fields, env, sub, depth + 1, active)
        return sub

    def _layer(self, layer: Layer, ctor: ast.Call, call: ast.Call, frame: _Frame, ctor_env, out) -> None:
        def ctor_arg(name: str, pos: Optional[int]) -> Optional[ast.expr]:
            for kw in ctor.keywords:
                if kw.arg == name:
                    return kw.value
            if pos is not None and len(ctor.args) > pos:
                return ctor.args[pos]
            return None

        def call_arg(name: str, pos: Optional[int]) -> Optional[ast.expr]:
            for kw in call.keywords:
                if kw.arg == name:
                    return kw.value
            if pos is not None and len(call.args) > pos + 1:
                return call.args[pos + 1]
            return None

        if any(isinstance(a, ast.Starred) for a in list(ctor.args) + list(call.args)) or \
                any(k.arg is None for k in list(ctor.keywords) + list(call.keywords)):
            return
        if layer.collection is not None:
            # the layer's variables live in the collection: read (or created, when mutable) on
            # every run, whichever way the switch is set
            out.append(Need(READS, layer.collection, call, f"`{layer.short}`", frame.info.name))
        switch_expr = call_arg(layer.switch, layer.switch_call_pos)
        switch = self._eval(switch_expr, frame.env, frame) if switch_expr is not None else UNKNOWN
        if switch_expr is None:
            ctor_switch = ctor_arg(layer.switch, layer.switch_field_pos)
            switch = self._eval(ctor_switch, ctor_env, frame) if ctor_switch is not None else UNKNOWN
        if switch is UNKNOWN or switch is None or bool(switch):
            return
        if layer.rate is not None:
            rate_expr = ctor_arg(layer.rate, layer.rate_field_pos)
            rate = self._eval(rate_expr, ctor_env, frame) if rate_expr is not None else layer.rate_default
            if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate == 0:
                return
            if rate is None:
                return
        what = f"`{layer.short}`"
        if layer.stream is not None:
            if layer.explicit_rng and call_arg(layer.explicit_rng, None) is not None:
                return
            stream = layer.stream
            if layer.stream_field:
                s = ctor_arg(layer.stream_field, None)
                if s is not None:
                    stream = const_str(s)
                    if stream is None:
                        return
            out.append(Need("rng", stream, call, what, frame.info.name))
        if layer.collection is not None:
            out.append(Need("collection", layer.collection, call, what, frame.info.name))


def _store_targets(t: ast.AST):
    """The targets an assignment stores into (the elements of an unpacked tuple)."""
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _store_targets(e.value if isinstance(e, ast.Starred) else e)
    else:
        yield t


def _walk_no_defs(node: ast.AST):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            stack.append(c)


def _non_empty(v: object) -> bool:
    return isinstance(v, (tuple, list)) and len(v) > 0


def _runs_once(loop: ast.stmt) -> bool:
    """The ``for`` loop's body certainly runs at least once: its iterable is a non-empty tuple or
    list display, or ``range`` of literal bounds that hold a value."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = loop.iter
    if isinstance(it, (ast.Tuple, ast.List)):
        return bool(it.elts) and not any(isinstance(e, ast.Starred) for e in it.elts)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
            and not it.keywords and 1 <= len(it.args) <= 3 \
            and all(isinstance(a, ast.Constant) and type(a.value) is int for a in it.args):
        try:
            return len(range(*(a.value for a in it.args))) > 0
        except ValueError:
            return False
    return False
