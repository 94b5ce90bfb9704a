// CustomOps>CheckCondition in the portable kernels: its entry point, for the
// OpKernels (check_condition_op.cc) and the XLA custom call
// (compiler/tf2xla/kernels/check_condition_op.cc).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_CONDITION_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_CONDITION_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

// Sets *holds (host memory) to 1 if each of the `size` bools at `condition`
// (host memory on every device) is true, else to 0.
extern "C" TFCO_CORE_API TfcoError TfcoCheckCondition(const TfcoDevice* device,
                                                      const bool* condition,
                                                      int64_t size, int* holds);

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CHECK_CONDITION_OP_H_
