"""Synthesized inputs never turn a Python flag into an array (which would make JAX
raise where the real code never does, and "confirm" a false finding)."""
from __future__ import annotations

import ast

from jaxlint.analysis import SemanticModel
from jaxlint.confirm.synth import param_uses, spec_of

SRC = """
import flax.linen as nn
import jax.numpy as jnp

class Block(nn.Module):
    @nn.compact
    def __call__(self, x, train, scale):
        x = nn.Dropout(0.1, deterministic=not train)(x)
        if scale:
            x = x * 2
        return x if train else -x

def mask_loss(x, mask):
    if mask:
        return x
    return jnp.where(mask, x, 0.0) * mask
"""


def _specs(fn_name):
    m = SemanticModel(ast.parse(SRC))
    fn = next(f for f in m.functions if f.name == fn_name)
    return {p: spec_of(u, 2, 4, True, p) for p, u in param_uses(m, fn).items()}


def test_flags_used_only_as_conditions_are_python_values():
    specs = _specs("__call__")
    assert specs["train"] == {"t": "static", "v": True}
    assert specs["scale"] == {"t": "static", "v": True}
    assert specs["x"]["t"] == "array"


def test_a_value_also_used_as_an_array_stays_an_array():
    assert _specs("mask_loss")["mask"]["t"] == "array"
