// CustomOps>RoiBoxCounts has no gradient: its output is integer and depends
// on features and rois through their shapes only (as Shape, which TensorFlow
// registers the same way). Python autodiff uses the gradient registered in
// python/ops/roi_box_counts_ops.py, which is None for every input.

#include "tensorflow/core/framework/function.h"

namespace tensorflow {

REGISTER_OP_NO_GRADIENT("CustomOps>RoiBoxCounts");

}  // namespace tensorflow
