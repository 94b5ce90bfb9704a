// Op spec of CustomOps>CheckCondition: a run-time check that XLA keeps, as a
// stateful op whose outputs are its values.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

REGISTER_OP("CustomOps>CheckCondition")
    .Input("condition: bool")
    .Input("values: T")
    .Output("checked: T")
    .Attr(
        "T: list({bool, int8, uint8, int16, uint16, int32, uint32, int64, "
        "uint64, half, bfloat16, float, double, complex64, complex128}) >= 1")
    .Attr("message: string")
    // A check, as Assert is: it must run even where nothing reads its
    // outputs, so graphs may not prune it.
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 1; i < c->num_inputs(); ++i) {
        c->set_output(i - 1, c->input(i));
      }
      return OkStatus();
    })
    .Doc(R"doc(
Passes values through unchanged, or fails with a message if a condition is
false.

The error is InvalidArgument with `message` as its text, raised when the
check runs, eagerly, in graphs and under XLA. Under XLA a condition known at
compile time (one computed from static shapes, say) is checked then, with
the same error, on every device. Otherwise the lowering is a custom call that
raises it where the compiled program can call the kernel (the CPU; TensorFlow
2.12 to 2.19 raise it as an Internal error "CustomCall failed: <message>"),
and where a compiled program cannot raise (the GPU, TFCO_XLA_LOWERING=hlo)
the values pass through unchecked. Use the outputs, not the inputs,
downstream, so that what reads them runs after the check.

condition: Checked: every element must be true (a scalar, usually).
values: The tensors passed through.
checked: The same tensors, unchanged.
T: The dtypes of the values.
message: The error's text.
)doc");

}  // namespace tensorflow
