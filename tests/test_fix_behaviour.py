"""Safe fixes keep working code working: run the code before and after with JAX."""
from __future__ import annotations

import textwrap
import types

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jaxlint.analysis import SourceFile  # noqa: E402
from jaxlint.checkers import REGISTRY, all_rules  # noqa: E402
from jaxlint.engine import lint_source  # noqa: E402
from jaxlint.fixes.applier import fix_text  # noqa: E402


def fixed(src: str, codes=None) -> str:
    src = textwrap.dedent(src)
    rules = [REGISTRY[c] for c in codes] if codes else all_rules()
    report = fix_text(SourceFile("m.py", src), lambda s: lint_source(s, rules))
    assert report.total > 0, "expected a fix"
    return report.text


def load(src: str, name: str = "m") -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(src, f"{name}.py", "exec"), mod.__dict__)
    return mod


PRINTS = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        loss = jnp.sum(x ** 2)
        print("loss %.2f" % loss)
        print(f"loss {loss:.2f} max={jnp.max(x)}")
        return loss * 2
"""


def test_debug_print_prints_on_every_call(capfd):
    before = load(textwrap.dedent(PRINTS), "before")
    after = load(fixed(PRINTS, ["JAX101"]), "after")
    xs = [jnp.arange(3.0) + i for i in range(3)]
    try:
        for x in xs:
            before.step(x)
    except (jax.errors.ConcretizationTypeError, TypeError):
        pass   # formatting a tracer with %.2f fails outright
    out_before = capfd.readouterr().out
    # the original never shows a value: it prints at most once, at trace time
    assert out_before.count("loss") <= 2 and "5.00" not in out_before

    results = [after.step(x) for x in xs]
    jax.effects_barrier()
    out_after = capfd.readouterr().out.splitlines()
    expected = []
    for x in xs:
        loss = float(np.sum(np.asarray(x) ** 2))
        expected.append("loss %.2f" % loss)
        expected.append(f"loss {loss:.2f} max={float(np.max(np.asarray(x)))}")
    assert out_after == expected
    for r, x in zip(results, xs):
        assert float(r) == pytest.approx(2 * float(np.sum(np.asarray(x) ** 2)))


UPDATES = """
    import jax
    import jax.numpy as jnp

    def build(v):
        x = jnp.zeros((4, 4))
        x[0, 1] = v
        x[1:3] += 2.0
        x[:, 0] *= 3.0
        x[3] -= 1.0
        x[2, 2] /= 4.0
        x[0, 0] **= 2
        return x

    @jax.jit
    def build_jit(v):
        y = jnp.ones(5)
        y[2] = v
        return y

    class Buffer:
        def __init__(self):
            self.data = jnp.zeros(3)

        def push(self, i, v):
            self.data[i] = v
            return self.data
"""


def test_functional_updates_compute_what_the_mutation_meant():
    before = load(textwrap.dedent(UPDATES), "before_updates")
    with pytest.raises(TypeError):
        before.build(5.0)
    after = load(fixed(UPDATES, ["JAX301"]), "after_updates")
    ref = np.zeros((4, 4))
    ref[0, 1] = 5.0
    ref[1:3] += 2.0
    ref[:, 0] *= 3.0
    ref[3] -= 1.0
    ref[2, 2] /= 4.0
    ref[0, 0] **= 2
    np.testing.assert_allclose(np.asarray(after.build(5.0)), ref)
    np.testing.assert_allclose(np.asarray(after.build_jit(7.0)), [1, 1, 7, 1, 1])
    np.testing.assert_allclose(np.asarray(after.Buffer().push(1, 2.0)), [0, 2, 0])




HOIST = """
    import jax
    import jax.numpy as jnp


    def evaluate(w, batches):
        total = 0.0
        for x in batches:
            f = jax.jit(lambda v: jnp.tanh(v @ w) * 3.0)
            total = total + f(x).sum()
        return total
"""


def test_hoisted_jit_computes_the_same_and_compiles_once():
    src = textwrap.dedent(HOIST)
    after_src = fixed(src, ["JAX502"])
    assert after_src.index("jax.jit(") < after_src.index("for x in batches")
    before, after = load(src, "before_hoist"), load(after_src, "after_hoist")
    compiles = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        w = jnp.ones((3, 2))
        batches = [jnp.full((4, 3), float(i)) for i in range(4)]
        compiles.clear()
        r_before = before.evaluate(w, batches)
        n_before = len(compiles)
        compiles.clear()
        r_after = after.evaluate(w, batches)
        n_after = len(compiles)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert float(r_after) == pytest.approx(float(r_before))
    assert n_before >= len(batches)      # a new program per iteration before the fix
    assert n_after < n_before and n_after <= 2
