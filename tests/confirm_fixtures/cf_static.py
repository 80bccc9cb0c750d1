"""JAX505: a static argument JAX rejects (the confirmation needs JAX505's `confirm` declaration)."""
import jax


def _scale(x, factor):
    return x * factor


@jax.jit
def bad_argnums(x: jax.Array):
    return jax.jit(_scale, static_argnums=(2,))(x, 2.0)  # confirm: JAX505 confirmed


@jax.jit
def good_argnums(x: jax.Array):
    return jax.jit(_scale, static_argnums=(1,))(x, 2.0)  # confirm: JAX505 not-confirmed
