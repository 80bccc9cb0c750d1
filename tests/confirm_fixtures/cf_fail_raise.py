import jax

raise RuntimeError("no dataset found at import")


@jax.jit
def f(x: jax.Array):
    print(x)  # confirm: JAX101 unreached
    return x
