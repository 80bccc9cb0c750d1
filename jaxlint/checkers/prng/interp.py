"""The path-sensitive interpreter of one scope's key values.

It runs the scope's statements over a list of :class:`~.states.State` (one per execution path):
every binding from a key producer (or an unknown source) makes a fresh value, ``k2 = key``
aliases, ``keys[0]`` derives a value from ``keys``; branches fork the paths, loops and
comprehensions run their body twice so that a key consumed in the body and not re-split is
seen consumed again by the next iteration; a ``return`` in a ``lax`` loop body checks which
carried keys go back unchanged.  Which calls consume a key, and through which parameters of
this module's functions, it asks the :class:`~.keys.KeyAnalysis` it is given.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

from ...analysis.model import Function
from .consumers import KeyCalls
from .loops import is_config_sweep, loop_label
from .states import (STEP_BUDGET, Budget, Frame, Reuse, State, Use, carry_names, conflict, copy_all, dedupe, encloses, forget, iter_name_nodes, mentions, rooted_at, starts_after)
from ...analysis.liveness import bound_names as target_names
from .vocabulary import COMPREHENSIONS, KEY_FROM_SEED

if TYPE_CHECKING:  # pragma: no cover
    from .keys import KeyAnalysis

_NON_KEY_VALUES = (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Compare, ast.BoolOp, ast.UnaryOp,
                   ast.Dict, ast.Set, ast.List, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp,
                   ast.Lambda)


class Interpreter(KeyCalls):
    """Path-sensitive abstract interpretation of one scope's key values."""

    def __init__(self, an: "KeyAnalysis", fn: Function, keys: Set[str], body_spec):
        self.an = an
        self.m = an.model
        self.fn = fn
        self.keys = keys
        self.reports: Dict[int, Reuse] = {}
        self.uses: Dict[Tuple[int, int], Use] = {}
        self.call_infos: Dict[int, list] = {}
        self.value_uses: Dict[object, List[Use]] = {}
        self.vid_nodes: Dict[object, ast.AST] = {}
        self.try_collect: Optional[List[State]] = None
        self.reported_vids: Set[object] = set()
        self.vid_seed: Dict[object, tuple] = {}     # value -> ("seed", literal) it was made from
        self.use_vid: Dict[int, object] = {}        # id(use) -> the value it consumed
        self.stmt: Optional[ast.stmt] = None
        self.comp_depth = 0
        self.steps = 0
        self.loops: List[ast.AST] = []
        self.body_spec = body_spec
        self.carry = body_spec[1] if body_spec else None
        self.carry_vids: Set[object] = set()
        self.agreeing = _agreeing(fn)
        self.repeated_tests = _repeated_tests(fn, self.agreeing)
        self.carry_assigned = False
        # the first line that rebinds the carry parameter: values unpacked from it before that
        # line (``params, rng = update_state`` first thing in the body) come from the carry
        self.carry_rebound_at = None
        if self.carry is not None:
            lines = [n.lineno for n in fn.of_type(ast.Assign) for t in n.targets if self.carry in target_names(t)]
            self.carry_assigned = bool(lines)
            self.carry_rebound_at = min(lines) if lines else None

    # ------------------------------------------------------------ driver
    def run(self) -> List[Reuse]:
        fn = self.fn
        env: Dict[str, object] = {}
        for p in fn.all_params():
            if p in self.keys:
                env[p] = ("param", p)
                if p == self.carry:
                    self.carry_vids.add(("param", p))
        states = [State(env, {})]
        if fn.is_lambda:
            states = self.expr(fn.node.body, states)
            if self.carry is not None:
                self.on_return(fn.node.body, states)
        else:
            self.block(fn.node.body, states, None)
        for r in self.reports.values():
            sites = self.value_uses.get(r._vid, [])
            r.sites = sorted(sites, key=lambda u: (u.call.lineno, u.call.col_offset))
        return list(self.reports.values())

    def tick(self) -> None:
        self.steps += 1
        if self.steps > STEP_BUDGET:
            raise Budget()

    # ------------------------------------------------------------ statements
    def block(self, stmts, states: List[State], frame: Optional[Frame]) -> List[State]:
        collect = self.try_collect
        for s in stmts:
            if not states:
                break
            states = self.stmt_(s, states, frame)
            if collect is not None and states:
                collect.extend(copy_all(states))
        return states

    def _collect_exit(self, states: List[State]) -> None:
        """A path leaves the statement list early (``return``/``raise``): an enclosing
        ``except`` may still see what it consumed."""
        if self.try_collect is not None:
            self.try_collect.extend(copy_all(states))

    def stmt_(self, s: ast.stmt, states: List[State], frame: Optional[Frame]) -> List[State]:
        self.tick()
        t = s.__class__
        self.stmt = s
        if self.repeated_tests and t in _REBINDING and any(st.conds for st in states):
            _forget_conds(s, states)
        if t is ast.Expr:
            return self.expr(s.value, states)
        if t is ast.Assign:
            states = self.expr(s.value, states)
            for target in s.targets:
                states = self.target_exprs(target, states)
                self.bind(target, s.value, states)
            return states
        if t is ast.AnnAssign:
            if s.value is not None:
                states = self.expr(s.value, states)
                self.bind(s.target, s.value, states)
            return states
        if t is ast.AugAssign:
            states = self.expr(s.value, states)
            states = self.target_exprs(s.target, states)
            if isinstance(s.target, ast.Name) and s.target.id in self.keys:
                for st in states:
                    st.env[s.target.id] = None
            return states
        if t is ast.Return:
            if s.value is not None:
                states = self.expr(s.value, states)
            if self.carry is not None:
                self.on_return(s.value, states)
            self._collect_exit(states)
            return []
        if t is ast.If:
            states = self.expr(s.test, states)
            cond = _cond_key(s.test, self.agreeing, s.lineno)
            if cond is None or cond[0] not in self.repeated_tests:
                a = self.block(s.body, copy_all(states), frame)
                b = self.block(s.orelse, states, frame)
                return dedupe(a + b)
            # a test repeated later (``if cfg.nnx:`` twice): a path takes the same branch each time
            text, taken = cond
            into_body: List[State] = []
            into_else: List[State] = []
            for st in states:
                known = st.conds.get(text)
                if known is None or known == taken:
                    c = st.copy() if known is None else st
                    c.conds[text] = taken
                    into_body.append(c)
                if known is None or known != taken:
                    st.conds[text] = not taken
                    into_else.append(st)
            a = self.block(s.body, into_body, frame)
            b = self.block(s.orelse, into_else, frame)
            return dedupe(a + b)
        if t is ast.For or t is ast.AsyncFor:
            return self.loop(s, states, is_for=True)
        if t is ast.While:
            return self.loop(s, states, is_for=False)
        if t is ast.Break:
            if frame is not None:
                frame.breaks.extend(states)
            return []
        if t is ast.Continue:
            if frame is not None:
                frame.continues.extend(states)
            return []
        if t is ast.Raise:
            if s.exc is not None:
                states = self.expr(s.exc, states)
            self._collect_exit(states)
            return []
        if t is ast.Try or t.__name__ == "TryStar":
            outer = self.try_collect
            inside: List[State] = []
            self.try_collect = inside
            try:
                body_out = self.block(s.body, copy_all(states), frame)
            finally:
                self.try_collect = outer
            if outer is not None:
                outer.extend(inside)
            # an exception may leave the body after any statement
            handler_in = dedupe(copy_all(states) + inside)
            outs = self.block(s.orelse, body_out, frame)
            for h in s.handlers:
                outs = outs + self.block(h.body, copy_all(handler_in), frame)
            outs = dedupe(outs)
            if s.finalbody:
                outs = self.block(s.finalbody, outs, frame)
            return outs
        if t is ast.With or t is ast.AsyncWith:
            for item in s.items:
                states = self.expr(item.context_expr, states)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None, states)
            return self.block(s.body, states, frame)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef:
            for d in s.decorator_list:
                states = self.expr(d, states)
            self.unbind(s.name, states)
            return states
        if t is ast.Delete:
            for target in s.targets:
                for n in target_names(target):
                    self.unbind(n, states)
            return states
        if t is ast.Assert:
            states = self.expr(s.test, states)
            return states
        if t.__name__ == "Match":
            states = self.expr(s.subject, states)
            outs = []
            for case in s.cases:
                outs.extend(self.block(case.body, copy_all(states), frame))
            return dedupe(outs + states)
        return states

    def loop(self, s, states: List[State], is_for: bool) -> List[State]:
        if is_for:
            states = self.expr(s.iter, states)
            fresh_target = self.iter_gives_keys(s.iter)
        else:
            states = self.expr(s.test, states)
            fresh_target = False
        infinite = not is_for and isinstance(s.test, ast.Constant) and bool(s.test.value)
        exits: List[State] = [] if infinite else list(states)
        breaks: List[State] = []
        cur = copy_all(states)
        self.loops.append(s)
        try:
            for _pass in range(2):
                if not cur:
                    break
                frame = Frame(s)
                if is_for:
                    self.stmt = s
                    self.bind_loop_target(s.target, cur, fresh_target)
                out = self.block(s.body, cur, frame)
                out = dedupe(out + frame.continues)
                breaks.extend(frame.breaks)
                if not is_for and out:
                    self.stmt = s
                    out = self.expr(s.test, out)
                if not infinite:
                    exits.extend(copy_all(out))
                cur = out
        finally:
            self.loops.pop()
        result = dedupe(exits)
        if s.orelse:
            result = self.block(s.orelse, result, None)
        return dedupe(result + breaks)

    # ------------------------------------------------------------ bindings
    def unbind(self, name: str, states: List[State]) -> None:
        if name in self.keys:
            for st in states:
                st.env[name] = None

    def iter_gives_keys(self, it: ast.AST) -> bool:
        return self.an.is_producer(it, self.fn) or mentions(it, self.keys)

    def bind_loop_target(self, target: ast.AST, states: List[State], fresh: bool) -> None:
        for n in iter_name_nodes(target):
            if n.id in self.keys:
                vid = id(n) if fresh else None
                if vid is not None:
                    self.vid_nodes[vid] = n
                for st in states:
                    st.env[n.id] = vid
                    if vid is not None:
                        forget(st, vid)

    def target_exprs(self, target: ast.AST, states: List[State]) -> List[State]:
        """Evaluate the expressions inside an assignment target (``a[f(key)] = ...``)."""
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            for child in ast.iter_child_nodes(target):
                if isinstance(child, ast.expr):
                    states = self.expr(child, states)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                states = self.target_exprs(e, states)
        return states

    def bind(self, target: ast.AST, value: Optional[ast.AST], states: List[State]) -> None:
        t = target.__class__
        if t is ast.Starred:
            for n in target_names(target):
                self.unbind(n, states)
            return
        if t is ast.Tuple or t is ast.List:
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                    and not any(isinstance(e, ast.Starred) for e in value.elts):
                # evaluate the right side first: ``a, b = b, a`` swaps
                saved = [{n: st.env.get(n) for n in self.keys} for st in states]
                for te, ve in zip(target.elts, value.elts):
                    self._bind_one(te, ve, states, saved)
                return
            elem = None
            if value is not None and (self.an.is_producer(value, self.fn) or
                                      (self.carry is not None and self._from_carry()
                                       and rooted_at(value, self.carry))):
                elem = value
            for te in target.elts:
                if isinstance(te, ast.Name):
                    if te.id in self.keys:
                        self._fresh(te, states, carry=elem is not None and not self.an.is_producer(elem, self.fn))
                else:
                    self.bind(te, None, states)
            return
        if t is ast.Name:
            self._bind_one(target, value, states, None)

    def _bind_one(self, target: ast.AST, value: Optional[ast.AST], states: List[State], saved) -> None:
        if not isinstance(target, ast.Name):
            if isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
                self.bind(target, value, states)
            return
        name = target.id
        if name not in self.keys:
            return
        v = value
        if v is None:
            self._fresh(target, states)
            return
        if isinstance(v, ast.Name) and v.id in self.keys:
            for i, st in enumerate(states):
                src = saved[i].get(v.id) if saved is not None else st.env.get(v.id)
                st.env[name] = src
            return
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in self.keys \
                and isinstance(v.slice, ast.Constant) and not isinstance(v.slice.value, str):
            for i, st in enumerate(states):
                base = saved[i].get(v.value.id) if saved is not None else st.env.get(v.value.id)
                st.env[name] = ("sub", base, v.slice.value) if base is not None else None
            return
        seed = self.seed_vid(v)
        if seed is not None:
            # ``key = jax.random.PRNGKey(0)``: a value of its own, made from a literal seed
            # (another key made from the same seed is the same key: see ``call_event``)
            self._fresh(target, states)
            self.vid_seed[id(target)] = seed
            return
        if (isinstance(v, _NON_KEY_VALUES) and not self.an.is_producer(v, self.fn)) or \
                (isinstance(v, ast.Call) and self.an.random_qualname(v, self.fn) is not None
                 and not self.an.is_producer(v, self.fn)):
            # a literal, arithmetic, or a draw (``x = jax.random.normal(key)``, ``key_data(key)``)
            for st in states:
                st.env[name] = None
            return
        carry = (self.carry is not None and self._from_carry() and rooted_at(v, self.carry))
        self._fresh(target, states, carry=carry)

    def _from_carry(self) -> bool:
        """A name read now still holds the carry parameter's value (it is not rebound yet)."""
        if not self.carry_assigned:
            return True
        s = self.stmt
        return s is not None and s.lineno < self.carry_rebound_at and not self.loops

    def _fresh(self, target: ast.Name, states: List[State], carry: bool = False) -> None:
        vid = id(target)
        self.vid_nodes[vid] = target
        if carry:
            self.carry_vids.add(vid)
        for st in states:
            st.env[target.id] = vid
            forget(st, vid)

    # ------------------------------------------------------------ expressions
    def expr(self, e: Optional[ast.AST], states: List[State]) -> List[State]:
        if e is None or not states:
            return states
        t = e.__class__
        if t is ast.Name or t is ast.Constant:
            return states
        if t is ast.Call:
            states = self.expr(e.func, states)
            for a in e.args:
                states = self.expr(a.value if a.__class__ is ast.Starred else a, states)
            for kw in e.keywords:
                states = self.expr(kw.value, states)
            self.call_event(e, states)
            return states
        if t is ast.Lambda:
            return states
        if t in COMPREHENSIONS:
            return self.comprehension(e, states)
        if t is ast.IfExp:
            states = self.expr(e.test, states)
            a = self.expr(e.body, copy_all(states))
            b = self.expr(e.orelse, states)
            return dedupe(a + b)
        if t is ast.NamedExpr:
            states = self.expr(e.value, states)
            self.bind(e.target, e.value, states)
            return states
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                states = self.expr(child, states)
        return states

    def comprehension(self, e, states: List[State]) -> List[State]:
        gens = e.generators
        states = self.expr(gens[0].iter, states)
        fresh = self.iter_gives_keys(gens[0].iter)
        exits = list(states)
        cur = copy_all(states)
        self.comp_depth += 1
        self.loops.append(e)
        try:
            for _pass in range(2):
                self.tick()
                self.bind_loop_target(gens[0].target, cur, fresh)
                for c in gens[0].ifs:
                    cur = self.expr(c, cur)
                for g in gens[1:]:
                    cur = self.expr(g.iter, cur)
                    self.bind_loop_target(g.target, cur, self.iter_gives_keys(g.iter))
                    for c in g.ifs:
                        cur = self.expr(c, cur)
                if isinstance(e, ast.DictComp):
                    cur = self.expr(e.key, cur)
                    cur = self.expr(e.value, cur)
                else:
                    cur = self.expr(e.elt, cur)
                cur = dedupe(cur)
                exits.extend(copy_all(cur))
        finally:
            self.comp_depth -= 1
            self.loops.pop()
        return dedupe(exits)

    # ------------------------------------------------------------ consumption
    def use_for(self, call: ast.Call, arg: ast.AST, kind: str, data, callee: str, ident, draws: bool) -> Use:
        k = (id(call), id(arg))
        u = self.uses.get(k)
        if u is None:
            u = Use(call, arg, self.stmt, kind, callee, data, self.comp_depth > 0, self.fn, ident, draws)
            self.uses[k] = u
        return u

    def call_event(self, call: ast.Call, states: List[State]) -> None:
        info = self.call_info(call)
        if not info:
            return
        for arg, kind, data, callee, ident, draws in info:
            use = self.use_for(call, arg, kind, data, callee, ident, draws)
            for st in states:
                vid = self._vid(arg, st)
                if vid is None:
                    continue
                seed = vid if isinstance(vid, tuple) and vid[:1] == ("seed",) else self.vid_seed.get(vid)
                if seed is not None:
                    self._seed_event(use, vid, seed, st)
                    if vid is seed:
                        continue
                vu = self.value_uses.setdefault(vid, [])
                if use not in vu:
                    vu.append(use)
                prev = st.used.get(vid)
                if prev:
                    if use in prev and kind == "fold_in":
                        continue
                    for p in prev:
                        if conflict(p, use):
                            self.report(use, p, vid)
                            break
                    if use not in prev:
                        st.used[vid] = prev + (use,)
                else:
                    st.used[vid] = (use,)

    def _seed_event(self, use: Use, vid, seed: tuple, st: State) -> None:
        """Keys made from one literal seed are one key: a consumption of a key made by another
        ``PRNGKey(<seed>)`` than an earlier consumption on this path repeats its numbers."""
        making = id(use.arg) if vid is seed else vid     # (an inline ``PRNGKey(0)``: its own making)
        self.use_vid[id(use)] = making
        prev = st.used.get(seed)
        if prev:
            for p in prev:
                if self.use_vid.get(id(p)) != making and p.call is not use.call and conflict(p, use) \
                        and not (p.kind in _DERIVING and use.kind in _DERIVING):
                    # (``split(PRNGKey(0))`` twice restarts one stream from its seed, as a script
                    # seeding each experiment does on purpose: reported when a key is drawn from)
                    k = id(use.call)
                    if k not in self.reports:
                        self.reports[k] = Reuse(self.fn, use, p, "again", "", seed)
                        self.value_uses.setdefault(seed, [])
                    break
            if use not in prev:
                st.used[seed] = prev + (use,)
        else:
            st.used[seed] = (use,)

    def seed_vid(self, e: ast.AST):
        """``("seed", value)`` for ``jax.random.PRNGKey(<int literal>)``/``jax.random.key(...)``."""
        if e.__class__ is not ast.Call or len(e.args) != 1 or e.keywords:
            return None
        a = e.args[0]
        if not (isinstance(a, ast.Constant) and type(a.value) is int):
            return None
        if self.an.random_qualname(e, self.fn) not in KEY_FROM_SEED:
            return None
        return ("seed", a.value)

    def _vid(self, arg: ast.AST, st: State):
        if isinstance(arg, ast.Name):
            return st.env.get(arg.id)
        if isinstance(arg, ast.Call):
            return self.seed_vid(arg)
        base = st.env.get(arg.value.id)
        if base is None:
            return None
        return ("sub", base, arg.slice.value)

    def report(self, use: Use, first: Use, vid) -> None:
        """Record the first reuse of each key value (its "second use"); the fix and the
        message cover the value's other uses."""
        k = id(use.call)
        if k in self.reports or vid in self.reported_vids:
            return
        if first is use or starts_after(first.call, use.call):
            carrier = self._carrier(vid)
            if carrier is None and first is not use:
                carrier = self._wrapped_carrier(vid, use, first)
            if carrier is None or is_config_sweep(self.m, carrier, self.fn):
                # each iteration of a loop over literal configurations (shapes, dtypes)
                # replays the same inputs on purpose
                return
            r = self.reports[k] = Reuse(self.fn, use, first, "loop", loop_label(carrier), vid)
            r.loop = carrier
        else:
            self.reports[k] = Reuse(self.fn, use, first, "again", "", vid)
        self.reported_vids.add(vid)

    def _carrier(self, vid) -> Optional[ast.AST]:
        """The innermost loop being run that does not create ``vid``: the one whose
        iterations see the same key value."""
        while isinstance(vid, tuple) and vid and vid[0] == "sub":
            vid = vid[1]
        node = self.vid_nodes.get(vid)
        for loop in reversed(self.loops):
            if node is None or not encloses(loop, node):
                return loop
        return None

    def _wrapped_carrier(self, vid, use: Use, first: Use) -> Optional[ast.AST]:
        """A key made in the loop and consumed further down the body (``first``) that an earlier
        line consumes again (``use``): the next iteration sees it through the loop-carried name
        (``rng, k = split(rng)`` ... ``_, s = split(rng)``) -- unless it is made above ``use`` in the
        body, when each iteration makes a fresh one.  The innermost loop holding both uses."""
        while isinstance(vid, tuple) and vid and vid[0] == "sub":
            vid = vid[1]
        node = self.vid_nodes.get(vid)
        for loop in reversed(self.loops):
            if not (encloses(loop, use.call) and encloses(loop, first.call)):
                continue
            if node is not None and encloses(loop, node) and \
                    (getattr(node, "end_lineno", None) or node.lineno) < use.call.lineno:
                return None     # made on an earlier line of the body: fresh on every iteration
            return loop
        return None

    # ------------------------------------------------------------ lax loop carries
    def on_return(self, value: Optional[ast.AST], states: List[State]) -> None:
        prim, carry, shape = self.body_spec
        if value is None or carry is None:
            return
        out = value
        if shape == "first":
            if not (isinstance(value, ast.Tuple) and len(value.elts) == 2):
                return
            out = value.elts[0]
        names = []
        carry_names(out, names)
        names = self._returned_names(out, names)
        whole = isinstance(out, ast.Name) and out.id == carry and not self.carry_assigned
        label = prim.replace("jax.lax.", "lax.")
        for st in states:
            vids = set()
            for n in names:
                vid = st.env.get(n)
                if vid is not None and vid in self.carry_vids:
                    vids.add(vid)
            if whole:
                vids.update(v for v in self.carry_vids if v in st.used)
            for vid in vids:
                for use in st.used.get(vid, ()):
                    if use.kind == "fold_in" and use.data is None:
                        continue
                    k = id(use.call)
                    if k not in self.reports and vid not in self.reported_vids:
                        self.reports[k] = Reuse(self.fn, use, None, "carry", f"`{label}`", vid)
                        self.reported_vids.add(vid)
            # a key made in this step, consumed here and returned as the carry: the next step
            # receives it and consumes it again (``rng, sub = split(rng); permutation(rng, n)``
            # then ``return (params, rng)``)
            nxt = self._carry_consumer()
            if nxt is None:
                continue
            for n in names:
                vid = st.env.get(n)
                if vid is None or vid in self.carry_vids or vid in self.reported_vids:
                    continue
                for use in st.used.get(vid, ()):
                    if use.kind == "fold_in" and use.data is None:
                        continue
                    k = id(use.call)
                    if k not in self.reports:
                        self.reports[k] = Reuse(self.fn, use, nxt, "carry", f"`{label}`", vid)
                        self.reported_vids.add(vid)
                        break

    def _returned_names(self, out: ast.AST, names: List[str]) -> List[str]:
        """The names a returned carry holds: ``return update_state`` after
        ``update_state = (params, opt_state, rng)`` holds ``params``, ``opt_state`` and ``rng``."""
        if isinstance(out, ast.Name) and out.id not in self.keys:
            v = self.m.reaching_value(out, self.fn) or self.m.single_value(out.id, self.fn)
            if isinstance(v, (ast.Tuple, ast.List, ast.Dict)):
                more: List[str] = []
                carry_names(v, more)
                return more
        return names

    def _carry_consumer(self) -> Optional[Use]:
        """The first consumption, in the body, of a key taken from the carry (what the next
        step does with a key returned in the carry), or None when the body consumes none."""
        uses = [u for v in self.carry_vids for u in self.value_uses.get(v, ())
                if not (u.kind == "fold_in" and u.data is None)]
        if not uses:
            return None
        return min(uses, key=lambda u: (u.call.lineno, u.call.col_offset))


