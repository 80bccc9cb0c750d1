"""Time grows linearly with the size of a module (issue 20, item 9).

A map of every transform site was rebuilt for each function (and a scan of every
site, binding or call ran per site or per write), so a module of N jitted functions
took time in N squared: 4,000 took 3.5 s, 8,000 9.5 s, 16,000 41 s.  Each shape of
``benchmarks/bench_scaling.py`` is linted at N and 8N units: linear time gives a ratio
near 8, the quadratic one gave 20 and more.  The bound (14) leaves room for a busy machine.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

from bench_scaling import generate  # noqa: E402

from jaxlint.analysis import SourceFile  # noqa: E402
from jaxlint.checkers import all_rules  # noqa: E402
from jaxlint.engine import lint_source  # noqa: E402

RULES = [r for r in all_rules() if r.default_enabled]


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        lint_source(SourceFile("m.py", text), RULES)
        best = min(best, time.perf_counter() - t)
    return best


@pytest.mark.parametrize("shape,small", [("jitted", 500), ("sites", 500), ("statements", 500), ("mixed", 150)])
def test_time_is_linear_in_the_module_size(shape, small):
    t_small = _seconds(generate(shape, small))
    t_big = _seconds(generate(shape, 8 * small))
    assert t_big / t_small < 14, f"{shape}: {small} units {t_small:.3f} s, {8 * small} units {t_big:.3f} s"
