"""Soundness shapes (issue 22): tracers enter only where the program's transform puts them."""
import functools

import jax
import jax.numpy as jnp


@jax.tree_util.register_static
class Config:
    def __init__(self, depth: int = 2, use_bias: bool = True):
        self.depth = depth
        self.use_bias = use_bias


@functools.partial(jax.jit, static_argnames=("cfg",))
def forward(x, cfg):
    y = x
    for _ in range(cfg.depth):          # cfg is static: its fields are Python values
        y = jnp.tanh(y)
    if cfg.use_bias:  # sound: static-field
        y = y + 1.0
    return y


@jax.jit
def step(params, x):
    # its inputs cannot be built (`params` is called), so the helper below stays unreached
    return scaled(params(x), 3)


def scaled(h, n):
    if n > 2:  # sound: helper-alone
        return h * n
    return h


def smooth(x, w):
    if w > 0:  # sound: concrete-raises
        return x * w
    return x


def apply_smooth(xs, w):
    return jax.vmap(smooth, in_axes=(0, None))(xs, w)


@jax.jit
def draw(key, x, use_noise: bool = False):
    if use_noise:
        x = x + jax.random.normal(key, x.shape)
    return x + jax.random.uniform(key, x.shape)  # sound: first-consumer-skipped


def sample_twice():
    key = jax.random.key(0)
    a = jax.random.normal(key, (3,))
    b = jax.random.normal(key, (3,))  # sound: eager-reuse
    return a + b


def sample_split():
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    a = jax.random.normal(k1, (3,))
    b = jax.random.normal(k2, (3,))  # sound: eager-split
    return a + b


def log_metrics(step, loss):
    print("step", step, "loss", loss)  # sound: factory-print
    return loss


def make_step(lr):
    @jax.jit
    def train_step(w, x, step):
        loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
        log_metrics(step, loss)
        return w - lr * g

    return train_step


def fit(w, x, steps=3):
    step_fn = make_step(0.1)
    for i in range(steps):
        w = step_fn(w, x, i)
    return w


def flip(image):
    import random
    if random.random() < 0.5:  # sound: bound-transform
        image = jnp.flip(image, axis=0)
    return image


flip_batch = jax.jit(jax.vmap(lambda im: flip(im) * 2.0))


def neighbors_fn(positions, neighbors=None):
    if neighbors is None:
        if jnp.max(positions) > 10.0:  # sound: partial-bound
            positions = positions / 10.0
        return positions
    return positions + neighbors


update_neighbors = jax.jit(functools.partial(neighbors_fn, neighbors=jnp.zeros(4)))
