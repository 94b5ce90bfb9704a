#include "tensorflow_customops/core/kernels/roi/roi_cpu_loops.h"

#include <vector>

namespace tensorflow {
namespace customops {
namespace roi {

template <typename B>
RoisByImage GroupRoisByImage(const B* rois, int64_t num_rois, int64_t batch) {
  RoisByImage groups;
  groups.begin.assign(batch + 1, 0);
  for (int64_t k = 0; k < num_rois; ++k) {
    ++groups.begin[static_cast<int64_t>(rois[k * 5]) + 1];
  }
  for (int64_t n = 0; n < batch; ++n) groups.begin[n + 1] += groups.begin[n];
  groups.order.resize(num_rois);
  std::vector<int64_t> next(groups.begin.begin(), groups.begin.end() - 1);
  for (int64_t k = 0; k < num_rois; ++k) {
    groups.order[next[static_cast<int64_t>(rois[k * 5])]++] = k;
  }
  return groups;
}
template RoisByImage GroupRoisByImage(const float*, int64_t, int64_t);
template RoisByImage GroupRoisByImage(const double*, int64_t, int64_t);

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow
