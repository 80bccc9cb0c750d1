import sys

import jax

if __name__ != "__main__":
    sys.exit(3)


@jax.jit
def f(x: jax.Array):
    print(x)  # confirm: JAX101 unreached
    return x
