"""The record each op of the library has in the registry, and the kinds of
cases it holds."""

import dataclasses
from typing import Callable, Optional

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Case:
    """A function of some inputs that runs one or more of the library's ops.

    name: unique within the consumer that runs it.
    make_inputs: seed -> list of NumPy inputs; different seeds give different
      values.
    forward: (*tensors) -> a tensor or a list of tensors.
    differentiable: indices of the inputs to differentiate with respect to;
      None means every input.
    """

    name: str
    make_inputs: Callable[[int], list]
    forward: Callable
    differentiable: Optional[tuple] = ()

    def tensors(self, dtype, seed=0):
        """The inputs as tensors: the differentiable ones in `dtype`, the others
        (boxes, say) in float32; and the differentiable indices."""
        arrays = self.make_inputs(seed)
        indices = (
            range(len(arrays)) if self.differentiable is None else self.differentiable
        )
        tensors = [
            tf.constant(a, dtype if i in indices else tf.float32)
            for i, a in enumerate(arrays)
        ]
        return tensors, list(indices)


@dataclasses.dataclass(frozen=True)
class Override:
    """How the golden recorder (core/ops/compat/goldens.py) exercises an op that
    its generic rules cannot.

    inputs: called with the input dtypes (a list of tf.DType) and a seeded
      numpy Generator; returns one numpy array per input.
    attrs: AttrValues for attrs without a usable default, e.g.
      {"pooled_height": attr_value_pb2.AttrValue(i=2)}.
    output_grads: like `inputs`, for the upstream gradients fed to the
      gradient graph, one per output (when outputs are not [2, 3]).
    tie_types: for type attrs that constrain each other, called with a case's
      attrs ({name: AttrValue}, those of the OpDef version recorded) and
      returns them made valid, e.g. float64 boxes with float64 features.
    redefined_gradients: input index -> why, for the gradients of the op
      defined anew after goldens recorded them: replay checks a recorded
      value of these for its dtype and shape only (the gradient tests check
      the values, and that both registries agree).
    """

    inputs: Optional[Callable] = None
    attrs: dict = dataclasses.field(default_factory=dict)
    output_grads: Optional[Callable] = None
    tie_types: Optional[Callable] = None
    redefined_gradients: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Entry:
    """What the cross-op tests and tools know about one op.

    op: the registered name, "CustomOps>...".
    property_cases: () -> [Case] with inputs large enough that every CPU
      kernel the case runs splits its work across 4 intra-op threads
      (determinism_test, concurrency_test; a forward case also runs its
      gradient op, and which ops a case runs is read from its traced graph,
      so a gradient op may leave this empty).
    large_shapes: (test: tf.test.TestCase) -> None, the op's checks beyond
      2^31 elements and int64 without allocating (large_shapes_test).
    gradient_cases: () -> [Case], small inputs whose gradients are checked
      against float64 numeric Jacobians through the C++ gradient
      (cpp_gradients_test); required for ops with a C++ gradient. Forwards
      cast floating inputs to the dtype under test themselves.
    fuzz_hint: a Hypothesis strategy factory hint(op_def, attrs, rng) drawing
      (inputs by name, tags) of the structure the op expects (fuzz); None
      fuzzes the op from its OpDef alone.
    golden: how to record the op's golden GraphDefs (core/ops/compat).
    thread_count_dependent: dtype name -> why the op's CPU results in that
      dtype may depend on the intra-op thread count; empty for a bitwise
      deterministic kernel (determinism_test, which fails if a listed dtype
      turns out deterministic).
    xla_tolerance: dtype name -> (rtol, atol, reason) within which the
      outputs and gradients of the op's gradient_cases under jit_compile=True
      match eager on CPU with the HLO lowering; a dtype not listed must match
      bit for bit (xla_test).
    xla_custom_call: the op and its gradient ops lower on CPU to custom calls
      into their kernels where build_info()["xla_custom_calls"]: then they
      match eager bit for bit, and xla_tolerance applies to the HLO lowering
      (xla_test compiles both).
    xla_shape_errors: () -> [(Case, regex)], calls whose input shapes the
      kernel rejects and the error it raises: with the shapes unknown when
      traced, XLA must raise it at compile time, as a tf.function does at run
      time (xla_test).
    xla_unsupported: for an op that by design fails to compile under XLA with
      its HLO lowering, a regex of the compile error (xla_test checks it is
      raised; with xla_custom_call the op compiles where the custom call is
      available); "" for the others, which must compile.
    second_order_error: for an op whose second-order gradients are not
      implemented, a regex of the error they raise at run time
      (cpp_gradients_test checks it is raised, through both gradients); ""
      for the others, whose second-order gradients are checked numerically.
    stateful: for an op registered stateful, why: a check that must run like
      Assert even where nothing reads its output (graphs prune stateless ops
      without consumers); "" for the others, which must be stateless
      (op_registry_test).
    """

    op: str
    large_shapes: Callable
    property_cases: Callable[[], list] = list
    gradient_cases: Callable[[], list] = list
    fuzz_hint: Optional[Callable] = None
    golden: Override = Override()
    thread_count_dependent: dict = dataclasses.field(default_factory=dict)
    xla_tolerance: dict = dataclasses.field(default_factory=dict)
    xla_custom_call: bool = False
    xla_shape_errors: Callable[[], list] = list
    xla_unsupported: str = ""
    second_order_error: str = ""
    stateful: str = ""
