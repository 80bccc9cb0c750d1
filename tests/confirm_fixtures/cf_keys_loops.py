"""PRNG key reuse (JAX401/402) and unrolled loops (JAX504); jaxtyping annotations."""
from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

if TYPE_CHECKING:  # jaxtyping need not be installed: annotations are read statically
    from jaxtyping import Array, Float, Key, PRNGKeyArray

NUM_STEPS = 200


@jax.jit
def two_noises(key: PRNGKeyArray, x: Float[Array, "batch 3"]):
    a = jax.random.normal(key, x.shape)
    b = jax.random.normal(key, x.shape)  # confirm: JAX401 confirmed
    return x + a + b


@jax.jit
def two_noises_split(key: Key[Array, ""], x: Float[Array, "batch 3"]):
    k1, k2 = jax.random.split(key)
    a = jax.random.normal(k1, x.shape)
    b = jax.random.normal(k2, x.shape)  # confirm: JAX401 not-confirmed
    return x + a + b


@jax.jit
def legacy_keys(x: jax.Array):
    key = jax.random.PRNGKey(0)
    a = jax.random.uniform(key, x.shape)
    b = jax.random.uniform(key, x.shape)  # confirm: JAX402 confirmed
    return x * a * b


@jax.jit
def legacy_keys_split(x: jax.Array):
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    a = jax.random.uniform(k1, x.shape)
    b = jax.random.uniform(k2, x.shape)  # confirm: JAX402 not-confirmed
    return x * a * b


def sgld_step(carry, _):
    params, key = carry
    noise = jax.random.normal(key, params.shape)  # confirm: JAX401 confirmed
    return (params - 0.01 * params + noise, key), params


@jax.jit
def sgld_chain(params: Float[Array, "n"], key: PRNGKeyArray):
    (params, _), samples = lax.scan(sgld_step, (params, key), None, length=5)
    return samples


@jax.jit
def euler(x: jax.Array):
    for _ in range(NUM_STEPS):  # confirm: JAX504 confirmed
        x = x + 0.01 * jnp.sin(x)
    return x


@jax.jit
def three_layers(x: jax.Array):
    for _ in range(3):  # confirm: JAX504 not-confirmed
        x = jnp.tanh(x)
    return x


@jax.jit
def carried_noise(key, x):
    def body(state):
        i, key, acc = state
        k1, k2 = jax.random.split(key, 2)  # confirm: JAX401 confirmed
        acc = acc + jax.random.normal(k1, x.shape)
        return (i + 1, key, acc)
    return lax.while_loop(lambda s: s[0] < 3, body, (0, key, x))[2]
