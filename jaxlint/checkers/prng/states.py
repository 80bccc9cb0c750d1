"""Per-scope key states: the records of the key-flow analysis (one consumption, one reuse)
and the abstract state of one execution path (which key value each name holds, which values
were already consumed), with the syntax helpers the interpreter walks targets with."""
from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set

from ...analysis.model import Function

STATE_CAP = 32
STEP_BUDGET = 20000

class Use:
    """One consumption of a key value."""

    __slots__ = ("call", "arg", "stmt", "name", "kind", "callee", "data", "in_comp", "fn", "ident", "draws")

    def __init__(self, call: ast.Call, arg: ast.expr, stmt: Optional[ast.stmt], kind: str, callee: str,
                 data, in_comp: bool, fn: Function, ident: Optional[str] = None, draws: bool = False):
        self.call = call
        self.arg = arg                      # the key expression (a Name or ``keys[0]``)
        self.stmt = stmt                    # the statement whose evaluation runs the call
        self.name = arg.id if isinstance(arg, ast.Name) else None
        self.kind = kind                    # sample | split | fold_in | call
        self.callee = callee                # display name of the consumer
        self.data = data                    # fold_in data (a constant) or None
        self.in_comp = in_comp              # inside a comprehension
        self.fn = fn
        # for calls into other functions: which function (through jit/grad/partial wrappers)
        self.ident = ident
        # for calls into other functions: the callee is known to draw from the key (a function
        # of this module whose key parameter reaches a sampler, ``model.init``, an initializer)
        self.draws = draws

    def other_arguments(self) -> tuple:
        """The call's arguments other than the key, as syntax (to tell two calls apart)."""
        c = self.call
        return tuple(ast.dump(a) for a in c.args if a is not self.arg) + \
            tuple((k.arg, ast.dump(k.value)) for k in c.keywords if k.value is not self.arg)

    @property
    def line(self) -> int:
        return self.call.lineno

    def __repr__(self) -> str:  # pragma: no cover
        return f"<Use {self.name} by {self.callee} line {self.line}>"


def repeat_subject(r: "Reuse") -> Optional[tuple]:
    """What a key repeated on every step is, as ``Finding.subject``: the consumption a loop
    repeats (``("key-loop", id(loop), name)``), or the key a ``lax`` loop body reads from outside
    (``("key-lax-body", id(body), name)``).  A rule naming the same repetition in its own terms
    (JAX613: the same dropout mask every step) computes the same subject and supersedes
    JAX401's finding.  None for the other reuses."""
    if r.reason == "loop" and r.loop is not None and r.use.name is not None and \
            (r.first is None or r.first.call is r.use.call):
        return ("key-loop", id(r.loop), r.use.name)
    if r.reason == "closure" and r.use.name is not None:
        return ("key-lax-body", id(r.fn.node), r.use.name)
    return None


class Reuse:
    """A key value consumed a second time.

    ``reason``: ``again`` (already consumed earlier on some path), ``loop``
    (consumed on every iteration of a Python loop or comprehension without
    being re-split), ``carry`` (taken from a ``lax`` loop carry, consumed and
    returned unchanged; or, with ``first`` set, made in the step, consumed and
    returned in the carry, where ``first`` consumes it again next step),
    ``closure`` (closed over by a ``lax`` loop body, ``self.rng`` included),
    ``stored`` (stored on the object at construction, consumed by a method,
    never replaced).
    """

    __slots__ = ("fn", "use", "first", "reason", "where", "sites", "_vid", "origin", "loop")

    def __init__(self, fn: Function, use: Use, first: Optional[Use], reason: str, where: str,
                 vid=None):
        self.fn = fn
        self.use = use
        self.first = first
        self.reason = reason
        self.where = where          # "`for` loop", "comprehension", "`lax.scan`", ...
        # every consumption of the reused value in this scope, in source order (fixes split
        # before each of them); empty when unknown
        self.sites: List[Use] = []
        self._vid = vid
        self.loop: Optional[ast.AST] = None   # for ``loop``: the loop statement or comprehension
        self.origin: Optional[int] = None   # ``stored``: the line that stores the key on the object


class State:
    __slots__ = ("env", "used", "conds")

    def __init__(self, env: Dict[str, object], used: Dict[object, tuple],
                 conds: Optional[Dict[str, bool]] = None):
        self.env = env
        self.used = used
        # outcomes of ``if`` tests this path took that a later ``if`` tests again
        # (``if cfg.nnx: ... else: ...`` twice): text of the test -> taken
        self.conds = conds if conds is not None else {}

    def copy(self) -> "State":
        return State(dict(self.env), dict(self.used), dict(self.conds))

    def sig(self):
        return (frozenset(self.env.items()), frozenset(self.used.items()), frozenset(self.conds.items()))


