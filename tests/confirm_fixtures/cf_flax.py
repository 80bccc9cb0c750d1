"""A Flax linen module (traced through `init`) and declared inputs from pyproject."""
import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x: jax.Array):
        x = nn.Dense(self.hidden)(x)
        print("activations", x.mean())  # confirm: JAX101 confirmed
        if x.std() < 1e-3:  # confirm: JAX201 confirmed
            x = x * 10.0
        return x


def loss_fn(params, batch):
    logits = batch["x"] @ params["w"]
    if logits.mean() > 0:  # confirm: JAX201 confirmed
        logits = -logits
    return jnp.mean((logits - batch["y"]) ** 2)


@jax.jit
def train_step(params, batch, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss
