// CPU kernel of CustomOps>ZeroOut, and the core's entry point for it.

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

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

extern "C" TfcoError TfcoZeroOut(const TfcoDevice* device, TfcoDtype dtype,
                                 const void* input, void* output, int64_t size,
                                 int64_t keep) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  typedef TypeList<Eigen::half, Eigen::bfloat16, float, double, int8_t, uint8_t,
                   int64_t>
      GpuTypes;
  typedef TypeList<Eigen::half, Eigen::bfloat16, float, double, int8_t, uint8_t,
                   int32_t, int64_t>
      CpuTypes;
  return RunKernel<CpuTypes, GpuTypes>(
      "ZeroOut", device, dtype, [&](const auto& d, auto t) {
        typedef decltype(t) T;
        functor::ZeroOut<std::decay_t<decltype(d)>, T>()(
            d,
            typename TTypes<T>::ConstFlat(static_cast<const T*>(input), size),
            typename TTypes<T>::Flat(static_cast<T*>(output), size), keep);
      });
}
