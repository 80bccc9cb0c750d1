"""Confirmation you can trust (issue 22, item 1): a verdict is evidence only if JAX would behave
that way for inputs the program can produce.

Each ``# sound: TAG`` line of ``confirm_fixtures/cf_sound.py`` gets a finding built here (the
rule's code and message as the real rule writes it) and must come out as stated."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import Finding
from jaxlint.confirm import ConfirmOptions, confirm_results
from jaxlint.confirm.specs import ConfirmConfig
from jaxlint.engine import FileResult

FX = Path(__file__).resolve().parent / "confirm_fixtures"
PATH = FX / "cf_sound.py"
TAG = re.compile(r"#\s*sound:\s*([\w-]+)")

# tag -> (code, message)
FINDINGS = {
    "static-field": ("JAX201", "Python `if` on traced value `cfg.use_bias` inside `forward`"),
    "helper-alone": ("JAX201", "Python `if` on traced value `n` inside `scaled` (called from `step`)"),
    "concrete-raises": ("JAX201", "Python `if` on traced value `w` inside `smooth`"),
    "first-consumer-skipped": ("JAX401", "PRNG key `key` is reused: already consumed by `jax.random.normal` "
                                         "on line {first}, then by `jax.random.uniform`"),
    "eager-reuse": ("JAX401", "PRNG key `key` is reused: already consumed by `jax.random.normal` on line "
                              "{first}, then by `jax.random.normal`"),
    "factory-print": ("JAX101", "`print` of traced value `loss` inside `log_metrics` (called from "
                                "`make_step.train_step`)"),
    "bound-transform": ("JAX104", "`random.random()` inside `flip` (called from lambda) runs once, at trace time"),
    "partial-bound": ("JAX201", "Python `if` on traced value `jnp.max(positions)` inside `neighbors_fn`"),
    "eager-split": ("JAX401", "PRNG key `k2` is reused: already consumed by `jax.random.normal` on line {first}, "
                              "then by `jax.random.normal`"),
}


@pytest.fixture(scope="module")
def verdicts():
    src = SourceFile.from_path(str(PATH))
    lines = src.text.splitlines()
    findings = {}
    for i, text in enumerate(lines, 1):
        m = TAG.search(text)
        if m:
            code, msg = FINDINGS[m.group(1)]
            f = Finding(code, "t", str(PATH), i, 0, i, 1, msg.format(first=i - 1))
            findings[m.group(1)] = f
    res = [FileResult(str(PATH), list(findings.values()), source=src)]
    confirm_results(res, ConfirmConfig(root=str(FX)), ConfirmOptions(timeout=120))
    return {k: f.confirmation for k, f in findings.items()}


def _text(c):
    return c.get("evidence") or c.get("reason")


def test_a_static_field_is_never_a_tracer(verdicts):
    # `cfg` is a register_static object passed as a static argument: its fields are Python values,
    # so the branch on `cfg.use_bias` traces cleanly (the false finding is not confirmed)
    c = verdicts["static-field"]
    assert c["status"] == "not-confirmed", _text(c)
    assert "cfg=" in c["arguments"] and "(Python value" in c["arguments"].split("cfg=")[1]


def test_a_helper_is_never_confirmed_alone(verdicts):
    # the jitted caller cannot be traced; tracing `scaled` alone with `n` as a tracer would raise the
    # very error JAX201 predicts -- the finding stays unreached and says why
    c = verdicts["helper-alone"]
    assert c["status"] == "unreached", _text(c)
    assert "`step`" in c["reason"] or "`scaled`" in c["reason"]


def test_an_error_concrete_values_raise_is_no_evidence(verdicts):
    # `w` is not mapped by the vmap (in_axes=None): a Python value or a concrete array, never a tracer;
    # a multi-element `w` raises `ValueError: truth value ...` traced or not
    c = verdicts["concrete-raises"]
    assert c["status"] != "confirmed", _text(c)


def test_key_reuse_needs_the_earlier_consumer(verdicts):
    c = verdicts["first-consumer-skipped"]
    assert c["status"] == "unreached", _text(c)
    assert "earlier consumer" in c["reason"]


def test_key_reuse_in_eager_code_runs_eagerly(verdicts):
    c = verdicts["eager-reuse"]
    assert c["status"] == "confirmed", _text(c)
    assert c["evidence"].startswith("with `jax_debug_key_reuse`, running `sample_twice`")
    c = verdicts["eager-split"]
    assert c["status"] == "not-confirmed", _text(c)


def test_a_factory_step_is_reached_through_the_eager_code_that_calls_it(verdicts):
    # `train_step` is nested in a factory: nothing module-level can trace it, but `fit` (eager) makes
    # it and calls it; run as the program runs it, the program's own jit hands `print` a tracer
    c = verdicts["factory-print"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_sound:fit" and "ran under the program's own trace" in c["evidence"]


def test_a_transform_bound_at_module_level_is_called_as_the_program_calls_it(verdicts):
    # `flip_batch = jax.jit(jax.vmap(lambda im: ...))`: the lambda is nothing we can trace by name, but
    # calling `flip_batch` (a batch axis added for the vmap) runs the program's own jit and vmap
    c = verdicts["bound-transform"]
    assert c["status"] == "confirmed", _text(c)
    assert c["entry"] == "cf_sound:flip_batch" and "ran at trace time from line" in c["evidence"]


def test_a_partial_binding_is_the_programs_not_a_default(verdicts):
    # the jit gets `partial(neighbors_fn, neighbors=...)`: tracing `neighbors_fn` with `neighbors` at its
    # default would take a branch the program never traces; the module's `update_neighbors` is called
    c = verdicts["partial-bound"]
    assert c["status"] != "confirmed", _text(c)
    assert "update_neighbors" in c["entry"] or "functools.partial" in _text(c)


def test_every_verdict_names_entry_and_inputs(verdicts):
    for tag, c in verdicts.items():
        if c["status"] != "unreached":
            assert c["entry"].startswith("cf_sound:") and "arguments" in c, tag
            assert "[entry `" in _text(c), tag
