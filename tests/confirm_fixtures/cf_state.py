"""Global state and argument mutation: JAX102/103/104/105/106."""
from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:
    from jaxtyping import PRNGKeyArray

event_log = []
LEARNING_RATE = 0.1
LOG_EVERY = 10
calls = 0


@jax.jit
def augment(images: jax.Array):
    event_log.append(f"batch of {images.shape[0]}")  # confirm: JAX102 confirmed
    return jnp.flip(images, axis=0)


@jax.jit
def augment_local(images: jax.Array):
    notes = []
    notes.append(f"batch of {images.shape[0]}")  # confirm: JAX102 not-confirmed
    return jnp.flip(images, axis=0)


@jax.jit
def count_calls(x: jax.Array):
    global calls
    calls += 1  # confirm: JAX102 confirmed
    return x * 2


@jax.jit
def sgd(w: jax.Array, g: jax.Array):
    return w - LEARNING_RATE * g  # confirm: JAX103 confirmed


@jax.jit
def sgd_logged(w: jax.Array, g: jax.Array):
    if LOG_EVERY > 0:  # confirm: JAX103 not-confirmed
        pass
    return w - 0.1 * g


@jax.jit
def noisy(x: jax.Array):
    noise = np.random.randn(*x.shape)  # confirm: JAX104 confirmed
    jitter = random.random()  # confirm: JAX104 confirmed
    stamp = time.time()  # confirm: JAX104 confirmed
    return x + noise + jitter * 0 + stamp * 0


@jax.jit
def noisy_keyed(x: jax.Array, key: PRNGKeyArray):
    noise = jax.random.normal(key, x.shape)  # confirm: JAX104 not-confirmed
    return x + noise


@jax.jit
def update_in_place(state: dict, grad: jax.Array):
    state["w"] = state["w"] - 0.1 * grad  # confirm: JAX105 confirmed
    return state["w"]


@jax.jit
def update_copy(state: dict, grad: jax.Array):
    new_state = dict(state)
    new_state["w"] = state["w"] - 0.1 * grad  # confirm: JAX105 not-confirmed
    return new_state


leaked = []


@jax.jit
def leak(x: jax.Array):
    y = x * 2
    leaked.append(y)  # confirm: JAX106 confirmed
    return y


class Normalizer:
    def __init__(self, dim: int):
        self.mean = jnp.zeros(dim)
        self.normalize = jax.jit(self._normalize)

    def _normalize(self, x: jax.Array):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(axis=0)  # confirm: JAX106 confirmed
        return x - self.mean

    def _center(self, x: jax.Array):
        mean = x.mean(axis=0)  # confirm: JAX106 unreached
        return x - mean


@jax.jit
def center(x: jax.Array):
    mean = x.mean(axis=0)  # confirm: JAX106 not-confirmed
    return x - mean
