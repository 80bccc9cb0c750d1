"""`jaxlint confirm --pytest`: the project's own test suite is the harness."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")


def test_confirm_with_the_projects_tests(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'pt'\n")
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        import jax
        import jax.numpy as jnp


        @jax.jit
        def step(params, x):
            loss = jnp.sum((x @ params) ** 2)
            print("loss", loss)
            return params - 0.1 * x.T @ x @ params
        """))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text(textwrap.dedent("""\
        import jax.numpy as jnp
        from model import step


        def test_step():
            assert step(jnp.ones((3, 3)), jnp.ones((4, 3))).shape == (3, 3)
        """))
    r = subprocess.run([sys.executable, "-m", "jaxlint", "confirm", "model.py", "--no-cache", "--pytest", "tests"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "1 confirmed" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "confirmed: `print` ran while `step` was traced" in r.stdout
