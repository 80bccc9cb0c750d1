"""fixes.names: the one fresh-name helper fixes use."""
from __future__ import annotations

import textwrap

import pytest

from jaxlint.analysis import SemanticModel, SourceFile
from jaxlint.fixes.names import fresh_name, names_in_scope


def test_fresh_name_suffixes_and_alternatives():
    assert fresh_name(set(), "loop_body", sep="_") == "loop_body"
    assert fresh_name({"loop_body"}, "loop_body", sep="_") == "loop_body_2"
    assert fresh_name({"loop_body", "loop_body_2"}, "loop_body", sep="_") == "loop_body_3"
    assert fresh_name({"subkey"}, "subkey") == "subkey2"
    assert fresh_name({"base_key"}, "base_key", alternatives=("outer_key", "root_key")) == "outer_key"
    assert fresh_name({"base_key", "outer_key", "root_key"}, "base_key",
                      alternatives=("outer_key", "root_key")) == "base_key2"
    assert fresh_name(set(), "lambda", alternatives=("lambda_",)) == "lambda_"   # never a keyword
    with pytest.raises(ValueError):
        fresh_name(set(), "1x")


def test_names_in_scope_sees_enclosing_nested_and_used_globals():
    src = textwrap.dedent("""\
        import jax.numpy as jnp
        TOP = 1

        def outer(a):
            b = a + helper_global
            def inner(c):
                d = c
                return e
            return inner

        def sibling():
            zzz = 1
    """)
    source = SourceFile("m.py", src)
    model = SemanticModel(source.parse(), source)
    outer = next(f for f in model.module.children if f.name == "outer")
    taken = names_in_scope(model, outer)
    assert {"jnp", "TOP", "outer", "a", "b", "inner", "helper_global", "c", "d", "e"} <= taken
    assert "zzz" not in taken                      # a sibling's locals cannot clash
