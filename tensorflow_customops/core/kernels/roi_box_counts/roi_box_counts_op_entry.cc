// The portable kernels' check of CustomOps>RoiBoxCounts. Counts are few (one
// per image) and live in host memory on every device, so one loop on the
// calling thread does it; the GPU kernel runs it too.

#include "tensorflow_customops/core/kernels/portable/device.h"
#include "tensorflow_customops/core/kernels/roi_box_counts/roi_box_counts_op.h"

extern "C" TfcoError TfcoRoiBoxCounts(const TfcoDevice* device, TfcoDtype dtype,
                                      const void* counts, int64_t n,
                                      int64_t boxes_per_image, int* flags) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  typedef TypeList<int32_t, int64_t> CountTypes;
  return RunKernel<CountTypes, TypeList<>>(
      "RoiBoxCounts", device, dtype, [&](const auto&, auto t) {
        typedef decltype(t) T;
        const T* c = static_cast<const T*>(counts);
        int found = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (c[i] < 0) found |= TFCO_COUNT_NEGATIVE;
          if (static_cast<int64_t>(c[i]) > boxes_per_image) {
            found |= TFCO_COUNT_ABOVE_K;
          }
        }
        *flags = found;
      });
}
