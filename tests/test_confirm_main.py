"""Confirmation through the module's `__main__` block (issues 19 and 22): code only a script's
`if __name__ == "__main__":` block drives is run as `python FILE` runs it, with the harness
probes, and judged by what the program itself did.

Each ``# main: TAG`` line of ``confirm_fixtures/cf_main_*.py`` gets a finding built here (the
rule's code and a message of the shape the real rule writes) and must come out as stated."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import Finding
from jaxlint.confirm import ConfirmOptions, confirm_results
from jaxlint.confirm.mainrun import has_main_block
from jaxlint.confirm.specs import ConfirmConfig
from jaxlint.engine import FileResult

FX = Path(__file__).resolve().parent / "confirm_fixtures"
TAG = re.compile(r"#\s*main:\s*([\w-]+)")

RECOMPILE = ("JAX505", "`t` changes on every iteration of the loop but is static argument `temperature` of "
                       "`soften`: JAX compiles a new program for every new value (one per distinct value)")
UNHASHABLE = ("JAX505", "`Settings()` is an instance of `Settings`, a `@dataclass` that is not frozen (its "
                        "`__hash__` is None) passed to static argument `settings` of `scaled`: static arguments "
                        "must be hashable (JAX raises `ValueError`)")
SAME_KEY = ("JAX613", "dropout key `key` is the same on every iteration of this `for` loop; `nn.Dropout` of "
                      "`Net` applies the same mask every step")
DISCARDED = ("JAX614", "the updated `batch_stats` returned by `model.apply(..., mutable=['batch_stats'])` are "
                       "discarded: BatchNorm's running statistics never change")
FINDINGS = {
    "cf_main_static.py": {"recompiles": [RECOMPILE], "fixed-static": [RECOMPILE], "shapes-change": [RECOMPILE],
                          "unhashable": [UNHASHABLE]},
    "cf_main_flax.py": {"stale": [SAME_KEY, DISCARDED], "fresh": [SAME_KEY, DISCARDED]},
    "cf_main_loop.py": {"forever": [RECOMPILE]},
}


@pytest.fixture(scope="module")
def verdicts():
    results, made = [], {}
    for name, tags in FINDINGS.items():
        path = FX / name
        src = SourceFile.from_path(str(path))
        fs = []
        for i, text in enumerate(src.text.splitlines(), 1):
            m = TAG.search(text)
            if m and m.group(1) in tags:
                for code, msg in tags[m.group(1)]:
                    f = Finding(code, "t", str(path), i, 0, i, 1, msg)
                    made[(name, m.group(1), code)] = f
                    fs.append(f)
        results.append(FileResult(str(path), fs, source=src))
    confirm_results(results, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=40, device="cpu"))
    return {k: f.confirmation for k, f in made.items()}


def _text(c):
    return c.get("evidence") or c.get("reason")


def test_the_main_guard_is_recognised():
    assert has_main_block('import x\n\nif __name__ == "__main__":\n    main()\n')
    assert has_main_block("if '__main__' == __name__:\n    main()\n")
    assert not has_main_block("def main():\n    if __name__ == '__main__':\n        pass\n")
    assert not has_main_block("x = 1\n")


def test_a_static_value_that_changes_every_call_is_shown_by_the_traces_the_run_made(verdicts):
    c = verdicts[("cf_main_static.py", "recompiles", "JAX505")]
    assert c["status"] == "confirmed", c
    assert "`__main__` block traced and compiled `soften` 4 times" in c["evidence"]
    assert "same traced shapes" in c["evidence"]


def test_a_static_value_that_stays_the_same_is_not_confirmed(verdicts):
    c = verdicts[("cf_main_static.py", "fixed-static", "JAX505")]
    assert c["status"] == "unreached", c


def test_recompiles_that_new_shapes_explain_are_no_evidence_for_the_static_value(verdicts):
    c = verdicts[("cf_main_static.py", "shapes-change", "JAX505")]
    assert c["status"] == "unreached", c
    assert "differ only in static values" in _text(c)


def test_the_error_that_ends_the_main_block_confirms_its_finding(verdicts):
    c = verdicts[("cf_main_static.py", "unhashable", "JAX505")]
    assert c["status"] == "confirmed", c
    assert "running the module's `__main__` block raised ValueError" in c["evidence"]


def test_the_same_dropout_key_at_a_call_in_the_main_block(verdicts):
    c = verdicts[("cf_main_flax.py", "stale", "JAX613")]
    assert c["status"] == "confirmed", c
    assert "drew the same 'dropout' key 3 times" in c["evidence"]
    c = verdicts[("cf_main_flax.py", "fresh", "JAX613")]
    assert c["status"] == "not-confirmed", c
    assert "different key from one call to the next" in c["evidence"]


def test_statistics_thrown_away_in_the_main_block(verdicts):
    c = verdicts[("cf_main_flax.py", "stale", "JAX614")]
    assert c["status"] == "confirmed", c
    assert "every call was given the very same `batch_stats`" in c["evidence"]
    c = verdicts[("cf_main_flax.py", "fresh", "JAX614")]
    assert c["status"] == "not-confirmed", c
    assert "changed between calls" in c["evidence"]


def test_a_main_block_that_never_ends_is_stopped_and_what_it_did_counts(verdicts):
    c = verdicts[("cf_main_loop.py", "forever", "JAX505")]
    assert c["status"] == "confirmed", c
    assert "different static values" in c["evidence"]


STEPS = '''import jax
import jax.numpy as jnp


class Trainer:
    def __init__(self, w):
        self.w = w
        self.update = jax.jit(lambda w, g: w - 0.1 * g)
        self.w = self.update(self.w, jnp.zeros_like(w))

    def evaluate(self, x):
        return self.update(self.w, x)

    def step(self, x):
        g = jax.grad(lambda w: jnp.sum((x @ w) ** 2))(self.w)
        self.w = self.update(self.w, g)
'''


def test_jax501_counts_the_compilations_of_the_step_the_finding_names(tmp_path):
    from jaxlint.confirm.plan import plan_file
    path = tmp_path / "steps.py"
    path.write_text(STEPS)
    src = SourceFile.from_path(str(path))
    msg = ("`jax.jit` covers only the parameter update, but its caller `Trainer.step` is not jitted and runs "
           "differentiation eagerly every step; jit the whole step instead")
    job, _ = plan_file(src, [Finding("JAX501", "t", str(path), 8, 0, 8, 1, msg)], ConfirmConfig(root=str(tmp_path)), 0)
    assert job["targets"][0]["extra"]["steps"] == ["Trainer.step"]


CTOR = '''import jax


class Sampler:
    def __init__(self, seed, label, shape, twice=False):
        self.label = label
        self.shape = shape
        self.twice = twice
        self.key = jax.random.key(seed)

    def draw(self, n: int):
        a = jax.random.normal(self.key, self.shape)
        if self.twice:
            b = jax.random.normal(self.key, self.shape)
            return a + b
        return a


def build():
    return Sampler(0, "replay", (2, 3), twice=True)
'''


def test_a_class_is_constructed_with_the_arguments_its_module_gives_it(tmp_path):
    path = tmp_path / "sampler.py"
    path.write_text(CTOR)
    src = SourceFile.from_path(str(path))
    msg = ("PRNG key `self.key` is reused: already consumed by `jax.random.normal` on line 12, then by "
           "`jax.random.normal`")
    f = Finding("JAX401", "t", str(path), 14, 0, 14, 1, msg)
    confirm_results([FileResult(str(path), [f], source=src)], ConfirmConfig(root=str(tmp_path)),
                    ConfirmOptions(timeout=60, device="cpu"))
    c = f.confirmation
    assert c["status"] == "confirmed", c
    assert "KeyReuseError" in c["evidence"]


SUBMODULES = '''import jax.numpy as jnp
import flax.linen as nn


class Pick(nn.Module):
    @nn.compact
    def __call__(self, h, sel):
        return h[sel].sum()


class Masked(nn.Module):
    @nn.compact
    def __call__(self, ids):
        h = nn.Embed(50, 8)(ids)
        return Pick()(h, ids != 0)


class Gathered(nn.Module):
    @nn.compact
    def __call__(self, ids):
        h = nn.Embed(50, 8)(ids)
        return Pick()(h, jnp.arange(2))
'''


def test_a_submodule_is_reached_through_the_modules_that_build_it(tmp_path):
    """`Pick` alone gets a mask of ours (integers: it traces cleanly); the parents that build it run it
    with what they compute -- a comparison (boolean: JAX raises) or integer positions (clean)."""
    path = tmp_path / "pick.py"
    path.write_text(SUBMODULES)
    src = SourceFile.from_path(str(path))
    f = Finding("JAX204", "t", str(path), 8, 0, 8, 1, "boolean mask `sel` indexes a traced array inside `Pick.__call__`")
    confirm_results([FileResult(str(path), [f], source=src)], ConfirmConfig(root=str(tmp_path)),
                    ConfirmOptions(timeout=60, device="cpu"))
    c = f.confirmation
    assert c["status"] == "confirmed", c
    assert "NonConcreteBooleanIndexError" in c["evidence"] and "ids=int32" in c["evidence"]

    lookalike = tmp_path / "pick_ok.py"
    i, j = SUBMODULES.index("class Masked"), SUBMODULES.index("class Gathered")
    lookalike.write_text(SUBMODULES[:i] + SUBMODULES[j:])
    src = SourceFile.from_path(str(lookalike))
    f = Finding("JAX204", "t", str(lookalike), 8, 0, 8, 1, "boolean mask `sel` indexes a traced array")
    confirm_results([FileResult(str(lookalike), [f], source=src)], ConfirmConfig(root=str(tmp_path)),
                    ConfirmOptions(timeout=60, device="cpu"))
    assert f.confirmation["status"] == "not-confirmed", f.confirmation


def test_running_main_blocks_can_be_turned_off(tmp_path):
    from jaxlint.confirm.specs import SpecError, load_confirm_config
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint.confirm]\nrun-main = false\n")
    assert load_confirm_config(str(tmp_path / "pyproject.toml")).run_main is False
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint.confirm]\nrun-main = 1\n")
    with pytest.raises(SpecError):
        load_confirm_config(str(tmp_path / "pyproject.toml"))
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint.confirm]\n")
    assert load_confirm_config(str(tmp_path / "pyproject.toml")).run_main is True


def test_same_key_means_the_same_from_one_call_to_the_next():
    from jaxlint.confirm.runobs import same_key_verdict
    t = {"line": 7, "end_line": 7}
    where = ("dropout", ("Dropout_0",))
    assert same_key_verdict(t, {where: [b"k", b"k", b"k"]}, "run")["status"] == "confirmed"
    assert same_key_verdict(t, {where: [b"k", b"k"]}, "run")["status"] == "confirmed"
    # training drew steps 0, 1, 2; an evaluation replayed steps 0 and 1: not the same key every step
    v = same_key_verdict(t, {where: [b"0", b"1", b"2", b"0", b"1"]}, "run")
    assert v["status"] == "not-confirmed"
    assert same_key_verdict(t, {where: [b"0", b"0", b"1"]}, "run") is None


def test_harness_mode_watches_the_flax_calls_of_a_script_it_runs(tmp_path):
    import sys
    path = FX / "cf_main_flax.py"
    src = SourceFile.from_path(str(path))
    fs = {}
    for i, text in enumerate(src.text.splitlines(), 1):
        m = TAG.search(text)
        if m and m.group(1) in ("stale", "fresh"):
            for code, msg in (SAME_KEY, DISCARDED):
                fs[(m.group(1), code)] = Finding(code, "t", str(path), i, 0, i, 1, msg)
    confirm_results([FileResult(str(path), list(fs.values()), source=src)], ConfirmConfig(root=str(FX)),
                    ConfirmOptions(timeout=60, device="cpu", command=[sys.executable, str(path)]))
    assert fs[("stale", "JAX613")].confirmation["status"] == "confirmed"
    assert fs[("stale", "JAX614")].confirmation["status"] == "confirmed"
    assert fs[("fresh", "JAX613")].confirmation["status"] == "not-confirmed"
    assert fs[("fresh", "JAX614")].confirmation["status"] == "not-confirmed"
    assert "the command ran the call at line" in fs[("stale", "JAX613")].confirmation["evidence"]


def test_a_parameter_turned_into_a_shape_by_integer_arithmetic_is_a_python_int(tmp_path):
    from jaxlint.confirm.plan import plan_file
    path = tmp_path / "buf.py"
    path.write_text("import jax.numpy as jnp\n\n\nclass Buf:\n    def __init__(self, capacity, obs_dim):\n"
                    "        width = 2 * obs_dim + 3\n        self.storage = jnp.zeros((capacity, width))\n\n"
                    "    def get(self, i):\n        return self.storage[i]\n")
    src = SourceFile.from_path(str(path))
    job, _ = plan_file(src, [Finding("JAX301", "t", str(path), 10, 0, 10, 1, "m")], ConfirmConfig(root=str(tmp_path)), 0)
    ann = {p["name"]: p["ann"] for p in job["entries"]["Buf.get"]["ctor_params"]}
    assert ann["obs_dim"] == {"t": "static", "v": 4}, ann      # (without: no value, "needs a value")


ENV = '''import jax


class Env:
    def __init__(self, n: int = 3):
        def _respawn(key):
            a = jax.random.normal(key, (n,))
            b = jax.random.uniform(key, (n,))
            return a + b

        def _step(key):
            return _respawn(key)

        self.step = _step
'''


def test_a_constructor_function_reached_through_another_it_binds(tmp_path):
    """`_respawn` is called only by `_step`, which the constructor binds to the instance as it is:
    `Env().step` runs it as the program calls it (a key reuse shows run eagerly)."""
    path = tmp_path / "env.py"
    path.write_text(ENV)
    src = SourceFile.from_path(str(path))
    msg = "PRNG key `key` is reused: already consumed by `jax.random.normal` on line 7, then by `jax.random.uniform`"
    f = Finding("JAX401", "t", str(path), 8, 0, 8, 1, msg)
    confirm_results([FileResult(str(path), [f], source=src)], ConfirmConfig(root=str(tmp_path)),
                    ConfirmOptions(timeout=60, device="cpu"))
    c = f.confirmation
    assert c["status"] == "confirmed", c
    assert "Env().step" in c["evidence"]
