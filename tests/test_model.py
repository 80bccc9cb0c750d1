"""The semantic model answers the questions rules ask: names, traced contexts, traced values."""
from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.analysis import CERTAIN, INFERRED, TRACED, SemanticModel, SourceFile


def build(src: str) -> SemanticModel:
    src = textwrap.dedent(src)
    return SemanticModel(ast.parse(src), SourceFile("t.py", src))


def fn(model: SemanticModel, qualname: str):
    for f in model.functions:
        if f.qualname == qualname:
            return f
    raise KeyError(qualname)


def traced(model, qualname):
    return fn(model, qualname).is_traced


def name_traced(model, qualname, name):
    f = fn(model, qualname)
    return bool(model.kinds(f).get(name, 0) & TRACED)


@pytest.mark.parametrize("imports,expr,expected", [
    ("import jax.numpy as jnp", "jnp.sum", "jax.numpy.sum"),
    ("import jax", "jax.numpy.sum", "jax.numpy.sum"),
    ("import jax.numpy", "jax.numpy.sum", "jax.numpy.sum"),
    ("from jax import jit, random as jr, lax", "jr.normal", "jax.random.normal"),
    ("from jax import jit, random as jr, lax", "jit", "jax.jit"),
    ("from jax import jit, random as jr, lax", "lax.scan", "jax.lax.scan"),
    ("from functools import partial", "partial", "functools.partial"),
    ("import flax.linen as nn", "nn.Module", "flax.linen.Module"),
    ("from flax import nnx", "nnx.jit", "flax.nnx.jit"),
    ("import equinox as eqx", "eqx.filter_jit", "equinox.filter_jit"),
    ("from jax.experimental.pjit import pjit", "pjit", "jax.jit"),
    ("from jax.experimental.shard_map import shard_map", "shard_map", "jax.shard_map"),
    ("import jax", "jax.tree_util.tree_map", "jax.tree.map"),
    ("import numpy as np", "np.random.rand", "numpy.random.rand"),
    ("", "print", "print"),
    ("", "undefined_name.attr", None),
])
def test_qualified_names(imports, expr, expected):
    m = build(imports + "\n")
    assert m.qualname(ast.parse(expr, mode="eval").body) == expected


def test_local_shadowing_parameter_is_not_the_module():
    m = build("""
        import jax.numpy as jnp
        def f(jnp):
            return jnp.sum
    """)
    ret = fn(m, "f").of_type(ast.Return)[0]
    assert m.qualname(ret.value, fn(m, "f")) is None


@pytest.mark.parametrize("src,qual", [
    ("import jax\n@jax.jit\ndef f(x): return x", "f"),
    ("import jax\ndef f(x): return x\ng = jax.jit(f)", "f"),
    ("import jax\ndef f(x): return x\ng = jax.jit(jax.grad(f))", "f"),
    ("import jax\ndef f(x): return x\ng = jax.pmap(f)", "f"),
    ("import jax\ndef f(x): return x\ng = jax.vmap(f, in_axes=(0,))", "f"),
    ("import jax\n@jax.value_and_grad\ndef f(x): return x", "f"),
    ("import jax\n@jax.checkpoint\ndef f(x): return x", "f"),
    ("import jax\n@jax.custom_jvp\ndef f(x): return x\ng = jax.jit(f)", "f"),
    ("from functools import partial\nimport jax\n@partial(jax.jit, static_argnums=(1,))\ndef f(x, n): return x", "f"),
    ("import functools, jax\n@functools.partial(jax.jit, static_argnames='n')\ndef f(x, n): return x", "f"),
    ("import jax\ndef f(c, x): return c, x\ndef g(xs): return jax.lax.scan(f, 0, xs)", "f"),
    ("from jax import lax\ndef body(i, c): return c\ndef g(): return lax.fori_loop(0, 10, body, 0)", "body"),
    ("from jax import lax\ndef cond(c): return c < 3\ndef g(): return lax.while_loop(cond, lambda c: c, 0)", "cond"),
    ("from jax import lax\ndef a(x): return x\ndef b(x): return -x\ndef g(p, x): return lax.cond(p, a, b, x)", "b"),
    ("from jax import lax\ndef a(x): return x\ndef g(i, x): return lax.switch(i, [a, a], x)", "a"),
    ("from jax import lax\ndef a(x): return x\ndef g(xs): return lax.map(a, xs)", "a"),
    ("import equinox as eqx\n@eqx.filter_jit\ndef f(x): return x", "f"),
    ("from flax import nnx\n@nnx.jit\ndef f(m, x): return m(x)", "f"),
    ("from jax.experimental.shard_map import shard_map\ndef f(x): return x\ng = shard_map(f, mesh=None, in_specs=None, out_specs=None)", "f"),
    ("import jax\nclass T:\n  def __init__(self):\n    self.g = jax.jit(self._loss)\n  def _loss(self, p): return p", "T._loss"),
])
def test_traced_contexts(src, qual):
    m = build(src)
    f = fn(m, qual)
    assert f.is_traced and f.confidence == CERTAIN


