"""One record per transform (``jaxlint.analysis.knowledge.TRANSFORMS``).

Every row states every fact, every other transform table is derived from the
records, and teaching jaxlint a transform is one row: a fake ``mylib.my_jit``
added to ``TRANSFORMS`` is picked up by the purity, jit and PRNG families.
"""
from __future__ import annotations

import dataclasses
import textwrap
import typing

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.analysis import knowledge as K
from jaxlint.engine import lint_source
from jaxlint.checkers import Settings


def _fields():
    return dataclasses.fields(K.Transform)


def test_the_record_has_no_defaults():
    """A row that leaves a fact out cannot be built."""
    missing = [f.name for f in _fields()
               if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
    assert missing == []
    some = K.TRANSFORMS["jax.jit"]
    kw = {f.name: getattr(some, f.name) for f in _fields()}
    for name in kw:
        partial = {k: v for k, v in kw.items() if k != name}
        with pytest.raises(TypeError):
            K.Transform(**partial)


@pytest.mark.parametrize("name", sorted(K.TRANSFORMS))
def test_every_row_states_every_fact(name):
    """Each fact has a value of its declared type: flags are real bools, positions
    and keywords tuples, messages non-empty, and the row's key is its name."""
    t = K.TRANSFORMS[name]
    assert t.name == name
    hints = typing.get_type_hints(K.Transform)
    for f in _fields():
        v = getattr(t, f.name)
        hint = hints[f.name]
        if hint is bool:
            assert v is True or v is False, (name, f.name, v)
        elif hint is str:
            assert isinstance(v, str) and v, (name, f.name, v)
        elif typing.get_origin(hint) is tuple:
            assert isinstance(v, tuple), (name, f.name, v)
        else:   # Optional[...]: None or the inner type
            inner = [a for a in typing.get_args(hint) if a is not type(None)][0]
            assert v is None or isinstance(v, typing.get_origin(inner) or inner), (name, f.name, v)
    assert t.kind in ("jit", "grad", "vmap", "pmap", "trace", "filter", "body")
    assert t.fun_positions or t.fun_keywords
    assert (t.kind == "body") == (t.verb == "traced as the body of")
    assert t.loop in (None, "first", "all", "none")
    if t.kind != "body":
        # a transform that calls the function at once (``jax.eval_shape(f, *args)``)
        # states where the operands start; nothing else of a body applies
        assert (t.body_arity, t.carry_init, t.loop) == (None, None, None)
        assert t.operands_from in (None, 1)


def test_flag_columns_are_checked():
    with pytest.raises(ValueError):
        K._flags("JC....PSH.")        # a column missing
    with pytest.raises(ValueError):
        K._flags("JX....PSH...")       # a letter in the wrong column
    assert K._flags("JC....PSH...")["static_checked"] is True


def test_derived_tables_follow_the_records():
    assert set(K.JIT_NAMES) == {"jax.jit", "flax.nnx.jit", "equinox.filter_jit"}
    assert "jax.grad" in K.GRAD_NAMES and "jax.vmap" not in K.GRAD_NAMES
    assert set(K.EAGER_TRANSFORMS) == {"jax.jvp", "jax.vjp", "jax.linearize", "jax.custom_jvp", "jax.custom_vjp"}
    assert set(K.INSPECTING_TRANSFORMS) == {"jax.eval_shape", "jax.make_jaxpr"}
    assert set(K.VALUES_AS_GIVEN) == {"jax.custom_jvp", "jax.custom_vjp"}
    assert set(K.CACHING_FILTERS) == {"equinox.filter_jit", "equinox.filter_pmap"}
    assert set(K.STATIC_CHECKED) == {"jax.jit", "flax.nnx.jit", "jax.pmap"}
    assert {"jax.jit", "jax.vmap", "jax.lax.scan", "flax.nnx.jit"} <= set(K.INSTRUMENTED)
    assert not {"jax.custom_vjp", "jax.eval_shape", "flax.linen.jit", "jax.shard_map"} & set(K.INSTRUMENTED)
    assert K.BODY_ARITY["jax.lax.scan"] == 2 and K.BODY_ARITY["jax.lax.cond"] is None
    assert "jax.jit" not in K.BODY_ARITY
    assert K.CARRY_INIT["jax.lax.fori_loop"] == (1, 3)
    assert K.LOOP_BODIES["jax.lax.while_loop"] == (1, "body_fun", 0, "all")
    assert K.LOOP_BODIES["jax.lax.map"] == (0, "f", None, None)
    assert "jax.lax.cond" not in K.LOOP_BODIES
    assert "functools.partial" in K.PRNG_WRAPPERS
    assert K.JIT_NAMES | {"jax.pmap"} == {"jax.jit", "flax.nnx.jit", "equinox.filter_jit", "jax.pmap"}
    assert set(K.REPLICATING) == {"jax.pmap", "flax.nnx.pmap", "equinox.filter_pmap"}
    assert set(K.MESH_BINDERS) == {"jax.shard_map"}
    assert K.AXIS_BINDERS["jax.vmap"] == ("axis_name", 3) and "jax.jit" not in K.AXIS_BINDERS
    assert K.GRAD_MAKERS["jax.value_and_grad"] == (1, 1) and "jax.jacrev" not in K.GRAD_MAKERS
    assert K.TRANSFORMS["jax.lax.scan"].describe() == "traced as the body of `lax.scan`"
    assert K.TRANSFORMS["flax.nnx.jit"].describe() == "jitted with `nnx.jit`"


# ---------------------------------------------------------------- one row
MY_JIT = K._T("mylib.my_jit", "jit", "JC....PS....", "jitted with", "mylib.my_jit",
              K._FUN, K._JIT_STATIC, K._NO_BODY, None, None)


@pytest.fixture
def with_my_jit(monkeypatch):
    """``TRANSFORMS`` plus one row; every derived table reads it live."""
    monkeypatch.setattr(K, "TRANSFORMS", {**K.TRANSFORMS, MY_JIT.name: MY_JIT})


def _codes(src: str, strict: bool = False):
    src = textwrap.dedent(src)
    return sorted((f.code, f.line) for f in lint_source(SourceFile("t.py", src), settings=Settings(strict=strict)))


PURITY = """
    import jax.numpy as jnp
    import mylib


    @mylib.my_jit
    def step(x):
        print("x is", x)
        return jnp.sin(x)
"""

JIT = """
    import jax.numpy as jnp
    import mylib


    def loss(w, x):
        return jnp.mean((x @ w) ** 2)


    def evaluate(w, batches):
        total = 0.0
        for x in batches:
            f = mylib.my_jit(lambda x: loss(w, x))
            total += f(w, x)
        return total
"""

PRNG = """
    import jax
    import mylib


    @mylib.my_jit
    def noisy(key, x):
        a = jax.random.normal(key, x.shape)
        b = jax.random.uniform(key, x.shape)
        return x + a + b
"""

# the PRNG analysis sees through the transform: ``f(key)`` and ``my_jit(f)(key)`` run
# one randomized function with one key (the same noise on purpose, as with ``jax.grad``)
PRNG_SEE_THROUGH = """
    import jax
    import mylib


    def loss_fn(params, key, x):
        return jax.random.normal(key, x.shape) * params + x


    def both(params, key, x):
        loss = loss_fn(params, key, x)
        fast = mylib.my_jit(loss_fn)(params, key, x)
        return loss, fast
"""


def test_one_row_teaches_the_purity_family(with_my_jit):
    codes = _codes(PURITY)
    assert ("JAX101", 8) in codes


def test_one_row_teaches_the_jit_family(with_my_jit):
    codes = _codes(JIT)
    assert ("JAX502", 13) in codes


def test_one_row_teaches_the_prng_family(with_my_jit):
    assert ("JAX401", 9) in _codes(PRNG)
    assert not [c for c in _codes(PRNG_SEE_THROUGH) if c[0] == "JAX401"]


def test_without_the_row_the_sources_are_silent():
    """The row is what makes the findings above: without it nothing is traced."""
    assert not [c for c in _codes(PURITY) if c[0] == "JAX101"]
    assert not [c for c in _codes(JIT) if c[0] == "JAX502"]
    # (``mylib.my_jit(loss_fn)`` is then an unknown callable: a consumer for the strict profile)
    assert ("JAX401", 12) in _codes(PRNG_SEE_THROUGH, strict=True)


def test_terminals_follow_the_rows(with_my_jit):
    assert "my_jit" in K.transform_terminals() and "my_jit" in K.TRANSFORM_TERMINALS
    assert "jit" in K.TRANSFORM_TERMINALS and "scan" in K.TRANSFORM_TERMINALS
    assert "jax.jit" not in K.TRANSFORM_TERMINALS
