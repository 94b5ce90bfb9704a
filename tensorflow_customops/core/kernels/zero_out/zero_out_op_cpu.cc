// CPU kernel of CustomOps>ZeroOut.

#include "tensorflow_customops/core/kernels/zero_out/zero_out_op.h"

namespace tensorflow {
namespace customops {
namespace functor {

template <typename T>
struct ZeroOut<CPUDevice, T> {
  void operator()(const CPUDevice& d, typename TTypes<T>::ConstFlat input,
                  typename TTypes<T>::Flat output, int64_t keep) {
    // Each element is read and written by exactly one shard, so the output
    // may share the input's buffer and the result does not depend on the
    // thread count.
    const int64_t size = output.size();
    d.parallelFor(
        size,
        Eigen::TensorOpCost(/*bytes_loaded=*/sizeof(T),
                            /*bytes_stored=*/sizeof(T),
                            /*compute_cycles=*/1),
        [&input, &output, keep](Eigen::Index begin, Eigen::Index end) {
          for (Eigen::Index i = begin; i < end; ++i) {
            output(i) = i < keep ? input(i) : T(0);
          }
        });
  }
};

template struct ZeroOut<CPUDevice, Eigen::half>;
template struct ZeroOut<CPUDevice, Eigen::bfloat16>;
template struct ZeroOut<CPUDevice, float>;
template struct ZeroOut<CPUDevice, double>;
template struct ZeroOut<CPUDevice, int8_t>;
template struct ZeroOut<CPUDevice, uint8_t>;
template struct ZeroOut<CPUDevice, int32_t>;
template struct ZeroOut<CPUDevice, int64_t>;

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