@pytest.mark.parametrize("caller", ["", "y = jax.grad(f)(1.0)", "g = jax.jit(f)"])
def test_custom_functions_are_traced_only_by_their_callers(caller):
    """custom_jvp/custom_vjp add no tracer of their own: undecorated use, or an eager grad
    (JAX hands the function and its rules the primal values), leaves them untraced; a jit of
    it traces it."""
    m = build("import jax\n@jax.custom_jvp\ndef f(x): return x\n" + caller)
    assert fn(m, "f").is_traced == ("jit" in caller)


def test_lambda_passed_to_jit_is_traced():
    m = build("import jax\nf = jax.jit(lambda x: x + 1)")
    lam = [f for f in m.functions if f.is_lambda][0]
    assert lam.is_traced and lam.traced_params == {"x"}


def test_static_argnums_and_argnames_and_partial_bound_args():
    m = build("""
        import functools
        from functools import partial
        import jax

        @partial(jax.jit, static_argnums=(1,), static_argnames=("mode",))
        def f(x, n, mode="a", y=None):
            return x

        def g(x, training):
            return x

        train = jax.jit(functools.partial(g, training=True))
    """)
    f = fn(m, "f")
    assert f.traced_params == {"x", "y"} and {"n", "mode"} <= f.static_params
    g = fn(m, "g")
    assert g.traced_params == {"x"} and "training" in g.static_params


def test_helpers_are_inferred_and_params_follow_call_sites():
    m = build("""
        import jax

        def helper(x, flag):
            return x

        def deeper(v):
            return v

        def middle(a):
            return deeper(a)

        @jax.jit
        def step(x):
            middle(x)
            return helper(x, True)

        def eager(x):
            return helper(x, False)
    """)
    h = fn(m, "helper")
    assert h.is_traced and h.confidence == INFERRED
    assert h.traced_params == {"x"}          # `flag` only ever receives a literal
    assert fn(m, "deeper").is_traced and fn(m, "deeper").traced_params == {"v"}
    assert not fn(m, "eager").is_traced


def test_flax_linen_module_methods():
    m = build("""
        import flax.linen as nn

        class Block(nn.Module):
            features: int

            def setup(self):
                self.dense = nn.Dense(self.features)
                self.scale = self.param("scale", nn.initializers.ones, (1,))

            def __call__(self, x, train: bool = False):
                y = self.dense(x) * self.scale
                return self.helper(y)

            def helper(self, y):
                return y

            def not_called(self, z):
                return z
    """)
    call = fn(m, "Block.__call__")
    assert call.is_traced and call.confidence == INFERRED
    assert call.traced_params == {"x"} and "train" in call.static_params
    assert fn(m, "Block.helper").is_traced
    assert not fn(m, "Block.not_called").is_traced
    f = fn(m, "Block.__call__")
    y_assign = f.of_type(ast.Assign)[0]
    assert m.kind(y_assign.value, f) & TRACED
    field = ast.parse("self.features", mode="eval").body
    assert not m.kind(field, f) & TRACED


