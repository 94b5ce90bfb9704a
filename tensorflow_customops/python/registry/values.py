"""Random inputs for the registry's cases."""

import numpy as np
import tensorflow as tf

FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def rng(seed):
    return np.random.default_rng(seed)


def rounded_normal(generator, shape, dtype):
    """Random normal values already rounded to `dtype`, as NumPy (bfloat16
    travels as float32 and is cast by the case's forward)."""
    values = tf.cast(generator.standard_normal(shape), dtype)
    return tf.cast(values, tf.float32 if dtype == tf.bfloat16 else dtype).numpy()


def normal(seed, *shape):
    """float64 normal values of `shape` from `seed`."""
    return np.random.default_rng(seed).standard_normal(shape)


def cast_to(dtype):
    return lambda x: tf.cast(x, dtype)


def small_values(shape, dtype, generator):
    """Floats in [-2, 2] with two decimals: stable when recorded in half and
    bfloat16 (golden GraphDefs)."""
    values = np.round(generator.uniform(-2.0, 2.0, size=shape), 2)
    return values.astype(dtype.as_numpy_dtype)


def shaped_small_values(*shapes):
    """An Override input builder: one array of small_values per dtype, of the
    given shapes (e.g. a matrix product's compatible operands)."""
    return lambda dtypes, generator: [
        small_values(shape, dtype, generator) for shape, dtype in zip(shapes, dtypes)
    ]
