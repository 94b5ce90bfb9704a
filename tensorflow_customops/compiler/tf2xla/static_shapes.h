// The check of the lowerings that size their HLO, or their custom call's
// buffers, from their inputs' static shapes.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_STATIC_SHAPES_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_STATIC_SHAPES_H_

#include "absl/types/span.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"

namespace tensorflow {
namespace customops {

// OK, or an error naming the first of `inputs` with a dynamic dimension (its
// size known only at run time, under a static bound: from tf.boolean_mask or
// tf.where, say), besides dimension 0 of `row_inputs` (rows, such as boxes,
// that the lowering takes bounded-dynamic). Padded to its bound, such an input
// would be read as if the bound were its size.
Status CheckStaticDimensions(XlaOpKernelContext* context,
                             absl::Span<const int> inputs,
                             absl::Span<const int> row_inputs = {});

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_STATIC_SHAPES_H_
