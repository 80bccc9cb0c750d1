"""A Flax classifier with dropout and BatchNorm, trained the way a PyTorch user writes it.

Each commented line is a PyTorch habit that Flax linen punishes: state stashed on the module in
`forward`, weights passed where Flax wants the variables dict, dropout that relies on
`model.train()`, and BatchNorm buffers expected to update in place.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class Classifier(nn.Module):
    hidden: int = 128
    num_classes: int = 10
    dropout_rate: float = 0.2

    @nn.compact
    def __call__(self, x, train: bool = True):       # "train mode" by default, like nn.Module
        x = nn.Dense(self.hidden)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        x = nn.relu(x)
        self.features = x                            # stash activations, as in forward(): frozen module
        x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
        return nn.Dense(self.num_classes)(x)


model = Classifier()
tx = optax.adam(1e-3)


def loss_fn(params, batch_stats, x, y, dropout_key):
    logits, _ = model.apply(                         # the new running statistics are dropped
        {"params": params, "batch_stats": batch_stats}, x, train=True,
        rngs={"dropout": dropout_key}, mutable=["batch_stats"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


@jax.jit
def train_step(params, batch_stats, opt_state, x, y, dropout_key):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch_stats, x, y, dropout_key)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def fit(x_train, y_train, epochs=5, batch_size=32, seed=0):
    key = jax.random.PRNGKey(seed)
    init_key, dropout_key = jax.random.split(key)
    variables = model.init(init_key, x_train[:1], train=False)
    params, batch_stats = variables["params"], variables["batch_stats"]
    opt_state = tx.init(params)
    for epoch in range(epochs):
        for i in range(0, len(x_train), batch_size):
            xb, yb = x_train[i:i + batch_size], y_train[i:i + batch_size]
            # one dropout key for every step: the same dropout mask every step
            params, opt_state, loss = train_step(params, batch_stats, opt_state, xb, yb, dropout_key)
    return {"params": params, "batch_stats": batch_stats}


def predict(variables, x):
    params = variables["params"]
    return model.apply(params, x, train=False)      # the weights alone, as in load_state_dict


def evaluate(variables, x, y):
    logits = model.apply(variables, x)               # forgot model.eval(): dropout and BatchNorm still train
    return jnp.mean(jnp.argmax(logits, -1) == y)
