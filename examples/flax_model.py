"""A Flax linen model and training step with the pitfalls a newcomer hits."""
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class MLP(nn.Module):
    hidden: int = 128
    num_classes: int = 10
    dropout_rate: float = 0.1

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(self.hidden)(x)
        x = nn.relu(x)
        print("activations", x.mean())                        # prints a tracer, once
        x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)   # fine: `train` is a Python flag
        if x.std() < 1e-3:                                     # Python `if` on a traced value
            x = x * 10.0
        return nn.Dense(self.num_classes)(x)


model = MLP()
tx = optax.adamw(1e-3)


@partial(jax.jit, static_argnames=("train",))
def train_step(params, opt_state, batch, dropout_key, train=True):
    def loss_fn(p):
        logits = model.apply(p, batch["x"], train=train, rngs={"dropout": dropout_key})
        labels = batch["y"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


@jax.jit
def eval_step(params, batch):
    logits = model.apply(params, batch["x"])
    correct = jnp.argmax(logits, -1) == batch["y"]
    n_correct = int(correct.sum())                             # concretizes a tracer
    return n_correct


def fit(batches, x0, seed=0):
    key = jax.random.PRNGKey(seed)
    init_key, dropout_key = jax.random.split(key)
    params = model.init(init_key, x0)
    opt_state = tx.init(params)
    for batch in batches:
        # the same dropout key every step: the same dropout mask every step
        params, opt_state, loss = train_step(params, opt_state, batch, dropout_key)
    return params
