"""Reach shapes (issue 22): callables a constructor binds to its instance (environments that build
their `reset`/`step` as nested functions of `__init__`)."""
from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


class Grid:
    def __init__(self, num_agents=2, size=5):
        self.num_agents = num_agents

        def _reset_state(key):
            key, subkey = jax.random.split(key)
            pos = jax.random.randint(subkey, (num_agents,), 0, size)
            heading = jax.random.randint(subkey, (num_agents,), 0, 4)  # reach: instance-jit
            return pos, heading

        def _respawn(key):
            k1, k2 = jax.random.split(key)
            pos = jax.random.randint(k1, (num_agents,), 0, size)
            heading = jax.random.randint(k2, (num_agents,), 0, 4)  # reach: instance-split
            return pos, heading

        def _noise(key):
            a = jax.random.normal(key, (num_agents,))
            b = jax.random.normal(key, (num_agents,))  # reach: instance-plain
            return a + b

        def reset(key):
            return _reset_state(key)

        self.reset = jax.jit(reset)
        self.respawn = jax.jit(_respawn)
        self.noise = _noise


class FromSpec:
    def __init__(self, spec):
        n = spec.size()

        def _draw(key):
            a = jax.random.uniform(key, (n,))
            b = jax.random.uniform(key, (n,))  # reach: instance-no-ctor
            return a - b

        self.draw = jax.jit(_draw)


class Printer:
    def __init__(self, scale=2.0):
        def _step(x):
            print("x", x)  # reach: instance-print-plain
            return x * scale

        def _jstep(x):
            print("x", x)  # reach: instance-print-jit
            return jnp.tanh(x) * scale

        self.step = _step
        self.jstep = jax.jit(_jstep)


class EnvState(NamedTuple):
    pos: jnp.ndarray
    t: jnp.ndarray


class Walker:
    def __init__(self, size=8):
        def _reset(key) -> Tuple[jnp.ndarray, EnvState]:
            state = EnvState(pos=jax.random.randint(key, (2,), 0, size), t=jnp.zeros((), jnp.int32))
            return state.pos, state

        def _step(key, state: EnvState, action):
            if state.pos.shape != (2,):
                raise ValueError("a state the program's reset never makes")
            noise = jax.random.normal(key, (2,))
            jitter = jax.random.normal(key, (2,))  # reach: made-state
            pos = jnp.clip(state.pos + action + jnp.round(noise + jitter).astype(jnp.int32), 0, size - 1)
            return pos, EnvState(pos=pos, t=state.t + 1)

        def _step_ok(key, state: EnvState, action):
            if state.pos.shape != (2,):
                raise ValueError("a state the program's reset never makes")
            k1, k2 = jax.random.split(key)
            noise = jax.random.normal(k1, (2,))
            jitter = jax.random.normal(k2, (2,))  # reach: made-state-split
            pos = jnp.clip(state.pos + action + jnp.round(noise + jitter).astype(jnp.int32), 0, size - 1)
            return pos, EnvState(pos=pos, t=state.t + 1)

        self.reset = jax.jit(_reset)
        self.step_env = _step
        self.step_ok = _step_ok


def positive_mean(x):
    kept = x[x > 0]  # reach: lambda-on-the-line
    return kept.mean()


def positive_mean_ok(x):
    kept = jnp.where(x > 0, x, 0.0)  # reach: lambda-on-the-line-ok
    return kept.sum() / jnp.maximum((x > 0).sum(), 1)


def batch_means(xs):
    return jax.vmap(lambda row: positive_mean(row))(xs)


def batch_means_ok(xs):
    return jax.vmap(lambda row: positive_mean_ok(row))(xs)


class Scales(nnx.Module):
    def __init__(self, data: jax.Array, *, rngs: nnx.Rngs):
        key = rngs.params()
        n = data.shape[-1]
        self.pos = nnx.Param(jax.random.uniform(key, (n,)))
        self.neg = nnx.Param(jax.random.uniform(key, (n,)))  # reach: nnx-init


class ScalesOk(nnx.Module):
    def __init__(self, data: jax.Array, *, rngs: nnx.Rngs):
        n = data.shape[-1]
        self.pos = nnx.Param(jax.random.uniform(rngs.params(), (n,)))
        self.neg = nnx.Param(jax.random.uniform(rngs.params(), (n,)))  # reach: nnx-init-ok


SCALE = np.ones(8, np.float32)


def set_scale(data):
    global SCALE
    SCALE = data.std(axis=0).astype(np.float32)


@jax.jit
def normalize(batch):
    return batch[:, :4] / SCALE  # reach: global-read-fails


NUM_COLS = 6
OFFSET = np.zeros(NUM_COLS, np.float32)


def fit_offset(data):
    global OFFSET
    OFFSET = data.mean(axis=0).astype(np.float32)


@jax.jit
def center(batch):
    return batch - OFFSET  # reach: global-last-axis
