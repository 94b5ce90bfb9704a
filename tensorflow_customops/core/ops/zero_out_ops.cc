// Op spec of CustomOps>ZeroOut, TensorFlow's tutorial op, done completely.

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"

namespace tensorflow {

REGISTER_OP("CustomOps>ZeroOut")
    .Input("to_zero: T")
    .Output("zeroed: T")
    // int32 first and default: the tutorial op was int32-only, so graphs
    // written against it keep their meaning. int8 and uint8 came in version 2
    // of the spec (see compat/ops_history_v1/); types are only ever added.
    .Attr(
        "T: {int32, int64, float, double, half, bfloat16, int8, uint8} = "
        "DT_INT32")
    .SetShapeFn(shape_inference::UnchangedShape)
    .Doc(R"doc(
Keeps the first element of a tensor, in row-major order, and zeroes the rest.

to_zero: A tensor of any shape.
zeroed: A tensor of the same shape and dtype as `to_zero`, whose first element
  equals the first element of `to_zero` and whose other elements are zero.
)doc");

}  // namespace tensorflow