def test_static_values_inside_traced_code():
    m = build("""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def f(x, y):
            n = x.shape[0]
            d = x.ndim
            k = len(x)
            same = x is None
            inst = isinstance(x, jax.Array)
            s = jnp.sum(x)
            z = x + 1
            for i in range(3):
                w = x[i]
            for row in x:
                r = row
            return n
    """)
    for name in ("n", "d", "k", "same", "inst", "i"):
        assert not name_traced(m, "f", name), name
    for name in ("s", "z", "w", "row", "r"):
        assert name_traced(m, "f", name), name


def test_nested_function_sees_traced_closure():
    m = build("""
        import jax

        @jax.jit
        def step(params, x):
            def loss_fn(p):
                return p * x
            return jax.grad(loss_fn)(params)
    """)
    loss = fn(m, "step.loss_fn")
    assert loss.is_traced
    ret = loss.of_type(ast.Return)[0]
    assert m.kind(ret.value, loss) & TRACED


def test_files_without_jax_skip_the_analysis():
    m = build("def f(x):\n    print(x)\n")
    assert not m.mentions_jax and not any(f.is_traced for f in m.functions)


def test_transform_sites_record_where_and_what():
    m = build("""
        import jax
        def f(x): return x
        step = jax.jit(f)
    """)
    (site,) = m.transform_sites
    assert site.transform.name == "jax.jit" and site.target.function.qualname == "f"
    assert site.scope.is_module and not site.is_decorator


