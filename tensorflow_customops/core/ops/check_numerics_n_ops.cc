// Op spec of CustomOps>CheckNumericsN: a list(type) input and output, where
// each tensor may have its own dtype, and a string attr.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

REGISTER_OP("CustomOps>CheckNumericsN")
    .Input("tensors: T")
    .Output("checked: T")
    .Attr("T: list({half, bfloat16, float, double}) >= 1")
    .Attr("message: string")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) {
        c->set_output(i, c->input(i));
      }
      return OkStatus();
    })
    .Doc(R"doc(
Passes tensors through unchanged, or fails if any of them holds NaN or Inf.

One op checks a whole list of tensors of possibly different floating-point
dtypes. The error is InvalidArgument and names the index of the first bad
tensor, the message, and whether NaN, Inf or both were found.

tensors: The tensors to check.
checked: The same tensors, unchanged.
T: The dtypes of the tensors.
message: Text included in the error, to say where the check is.
)doc");

}  // namespace tensorflow
