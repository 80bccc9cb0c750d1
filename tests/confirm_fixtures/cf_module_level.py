import jax.numpy as jnp

table = jnp.zeros(4)
table[0] = 1.0  # confirm: JAX301 confirmed
