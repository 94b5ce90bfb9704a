"""Which XLA lowering a test compiles: where the build has them
(build_info()["xla_custom_calls"]), the ops whose registry entry sets
xla_custom_call compile on CPU to custom calls into their own kernels;
hlo_lowering() makes functions compiled inside it use the HLO lowerings
instead, as other devices do."""

import contextlib
import os

import tensorflow as tf

import tensorflow_customops as tfco

_VARIABLE = "TFCO_XLA_LOWERING"


def custom_calls():
    return tfco.build_info()["xla_custom_calls"]


def data_error():
    """What a custom call raises for data its kernel rejects, with the
    kernel's message: typed-FFI calls raise its error; XLA raises a failed
    legacy call (TensorFlow 2.12 to 2.19) as an InternalError."""
    if tfco.build_info()["xla_custom_call_api"] == "legacy":
        return tf.errors.InternalError
    return tf.errors.InvalidArgumentError


@contextlib.contextmanager
def hlo_lowering():
    """The lowerings read the variable when XLA compiles a function, so only
    functions first compiled inside the block use HLO."""
    previous = os.environ.get(_VARIABLE)
    os.environ[_VARIABLE] = "hlo"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[_VARIABLE]
        else:
            os.environ[_VARIABLE] = previous
