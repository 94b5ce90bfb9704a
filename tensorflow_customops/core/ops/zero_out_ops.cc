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
    // Version 3. The default keeps one element, as every earlier version did,
    // so graphs written before keep existed keep their meaning.
    .Attr("keep: int = 1")
    .SetShapeFn(shape_inference::UnchangedShape)
    .Doc(R"doc(
Keeps the first elements of a tensor, in row-major order, and zeroes the rest.

to_zero: A tensor of any shape.
keep: How many leading elements to keep; at least 0. Larger than the size of
  `to_zero` keeps every element.
zeroed: A tensor of the same shape and dtype as `to_zero`, whose first `keep`
  elements equal those of `to_zero` and whose other elements are zero.
)doc");

}  // namespace tensorflow
