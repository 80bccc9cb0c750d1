"""Jit placement and unrolled loops (JAX501-JAX505): settings, the lazy call index,
and that the unsafe fixes keep what the code computes."""
from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from jaxlint.analysis import SemanticModel, SourceFile
from jaxlint.checkers.jit import calls as calls_mod
from jaxlint.checkers import REGISTRY, Settings
from jaxlint.config import load_config
from jaxlint.engine import lint_source

FIX = Path(__file__).parent / "fixtures"

LOOP = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        for _ in range(10):
            x = jnp.sin(x)
        return x
""")


def _lint(text, codes, settings=None):
    return lint_source(SourceFile("t.py", text), [REGISTRY[c] for c in codes], settings=settings)


def test_unrolled_loop_threshold_setting():
    assert not _lint(LOOP, ["JAX504"])
    found = _lint(LOOP, ["JAX504"], Settings(unrolled_loop_threshold=8))
    assert [f.line for f in found] == [6]
    assert "10 copies" in found[0].message


def test_unrolled_loop_threshold_from_pyproject(tmp_path):
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text("[tool.jaxlint]\nunrolled-loop-threshold = 8\n", encoding="utf-8")
    settings = load_config(str(cfg)).settings
    assert settings.unrolled_loop_threshold == 8
    assert _lint(LOOP, ["JAX504"], settings)


def test_call_index_is_built_only_for_files_with_a_jit():
    text = "import jax.numpy as jnp\n\ndef f(x):\n    for i in range(3):\n        x = x + i\n    return x\n"
    tree = SourceFile("t.py", text).parse()
    model = SemanticModel(tree)
    assert not calls_mod.has_jit(model)
    for code in ("JAX501", "JAX502", "JAX503"):
        list(REGISTRY[code].check(_ctx(model, text)))
    assert not model.has_facts(calls_mod.CallIndex)


def _ctx(model, text):
    from jaxlint.checkers import Context
    return Context(model, SourceFile("t.py", text))


def test_call_index_finds_callers_and_loops():
    text = textwrap.dedent("""\
        import jax

        class T:
            def __init__(self, f):
                self.g = jax.jit(f)

            def run(self, xs):
                for x in xs:
                    self.g(x)

        step = jax.jit(abs)

        def main(xs):
            step(xs)
            return [step(x) for x in xs]
    """)
    model = SemanticModel(SourceFile("t.py", text).parse())
    idx = calls_mod.call_index(model)
    kinds = sorted((b.kind, b.name) for b in idx.jit_bindings)
    assert kinds == [("attr", "g"), ("name", "step")]
    by_name = {b.name: b for b in idx.jit_bindings}
    assert [c.in_loop for c in idx.calls_to(by_name["g"])] == [True]
    assert sorted(c.in_loop for c in idx.calls_to(by_name["step"])) == [False, True]


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def jnp():
    jax = pytest.importorskip("jax")
    return jax.numpy


def test_fori_fix_computes_the_same(jnp):
    import numpy as np
    import jax
    before = _load(FIX / "JAX504/fix/fori.py", "jaxlint_fori_before")
    after = _load(FIX / "JAX504/fix/fori.unsafe-fixed.py", "jaxlint_fori_after")
    s0 = jnp.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(before.integrate(s0, 1e-3, num_steps=40), after.integrate(s0, 1e-3, num_steps=40),
                               rtol=1e-5)
    x = jnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(before.accumulate(x), after.accumulate(x), rtol=1e-5, atol=1e-5)
    a = jnp.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(before.power_iteration(a, jnp.ones(2)), after.power_iteration(a, jnp.ones(2)),
                               rtol=1e-5)
    xs = jax.random.normal(jax.random.key(0), (8, 3))
    for p, q in zip(before.heavy_ball(jnp.ones(3), xs), after.heavy_ball(jnp.ones(3), xs)):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


def test_scan_fix_computes_the_same(jnp):
    import numpy as np
    import jax
    before = _load(FIX / "JAX504/fix/scan.py", "jaxlint_scan_before")
    after = _load(FIX / "JAX504/fix/scan.unsafe-fixed.py", "jaxlint_scan_after")
    w = jnp.eye(3) * 0.5
    xs = jax.random.normal(jax.random.key(1), (7, 3))
    for p, q in zip(before.rnn(w, jnp.zeros(3), xs), after.rnn(w, jnp.zeros(3), xs)):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    s0 = jnp.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(before.trajectory(s0, 1e-3, n=20), after.trajectory(s0, 1e-3, n=20), rtol=1e-4)


def test_move_jit_fix_computes_the_same(jnp):
    import numpy as np
    pytest.importorskip("optax")
    before = _load(FIX / "JAX501/fix/move_decorator.py", "jaxlint_move_before")
    after = _load(FIX / "JAX501/fix/move_decorator.unsafe-fixed.py", "jaxlint_move_after")
    params = {"w_in": jnp.ones((3, 4)) * 0.1, "w_out": jnp.ones((4, 2)) * 0.1}
    x, y = jnp.ones((5, 3)), jnp.zeros((5, 2))
    s1 = before.tx.init(params)
    s2 = after.tx.init(params)
    p1, _, l1 = before.train_step(params, s1, x, y)
    p2, _, l2 = after.train_step(params, s2, x, y)
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    np.testing.assert_allclose(p1["w_in"], p2["w_in"], rtol=1e-5)
    assert hasattr(after.train_step, "lower")          # the outer step is jitted now
    assert not hasattr(after.apply_updates, "lower")   # the inner one is not


def test_confirmation_counts_trips_with_the_rule():
    """Runtime confirmation asks JAX504's trip counter which name bounds a loop."""
    from jaxlint.confirm import plan
    from jaxlint.checkers.jit.jax504_unrolled_python_loop import trips
    text = textwrap.dedent("""\
        from functools import partial
        import jax
        import jax.numpy as jnp

        STEPS = 64

        @partial(jax.jit, static_argnames="n")
        def f(x, n=100):
            for _ in range(n):
                x = jnp.sin(x)
            for _ in range(STEPS):
                x = jnp.cos(x)
            for _ in range(2, 40):
                x = x * 2
            return x
    """)
    source = SourceFile("t.py", text)
    model = SemanticModel(source.parse(), source)
    fn = next(f for f in model.functions if f.name == "f")
    got = {line: plan._loop_info(model, line, fn).get("trip") for line in (9, 11, 13)}
    assert got == {9: {"kind": "param", "name": "n"}, 11: {"kind": "global", "name": "STEPS"},
                   13: {"kind": "literal", "value": 40}}
    assert all(plan._loop_info(model, line, fn) == trips.loop_info(model, line, fn) for line in (9, 11, 13))