class Budget(Exception):
    pass


class Frame:
    __slots__ = ("breaks", "continues", "node")

    def __init__(self, node):
        self.node = node
        self.breaks: List[State] = []
        self.continues: List[State] = []


def dedupe(states: List[State]) -> List[State]:
    if len(states) <= 1:
        return states
    seen = set()
    out = []
    for s in states:
        k = s.sig()
        if k in seen:
            continue
        seen.add(k)
        out.append(s)
        if len(out) >= STATE_CAP:
            break
    return out


def copy_all(states: List[State]) -> List[State]:
    return [s.copy() for s in states]


def rooted_at(e: ast.AST, name: str) -> bool:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return isinstance(e, ast.Name) and e.id == name


def forget(st: State, vid) -> None:
    """A binding site runs again: its value (and values indexed from it) are new."""
    used = st.used
    if not used:
        return
    used.pop(vid, None)
    stale = [k for k in used if k.__class__ is tuple and k[0] == "sub" and k[1] == vid]
    for k in stale:
        del used[k]


# the ``data`` of a library ``init``/``apply`` use: the module derives each variable's key from the
# one it is given (Flax folds in the variable's path, Haiku splits a PRNG sequence off it) and never
# draws from that key itself -- a sampler's draw from it repeats nothing there (run with Flax:
# ``normal(key, (32, 6))`` then ``Dense(4).init(key, x)``: different numbers, correlation ~0);
# two such calls with one key derive the same keys (two inits of one structure: equal weights)
DERIVED = "derived"


def conflict(first: Use, second: Use) -> bool:
    if first.kind == "store" or second.kind == "store":
        # a key kept in a state is split by the state's next step: that repeats a split here
        other = second if first.kind == "store" else first
        return other.kind == "split" and other.call is not (first if other is second else second).call
    if DERIVED in (first.data, second.data) and "sample" in (first.kind, second.kind):
        # a sampler draws from the key itself; a module's init/apply only from keys it derives
        # from it (Flax folds in each variable's path): the two repeat no numbers
        return False
    if first.kind == "fold_in" or second.kind == "fold_in":
        # fold_in(key, d) derives a distinct key per datum: only the same constant twice repeats
        return first.kind == second.kind == "fold_in" and first.data is not None and first.data == second.data
    if first.kind == second.kind == "call" and first.call is not second.call and first.ident == second.ident:
        # one function evaluated twice with one key: the same randomness on purpose when it is
        # replayed on the same inputs (``f(key, x)`` and ``jax.grad(f)(key, x)``) or when the
        # function is not known to draw from the key (a data generator replayed); a known
        # sampler called on different inputs draws correlated numbers
        # (``add_noise(images, key)``, ``add_noise(labels, key)``)
        # -- except a module's ``init``: two inits of one module with one key are twin models
        # with equal weights (twin critics), never a replay
        # -- except a module's ``init``: two inits of one module with one key are twin models
        # with equal weights (twin critics), never a replay -- unless one is a target network,
        # which starts as a copy of the online one on purpose (DQN, SAC)
        return first.draws and second.draws and (
            first.other_arguments() != second.other_arguments()
            or (_initializes(first.call) and not (_target_network(first) or _target_network(second))))
    return True


def _initializes(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr in ("init", "init_with_output")


def _target_network(use: Use) -> bool:
    """The use's result is bound to a target network (``target_params = net.init(key, x)``)."""
    st = use.stmt
    if not isinstance(st, ast.Assign):
        return False
    return any(isinstance(n, (ast.Name, ast.Attribute)) and "target" in (n.id if isinstance(n, ast.Name) else n.attr)
               for t in st.targets for n in ast.walk(t))


def mentions(e: ast.AST, names: Set[str]) -> bool:
    for n in ast.walk(e):
        if n.__class__ is ast.Name and n.id in names:
            return True
    return False

def encloses(outer: ast.AST, inner: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and \
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)

def carry_names(e: ast.AST, out: List[str]) -> None:
    if isinstance(e, ast.Name):
        out.append(e.id)
    elif isinstance(e, (ast.Tuple, ast.List)):
        for x in e.elts:
            carry_names(x, out)
    elif isinstance(e, ast.Dict):
        for x in e.values:
            carry_names(x, out)


def iter_name_nodes(t: ast.AST) -> Iterable[ast.Name]:
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from iter_name_nodes(e)
    elif isinstance(t, ast.Starred):
        yield from iter_name_nodes(t.value)


def contains(container: ast.AST, node: ast.AST) -> bool:
    for n in ast.walk(container):
        if n is node:
            return True
    return False


def starts_after(a: ast.AST, b: ast.AST) -> bool:
    """Does ``a`` start after ``b`` in the source?"""
    return (a.lineno, a.col_offset) > (b.lineno, b.col_offset)
