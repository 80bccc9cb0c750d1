"""A small MLP regression model, written the way a PyTorch user might.

Its functions have no type annotations: `jaxlint check --confirm` builds
inputs from how the parameters are used, and `jaxlint confirm -- python
train_small.py` records the real call signatures while the script trains and
confirms the findings with those (see README.md).
"""
import jax
import jax.numpy as jnp


def init_params(key, sizes=(8, 32, 32, 1)):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (n_in, n_out)) / jnp.sqrt(n_in), "b": jnp.zeros(n_out)})
    return params


def forward(params, x, key, dropout=0.1):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
        keep = jax.random.bernoulli(key, 1.0 - dropout, x.shape)   # the same key in every layer
        x = jnp.where(keep, x / (1.0 - dropout), 0.0)
    last = params[-1]
    return x @ last["w"] + last["b"]


def predict(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def loss_fn(params, x, y, key):
    pred = forward(params, x, key)
    return jnp.mean((pred[:, 0] - y) ** 2)


@jax.jit
def train_step(params, x, y, key, lr=0.05):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, key)
    print("step loss", loss)                  # prints a tracer, once, at trace time
    params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return params, loss


@jax.jit
def clip_grads(grads, max_norm):
    norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grads)))
    if norm > max_norm:                       # a Python `if` on a traced value (only with --clip)
        grads = jax.tree_util.tree_map(lambda g: g * max_norm / norm, grads)
    return grads


def evaluate(params, batches):
    errors = []
    for x, y in batches:
        predict_fn = jax.jit(lambda p, v: predict(p, v))      # a new function, compiled per batch
        errors.append(jnp.mean((predict_fn(params, x)[:, 0] - y) ** 2))
    return float(jnp.mean(jnp.stack(errors)))