_DERIVING = ("split", "fold_in")

_REBINDING = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
              ast.Delete, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _chain(e: ast.AST) -> bool:
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def _cond_key(test: ast.AST, agreeing: Dict[str, Tuple[str, int]] = None,
              line: int = 0) -> Optional[Tuple[str, bool]]:
    """``cfg.pure_nnx`` -> ("cfg.pure_nnx", True), ``not x`` -> ("x", False): a test that is a
    plain name or attribute chain, whose outcome stays the same until its root is rebound.
    After ``if a.x != b.x: raise ...``, ``b.x`` is spelled ``a.x``."""
    taken = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, taken = test.operand, not taken
    if not _chain(test):
        return None
    text = ast.unparse(test)
    if agreeing and text in agreeing and line > agreeing[text][1]:
        text = agreeing[text][0]
    return text, taken


def _agreeing(fn: Function) -> Dict[str, Tuple[str, int]]:
    """``if a.flag != b.flag: raise ...`` in ``fn``'s own body: past that line the two agree.
    Maps the text of ``b.flag`` to that of ``a.flag`` and the guard's last line."""
    out: Dict[str, Tuple[str, int]] = {}
    body = getattr(fn.node, "body", None)
    if not isinstance(body, list):
        return out
    for s in body:
        if not (isinstance(s, ast.If) and not s.orelse and s.body and isinstance(s.body[-1], ast.Raise)):
            continue
        t = s.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq) \
                and _chain(t.left) and _chain(t.comparators[0]):
            out[ast.unparse(t.comparators[0])] = (ast.unparse(t.left), s.end_lineno or s.lineno)
    return out


