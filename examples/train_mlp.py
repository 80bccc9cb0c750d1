"""A first JAX training script, written the way a PyTorch user would on day one.

Run `jaxlint check examples/` to see what jaxlint finds here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax

LEARNING_RATE = 1e-3          # a constant: reading it under jit is fine
history = []                  # appended to under jit: only the trace sees it


def init_params(key, sizes=(784, 256, 10)):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        w = jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in)
        params.append({"w": w, "b": jnp.zeros(n_out)})
    return params


def forward(params, x):
    for layer in params[:-1]:             # a few layers: unrolling is fine
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


@jax.jit
def loss_fn(params, x, y):
    logits = forward(params, x)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    print(f"loss: {loss:.4f}")            # runs once, at trace time
    if loss > 10.0:                       # a tracer has no truth value
        loss = loss / 10.0
    history.append(loss)                  # leaks a tracer into a global list
    return loss


optimizer = optax.adam(LEARNING_RATE)


def train_step(params, opt_state, x, y):
    # only the loss is jitted; the gradient and the optimizer update run eagerly
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


def accuracy(params, x, y):
    preds = jnp.argmax(forward(params, x), axis=-1)
    correct = jnp.zeros(len(y))
    correct[preds == y] = 1.0             # JAX arrays are immutable
    return float(correct.mean())          # fine: eager code, concrete value


def train(x, y, num_steps=100, seed=0):
    key = jax.random.PRNGKey(seed)
    params = init_params(key)
    opt_state = optimizer.init(params)
    for step in range(num_steps):
        idx = jax.random.choice(key, len(x), (32,))   # same key: same batch every step
        params, opt_state, loss = train_step(params, opt_state, x[idx], y[idx])
        if step % 10 == 0:
            print("step", step, "loss", float(loss))  # fine: eager logging
    return params


def make_data(n=512, seed=0):
    rng = np.random.default_rng(seed)     # fine: NumPy RNG in eager data code
    x = rng.normal(size=(n, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=n)
    x[:, 0] = 0.0                         # fine: NumPy arrays are mutable
    return jnp.asarray(x), jnp.asarray(y)
