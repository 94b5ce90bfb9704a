// Op spec of CustomOps>RoiBoxCounts, the check of per-image box counts that
// the RoI functions run for [N, K, 4] boxes (python/ops/roi_ops.py).

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

REGISTER_OP("CustomOps>RoiBoxCounts")
    .Input("features: T")
    .Input("rois: Trois")
    .Input("box_counts: Tcounts")
    .Output("checked_counts: Tcounts")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("Trois: {half, bfloat16, float, double}")
    .Attr("Tcounts: {int32, int64}")
    // A check, as Assert and CheckNumerics are: where only its image count
    // matters, nothing reads its output, and a stateless op would be pruned.
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, counts;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &counts));
      // Dimensions that disagree fail when the op runs (or compiles, under
      // XLA), with the same error whether or not they are known here.
      c->set_output(0, counts);
      return OkStatus();
    })
    .Doc(R"doc(
Passes per-image box counts through, or fails if they do not fit the boxes.

For boxes given per image, `[N, K, 4]` with `box_counts[n]` real boxes in
image `n`: fails with InvalidArgument unless features and rois hold the same
number of images N, box_counts holds N counts, and each count is in [0, K].
Only the shapes of features and rois are read. Under XLA, static shapes are
checked at compile time; the counts' values, and sizes known only at run
time, raise the same error where the lowering is a custom call into this
kernel (the CPU; TensorFlow 2.12 to 2.19 raise it as an Internal error with
the message), and elsewhere (the GPU, TFCO_XLA_LOWERING=hlo), where a
compiled program cannot raise, the counts are clamped to [0, K] and sizes
known only at run time are not compared.

features: The feature map, `[N, H, W, C]` or `[N, C, H, W]`.
rois: The boxes per image, `[N, K, 4]`.
box_counts: The number of real boxes of each image, `[N]`.
checked_counts: `box_counts`, unchanged.
T: The dtype of features.
Trois: The dtype of rois.
Tcounts: The dtype of the counts.
)doc");

}  // namespace tensorflow