def test_models_are_freed_after_linting(monkeypatch):
    """Topic analyses cache on model.cache; nothing may keep a model alive after
    its file is linted (a module-level WeakKeyDictionary whose values reference
    the model did, and made every later file slower)."""
    import gc
    import weakref

    from jaxlint.analysis import model as model_mod
    from jaxlint.checkers import all_rules
    from jaxlint.engine import lint_source

    refs = []
    real_init = model_mod.SemanticModel.__init__

    def spy(self, *a, **k):
        real_init(self, *a, **k)
        refs.append(weakref.ref(self))

    monkeypatch.setattr(model_mod.SemanticModel, "__init__", spy)
    src = textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        history = []

        @jax.jit
        def step(x, key):
            a = jax.random.normal(key, x.shape)
            b = jax.random.normal(key, x.shape)
            history.append(a)
            return x + a + b

        def train(x):
            f = jax.jit(lambda v: v * 2)
            for i in range(3):
                x = f(x)
            return x
    """)
    for _ in range(3):
        lint_source(SourceFile("t.py", src), all_rules())
    gc.collect()
    assert refs and all(r() is None for r in refs)


def test_self_attribute_defined_from_itself_does_not_recurse():
    m = build("""
        import jax.numpy as jnp

        class Tracker:
            def __init__(self, n):
                self.counts = {}
                self.counts = dict(self.counts)
                self.buf = jnp.zeros(n)
                self.buf = self.buf + self.buf.sum()

            def push(self, i, v):
                self.buf[i] = v
                return self.counts
    """)
    push = fn(m, "Tracker.push")
    target = push.of_type(ast.Assign)[0].targets[0]
    assert m.is_array(target.value, push)


# ------------------------------------------------------------------ bindings
def test_resolve_scope_walks_outward_and_honours_global_and_nonlocal():
    m = build("""
        import jax
        counter = 0
        scale = 2.0

        def outer(x):
            y = x * scale
            def inner():
                nonlocal y
                global counter
                y = y + 1
                counter += 1
                return len(y)
            return inner
    """)
    outer, inner = fn(m, "outer"), fn(m, "outer.inner")
    assert m.resolve_scope("y", inner) is outer          # nonlocal: the binding lives in outer
    assert m.resolve_scope("counter", inner) is m.module  # global
    assert m.resolve_scope("scale", inner) is m.module
    assert m.resolve_scope("x", inner) is outer
    assert m.resolve_scope("len", inner) is None         # a builtin: bound nowhere in the module
    assert m.resolve_scope("jax", inner) is m.module     # an import binds too


def test_bindings_of_a_name_say_how_and_what():
    m = build("""
        import jax.numpy as jnp

        def f(a, key):
            b, (c, *d) = a, (1, 2, 3)
            q, r = jnp.linalg.qr(a)
            a += 1
            for i in range(3):
                pass
            with open("x") as fh:
                pass
            if (n := len(a)) > 2:
                pass
            def g():
                return a
            return b, c, d, q, r, i, fh, n, g
    """)
    f = fn(m, "f")
    kinds = [b.kind for b in m.bindings("a", f)]
    assert kinds == ["param", "aug"]
    (b,) = m.bindings("b", f)
    assert b.kind == "=" and b.path == (0,) and ast.unparse(b.element) == "a"
    (c,) = m.bindings("c", f)
    assert c.path == (1, 0) and ast.unparse(c.element) == "1"
    (d,) = m.bindings("d", f)
    assert d.path == (1, 1)       # a starred target: its element index
    (q,) = m.bindings("q", f)
    assert q.element is None and ast.unparse(q.value) == "jnp.linalg.qr(a)"   # unpacked from a call
    assert [x.kind for x in m.bindings("i", f)] == ["for"]
    assert [x.kind for x in m.bindings("fh", f)] == ["with"]
    assert [x.kind for x in m.bindings("n", f)] == ["="]
    assert [x.kind for x in m.bindings("g", f)] == ["def"]
    assert [x.kind for x in m.bindings("jnp", m.module)] == ["import"]
    g = fn(m, "f.g")
    assert m.bindings("a", g) == []                       # this scope only
    assert [x.kind for x in m.lookup("a", g)] == ["param", "aug"]   # where `a` resolves from g
    assert m.lookup("len", g) == []


def test_aliases_are_names_bound_once_to_a_callable():
    m = build("""
        import jax

        def loss(w, x):
            return (w * x).sum()

        step = jax.jit(loss)
        other = jax.jit(loss)
        other = jax.vmap(loss)
    """)
    aliases = m.binding_table(m.module).aliases()
    assert "step" in aliases and "other" not in aliases
    assert m._alias("step", m.module) is aliases["step"]


# ------------------------------------------------------------------ facts
def test_facts_are_built_once_per_model():
    built = []

    class Counting:
        def __init__(self, model):
            built.append(model)

    m = build("import jax\n")
    assert not m.has_facts(Counting)
    first = m.facts(Counting)
    assert m.facts(Counting) is first and built == [m] and m.has_facts(Counting)
    other = build("import jax\n")
    assert other.facts(Counting) is not first and len(built) == 2


# ------------------------------------------------------------------ tracedness
def test_code_under_a_trace_versus_traced_functions():
    m = build("""
        import jax

        @jax.jit
        def step(x):
            def helper(v):
                return v + 1
            n = x.shape[0]
            return helper(x) * n

        def eager(x):
            return x + 1
    """)
    step, helper, eager = fn(m, "step"), fn(m, "step.helper"), fn(m, "eager")
    assert step.is_traced and step.under_trace
    assert helper.under_trace
    assert not eager.is_traced and not eager.under_trace
    ret = step.of_type(ast.Return)[0].value
    assert m.is_traced(ret, step) and m.truth_traced(ret, step)
    n = ret.right
    assert not m.is_traced(n, step)                     # a static shape
    x_in_eager = eager.of_type(ast.Return)[0].value
    assert not m.is_traced(x_in_eager, eager)


def test_single_value_is_the_one_plain_assignment():
    m = build("""
        import jax
        n_steps = 10
        lr: float = 0.1
        total = 0
        total += 1

        def f(x, k):
            a, b = x
            for i in range(n_steps):
                pass
            if (w := x) is not None:
                pass
            return a, b, i, w, lr, k
    """)
    f = fn(m, "f")
    assert ast.unparse(m.single_value("n_steps", f)) == "10"    # resolves to the module
    assert ast.unparse(m.single_value("lr", f)) == "0.1"
    for name in ("total", "a", "i", "w", "k", "jax", "f", "len", "undefined"):
        assert m.single_value(name, f) is None, name


def test_surely_array_needs_evidence_beyond_the_traced_bit():
    m = build("""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x, layers, w: jax.Array, seq):
            h = x @ w
            parts = jnp.split(h, 2)
            z = jnp.tanh(h)
            z += 1
            for layer in layers:
                h = layer(h)
            return h, parts, z, layers, w, seq
    """)
    step = fn(m, "step")
    names = {n.id: n for n in step.of_type(ast.Return)[0].value.elts}
    assert m.is_traced(names["layers"], step)            # traced, but maybe a pytree
    assert not m.surely_array(names["layers"], step)
    assert not m.surely_array(names["seq"], step)       # no evidence either way
    assert m.surely_array(names["w"], step)             # annotated
    assert m.surely_array(names["z"], step)             # a jnp call, then updated
    assert not m.surely_array(names["parts"], step)     # split returns several arrays
    x = step.of_type(ast.Assign)[0].value.left
    assert m.surely_array(x, step)                      # an arithmetic operand


def _fn(m, name):
    return next(f for f in m.functions if f.name == name and not f.is_lambda)


def test_module_method_flags_used_as_python_values_are_static():
    m = build("""
        import flax.linen as nn
        class Block(nn.Module):
            width: int
            seq: int | None = None

            @nn.compact
            def __call__(self, x, train, decode, seq=None, offset=0, mask=None):
                if decode:
                    x = x + 1
                seq = seq or self.seq
                y = nn.Dropout(0.1)(x, deterministic=not train)
                if mask:
                    y = y * mask
                return y[offset:] - offset
    """)
    fn = _fn(m, "__call__")
    assert {"train", "decode", "seq", "offset"} <= fn.static_params
    assert fn.traced_params == {"x", "mask"}


def test_comprehension_variable_is_its_own():
    m = build("""
        import jax, jax.numpy as jnp, numpy as np
        @jax.jit
        def f(r):
            t = [np.arange(k) for k in range(3)]
            k = jnp.arange(3.0) * r
            return k
    """)
    fn = _fn(m, "f")
    comp = next(n for n in fn.of_type(ast.ListComp))
    k_load = comp.elt.args[0]
    assert m.kind(k_load, fn) == 0
    assert m.kinds(fn)["k"] & TRACED


def test_optional_and_aliased_container_annotations():
    m = build("""
        from typing import Optional, Tuple
        import jax
        Cache = dict[str, jax.Array]
        @jax.jit
        def f(x, cache: Cache | None, lim: Tuple[jax.Array, jax.Array], o: Optional[list], a: Optional[jax.Array]):
            return x
    """)
    f = _fn(m, "f")
    names = {p: ast.Name(id=p, ctx=ast.Load()) for p in ("cache", "lim", "o", "a")}
    assert not m.truth_traced(names["cache"], f)
    assert not m.truth_traced(names["lim"], f)
    assert not m.truth_traced(names["o"], f)
    assert m.truth_traced(names["a"], f)


def test_grad_alone_runs_operations_on_constants_eagerly():
    m = build("""
        import jax, jax.numpy as jnp
        def outer(v):
            sizes = jnp.array([2, 3])
            def loss(w):
                return jnp.sum(w[: jnp.sum(sizes)])
            def staged(w):
                return jnp.sum(w[: jnp.sum(sizes)])
            return jax.grad(loss)(v), jax.jit(staged)(v)
    """)
    for name, traced in (("loss", False), ("staged", True)):
        fn = _fn(m, name)
        bound = next(n for n in fn.of_type(ast.Subscript)).slice.upper
        assert bool(m.kind(bound, fn) & TRACED) is traced


def test_code_behind_a_none_guard_that_the_trace_never_takes():
    m = build("""
        import functools
        from jax import lax
        def make(state=None):
            def body(x, cap=None):
                if state is None:
                    x = int(x)
                if cap is None:
                    cap = int(x.sum())
                return x[:cap]
            current = state
            if current is None:
                return body(0)
            return lax.cond(True, functools.partial(body, cap=current.cap), lambda x: x, 1.0)
    """)
    body = _fn(m, "body")
    ints = [c for c in body.of_type(ast.Call) if isinstance(c.func, ast.Name) and c.func.id == "int"]
    assert len(ints) == 2 and all(m.off_trace(c, body) for c in ints)
    ret = next(iter(body.of_type(ast.Return)))
    assert not m.off_trace(ret, body)


def test_string_comparisons_and_psum_of_a_constant_are_python_values():
    m = build("""
        import jax
        from jax import lax
        MODE = "train"
        @jax.jit
        def f(x, mode):
            a = mode == "eval"
            b = mode != MODE
            n = lax.psum(1, "i")
            c = x == 1
            return a, b, n, c
    """)
    fn = _fn(m, "f")
    k = m.kinds(fn)
    assert not (k.get("a", 0) | k.get("b", 0) | k.get("n", 0)) & TRACED
    assert k["c"] & TRACED


def test_structure_items_of_split_and_flatten_are_static():
    m = build("""
        import jax
        from flax import nnx

        @jax.jit
        def f(model, x):
            graphdef, state = nnx.split(model)
            leaves, treedef = jax.tree.flatten(x)
            return state, leaves
    """)
    assert not name_traced(m, "f", "graphdef")
    assert not name_traced(m, "f", "treedef")
    assert name_traced(m, "f", "state")
    assert name_traced(m, "f", "leaves")


def test_custom_vjp_residual_python_values_stay_static():
    m = build("""
        import jax

        @jax.custom_vjp
        def f(x):
            return x * 2

        def f_fwd(x):
            res = (x, x.shape[0], x.shape)
            return x * 2, res

        def f_bwd(res, g):
            x, n, shape = res
            return (g * n,)

        f.defvjp(f_fwd, f_bwd)

        @jax.jit
        def loss_grad(x):
            return jax.grad(lambda x: f(x).sum())(x)
    """)
    assert name_traced(m, "f_bwd", "x")
    assert not name_traced(m, "f_bwd", "n")
    assert not name_traced(m, "f_bwd", "shape")


def test_double_star_fills_only_unnamed_parameters():
    m = build("""
        import jax

        def helper(y, start, stop, **extra):
            return y

        @jax.jit
        def f(y, scale):
            kw = {"scale": scale}
            return helper(y, start=0, stop=3, **kw)
    """)
    h = fn(m, "helper")
    assert "start" not in h.traced_params and "stop" not in h.traced_params
    assert "extra" in h.traced_params


def test_class_body_binds_class_attributes_not_module_names():
    """A method named like a module-level name does not rebind it: `predict = jax.jit(...)` at
    module level keeps its one value although `Trainer.predict` exists."""
    from jaxlint.analysis import SourceFile as _SF
    from jaxlint.analysis.model import SemanticModel as _SM
    text = ("import jax\n\n"
            "def apply(p, x):\n    return x\n\n"
            "predict = jax.jit(apply)\n\n"
            "class Trainer:\n"
            "    scale = 2\n"
            "    def predict(self, params, x):\n"
            "        return x\n\n"
            "scale = 3\n")
    src = _SF("m.py", text)
    m = _SM(src.parse(), src)
    assert [b.node.lineno for b in m.bindings("predict", m.module)] == [6]
    assert [b.node.lineno for b in m.bindings("scale", m.module)] == [13]
    assert m.single_value("predict", m.module) is not None
