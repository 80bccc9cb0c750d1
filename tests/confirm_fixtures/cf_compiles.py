"""Compilations per step: inner jit (JAX501) and jit in a loop (JAX502)."""
import jax
import jax.numpy as jnp


def loss_fn(w, x):
    return jnp.mean((x @ w) ** 2)


@jax.jit  # confirm: JAX501 confirmed
def apply_update(w, g):
    return w - 0.1 * g


def train_step(w: jax.Array, x: jax.Array):
    loss, g = jax.value_and_grad(loss_fn)(w, x)
    g = jnp.clip(g, -1.0, 1.0) * 0.5 + jnp.tanh(g) * 0.5
    return apply_update(w, g), loss


@jax.jit  # confirm: JAX501 not-confirmed
def full_update(w, x):
    loss, g = jax.value_and_grad(loss_fn)(w, x)
    return w - 0.1 * g, loss


def thin_step(w: jax.Array, x: jax.Array):
    return full_update(w, x)


def step_with_fresh_jit(w: jax.Array, x: jax.Array):
    grad_fn = jax.jit(jax.grad(loss_fn))  # confirm: JAX502 confirmed
    return w - 0.1 * grad_fn(w, x)


def step_with_cached_jit(w: jax.Array, x: jax.Array):
    grad_fn = jax.jit(loss_fn)  # confirm: JAX502 not-confirmed
    return w - 0.1 * grad_fn(w, x)
