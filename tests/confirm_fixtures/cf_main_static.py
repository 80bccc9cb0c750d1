"""Runtime confirmation fixture (issue 19/22): JAX505 shapes only the module's `__main__` block
shows.  `# main: TAG` lines get a finding built in tests/test_confirm_main.py."""
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnames=("temperature",))
def soften(logits, temperature):
    return jax.nn.softmax(logits / temperature)


@dataclass
class Settings:
    scale: float = 2.0


@partial(jax.jit, static_argnames=("settings",))
def scaled(x, settings):
    return x * settings.scale


if __name__ == "__main__":
    x = jnp.ones((4, 3))
    t = 2.0
    for step in range(4):
        y = soften(x, temperature=t)  # main: recompiles
        t = t * 0.5
    for step in range(4):
        z = soften(x, temperature=3.0)  # main: fixed-static
    for n in (2, 3, 5):
        w = soften(jnp.ones((n, 3)), temperature=7.0)  # main: shapes-change
    out = scaled(x, settings=Settings())  # main: unhashable