def _repeated_tests(fn: Function, agreeing: Dict[str, Tuple[str, int]]) -> Set[str]:
    """Texts of the ``if`` tests (names, attribute chains) that ``fn`` tests more than once."""
    seen: Set[str] = set()
    again: Set[str] = set()
    for n in fn.of_type(ast.If):
        c = _cond_key(n.test, agreeing, n.lineno)
        if c is not None:
            (again if c[0] in seen else seen).add(c[0])
    return again


def _forget_conds(s: ast.stmt, states: List[State]) -> None:
    """``s`` rebinds or writes a name (or an attribute of it): tests rooted there may change."""
    roots: Set[str] = set()
    heads = [s] if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []
    for h in heads:
        roots.add(h.name)
    targets = []
    if isinstance(s, ast.Assign):
        targets = s.targets
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [s.target]
    elif isinstance(s, ast.Delete):
        targets = s.targets
    elif isinstance(s, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in s.items if i.optional_vars is not None]
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                roots.add(n.id)
    if isinstance(s, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        return _drop(states, roots)   # their bodies are walked statement by statement
    _drop(states, roots)


def _drop(states: List[State], roots: Set[str]) -> None:
    for st in states:
        if st.conds:
            for text in [k for k in st.conds if k.split(".", 1)[0] in roots]:
                del st.conds[text]
