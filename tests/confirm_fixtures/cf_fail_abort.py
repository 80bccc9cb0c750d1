import os

import jax

os._exit(7)


@jax.jit
def f(x: jax.Array):
    print(x)  # confirm: JAX101 unreached
    return x
