// CPU kernel of CustomOps>CheckNumericsN, and the core's entry point for it.

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

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

extern "C" TfcoError TfcoNumericFlags(const TfcoDevice* device, int n,
                                      const TfcoDtype* dtypes,
                                      const void* const* tensors,
                                      const int64_t* sizes, int* scratch,
                                      int* flags) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunOnDevice("CheckNumericsN", device, [&](const auto& d) {
    typedef std::decay_t<decltype(d)> Device;
    constexpr bool kOnCpu = std::is_same<Device, CPUDevice>::value;
    int* out = kOnCpu ? flags : scratch;
    if constexpr (kOnCpu) {
      std::memset(flags, 0, n * sizeof(int));
    } else {
      ZeroGpuMemory(d, scratch, n * sizeof(int));
    }
    for (int i = 0; i < n; ++i) {
      if (sizes[i] == 0) continue;
      auto check = [&](auto t) {
        typedef decltype(t) T;
        functor::NumericFlags<Device, T>()(
            d,
            typename TTypes<T>::ConstFlat(static_cast<const T*>(tensors[i]),
                                          sizes[i]),
            out + i);
      };
      if (!ForDtype(FloatTypes(), dtypes[i], check)) {
        NoKernelFor("CheckNumericsN", dtypes[i]);
        return;
      }
    }
    if constexpr (!kOnCpu)
      CopyToHostAndWait(d, flags, scratch, n * sizeof(int));
  });
}
