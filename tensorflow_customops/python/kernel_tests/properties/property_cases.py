"""The registry's property cases, and how the determinism and concurrency
tests run them.

A case (registry.entry.Case) is a function of some inputs that runs one or
more of the library's ops; `evaluate` adds the gradients, so a forward case
also runs its *Grad op. Which ops a case runs is read from its traced graph,
not declared, so the tests that use these cases name every registered op that
no case reaches.

Inputs are large enough that every CPU kernel splits its work across 4
intra-op threads (see the Shard/parallelFor cost arguments in
core/kernels/*.cc): at least ~10^6 estimated cycles per op, where Eigen's
cost model starts a thread per ~10^5.
"""

import tensorflow as tf

from tensorflow_customops.python import registry


def all_cases():
    """Every entry's property cases: each entry's first case (one float32
    case per op, see covering_cases) before every other case."""
    per_entry = [entry.property_cases() for entry in registry.entries().values()]
    firsts = [cases[0] for cases in per_entry if cases]
    return firsts + [case for cases in per_entry for case in cases[1:]]


def _upstream(y):
    """A fixed, varied incoming gradient for output y."""
    pattern = tf.reshape(tf.range(tf.size(y)) % 7 - 3, tf.shape(y))
    return tf.cast(pattern, y.dtype)


def evaluate(case, inputs):
    """The case's outputs followed by its gradients with respect to its
    differentiable inputs, as a flat list of tensors."""
    xs = [tf.convert_to_tensor(x) for x in inputs]
    watched = [xs[i] for i in case.differentiable]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        ys = tf.nest.flatten(case.forward(*xs))
    if not watched:
        return ys
    grads = tape.gradient(ys, watched, output_gradients=[_upstream(y) for y in ys])
    return ys + grads


def ops_run_by(case):
    """The registered ops (CustomOps>...) that evaluating `case` runs."""
    graph = (
        tf.function(lambda *xs: evaluate(case, xs))
        .get_concrete_function(*case.make_inputs(0))
        .graph
    )
    return {
        op.type for op in graph.get_operations() if op.type.startswith("CustomOps>")
    }


def covering_cases(cases):
    """The cases, in order, that each run a registered op no earlier one runs,
    until every registered op is run; and the registered ops none of `cases`
    runs, sorted."""
    needed = set(registry.registered_ops())
    chosen = []
    for case in cases:
        if not needed:
            break
        ops = ops_run_by(case)
        if ops & needed:
            chosen.append(case)
            needed -= ops
    return chosen, sorted(needed)


UNCOVERED_MESSAGE = (
    "registered ops that no property case runs: give each property_cases in "
    "its entry in tensorflow_customops/python/registry/"
)