def test_call_index_keeps_pmap_apart_from_jit(monkeypatch):
    import dataclasses
    from jaxlint.analysis import knowledge as K
    text = textwrap.dedent("""\
        import jax

        def epoch(state, batches):
            p_step = jax.pmap(lambda s, b: s + b, axis_name="i")
            step = jax.jit(lambda s: s)
            for b in batches:
                state = step(p_step(state, b))
            return state
    """)
    model = SemanticModel(SourceFile("t.py", text).parse())
    idx = calls_mod.call_index(model)
    assert sorted(b.name for b in idx.bindings) == ["p_step", "step"]
    assert [b.name for b in idx.jit_bindings] == ["step"]
    assert calls_mod.compiles_per_function("jax.pmap") and not calls_mod.compiles_per_function("jax.vmap")
    assert not calls_mod.compiles_per_function("jax.lax.scan")
    # derived from the Transform records: a new caching transform is one row
    monkeypatch.setitem(K.TRANSFORMS, "mylib.compile", dataclasses.replace(K.TRANSFORMS["jax.pmap"],
                                                                           name="mylib.compile"))
    assert calls_mod.compiles_per_function("mylib.compile")


def test_jit_recreated_per_epoch_message_names_the_chain():
    text = textwrap.dedent("""\
        import jax

        def log_norms(params):
            return jax.jit(lambda p: p * 2)(params)

        def report(params):
            print(log_norms(params))

        def fit(params, epochs):
            for _ in range(epochs):
                report(params)
    """)
    found = _lint(text, ["JAX502"])
    assert [f.line for f in found] == [4]
    assert "called from `report`, which is called in a loop in `fit`, line 11" in found[0].message


def test_per_call_pmap_and_jit_really_recompile(jnp):
    """What JAX502 and JAX503 claim, shown by JAX: a jit/pmap of a new lambda built per call
    traces again on every call; one built once does not; vmap(jit(f)) compiles f once."""
    import jax
    traces = []

    def eval_model(x):
        return jax.pmap(lambda a: (traces.append("pmap"), a * 2)[1])(x)

    def log_norms(x):
        return jax.jit(lambda a: (traces.append("jit"), a + 1)[1])(x)

    once = jax.jit(lambda a: (traces.append("once"), a - 1)[1])
    x = jnp.ones((jax.local_device_count(), 3))
    for _ in range(3):
        eval_model(x)
        log_norms(x)
        once(x)
    assert traces.count("pmap") == 3 and traces.count("jit") == 3 and traces.count("once") == 1

    def f(a):
        traces.append("f")
        return a * 3

    batched = jax.vmap(jax.jit(f))
    for _ in range(3):
        batched(x)
    assert traces.count("f") == 1   # the inner jit caches f; only the batching runs again
