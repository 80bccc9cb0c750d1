"""Runtime confirmation fixture (issue 22): a `__main__` block that never ends is stopped at its
budget, and what it did before counts.  `# main: TAG` lines get a finding in tests/test_confirm_main.py."""
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnums=(1,))
def power(x, n):
    return x ** n


if __name__ == "__main__":
    n = 1
    while True:
        y = power(jnp.ones(3), n)  # main: forever
        n += 1
