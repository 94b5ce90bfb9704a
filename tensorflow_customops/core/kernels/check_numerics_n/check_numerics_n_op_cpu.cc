// CPU kernel of CustomOps>CheckNumericsN.

#include <atomic>
#include <cstring>

#include "tensorflow_customops/core/kernels/check_numerics_n/check_numerics_n_op.h"

namespace tensorflow {
namespace customops {
namespace functor {

template <typename T>
struct NumericFlags<CPUDevice, T> {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstFlat x,
                  int* flags) {
    // OR is order-independent, so the result does not depend on how the
    // shards are split.
    std::atomic<int> found{0};
    d.parallelFor(x.size(), Eigen::TensorOpCost(sizeof(T), 0, 2),
                  [&x, &found](Eigen::Index begin, Eigen::Index end) {
                    int local = 0;
                    for (Eigen::Index j = begin; j < end; ++j) {
                      if (Eigen::numext::isnan(x(j))) local |= TFCO_FOUND_NAN;
                      if (Eigen::numext::isinf(x(j))) local |= TFCO_FOUND_INF;
                    }
                    found.fetch_or(local);
                  });
    *flags |= found.load();
  }
};

#define DEFINE_CPU_SPEC(T) template struct NumericFlags<CPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_CPU_SPEC)
#undef DEFINE_CPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
