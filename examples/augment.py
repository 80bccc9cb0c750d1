"""Data augmentation helpers, ported from a NumPy/PyTorch pipeline."""
import random

import jax
import jax.numpy as jnp
import numpy as np


def random_flip(image):
    if random.random() < 0.5:              # Python RNG: decided once, at trace time
        image = jnp.flip(image, axis=1)
    return image


def cutout(image, size=8):
    h, w = image.shape[:2]                 # fine: shapes are static
    y = np.random.randint(0, h - size)     # NumPy RNG under vmap: a constant
    x = np.random.randint(0, w - size)
    image[y:y + size, x:x + size] = 0.0    # JAX arrays are immutable
    return image


def normalize(image):
    mean = np.mean(image)                  # NumPy on a traced value
    return (image - mean) / (jnp.std(image) + 1e-6)


def keep_bright(images):
    brightness = images.mean(axis=(1, 2, 3))
    return images[brightness > 0.5]        # boolean mask: data-dependent shape


def jitter(images, key):
    noise = jax.random.normal(key, images.shape) * 0.01
    scale = jax.random.uniform(key, (images.shape[0], 1, 1, 1))   # reuses the key
    return images * scale + noise


def smooth(images, steps=100):
    for _ in range(steps):                 # unrolled 100 times under jit
        images = 0.5 * images + 0.5 * jnp.roll(images, 1, axis=1)
    return images


augment_batch = jax.jit(jax.vmap(lambda im: normalize(cutout(random_flip(im)))))
bright_only = jax.jit(keep_bright)
jitter_batch = jax.jit(jitter)
smooth_batch = jax.jit(smooth, static_argnames="steps")


def augment_correctly(images, key):
    """The same pipeline written the JAX way: explicit keys, functional updates."""
    flip_key, noise_key = jax.random.split(key)
    flip = jax.random.bernoulli(flip_key, 0.5, (images.shape[0], 1, 1, 1))
    images = jnp.where(flip, jnp.flip(images, axis=2), images)
    images = images.at[:, :8, :8].set(0.0)
    noise = jax.random.normal(noise_key, images.shape) * 0.01
    return images + noise
