"""Every rule's documentation is checked by the rule itself: the code under
*Example* must be reported by that rule, the code under *Use instead* must not.

The examples are written the way docs are read, assuming the usual imports
(``jax``, ``jnp``, ``np``, ``lax``, ``nn``, ``optax``...); :data:`PRELUDE`
supplies them, so a rule is judged on the snippet a user sees.
"""
from __future__ import annotations

import re

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.checkers import all_rules
from jaxlint.engine import lint_source

PRELUDE = """\
import functools
import random
from functools import partial
import jax
import jax.numpy as jnp
import numpy as np
import optax
import flax.linen as nn
from flax import nnx
from jax import lax
"""

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(rule, section):
    return _BLOCK.findall(rule.doc_sections().get(section, ""))


def _codes(rule, code):
    source = SourceFile(f"<{rule.code} docs>", PRELUDE + code)
    return {f.code for f in lint_source(source, [rule])}


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_example_is_reported(rule):
    blocks = _blocks(rule, "Example")
    assert blocks, f"{rule.code}: the Example section has no ```python block"
    for code in blocks:
        assert rule.code in _codes(rule, code), f"{rule.code} does not report its own Example:\n{code}"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_use_instead_is_silent(rule):
    blocks = _blocks(rule, "Use instead")
    assert blocks, f"{rule.code}: the Use instead section has no ```python block"
    for code in blocks:
        assert rule.code not in _codes(rule, code), f"{rule.code} reports its own 'Use instead':\n{code}"
