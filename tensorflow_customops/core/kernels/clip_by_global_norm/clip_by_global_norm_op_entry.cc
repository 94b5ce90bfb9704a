// The portable kernels' entry points of CustomOps>ClipByGlobalNorm and
// CustomOps>ClipByGlobalNormGrad: they pick the CPU or the GPU functor
// (clip_by_global_norm_op_cpu.cc, clip_by_global_norm_op_gpu.cu.cc) by the
// device.

#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"

namespace tensorflow {
namespace customops {
namespace {

// Maps n buffers of `sizes` elements.
template <typename Flat, typename Pointer>
std::vector<Flat> Flats(int n, const Pointer* buffers, const int64_t* sizes) {
  typedef typename Flat::Scalar T;
  std::vector<Flat> flats;
  flats.reserve(n);
  for (int i = 0; i < n; ++i) {
    flats.emplace_back(static_cast<T*>(buffers[i]), sizes[i]);
  }
  return flats;
}

}  // namespace
}  // namespace customops
}  // namespace tensorflow

extern "C" int64_t TfcoClipByGlobalNormScratchBytes(int on_gpu, int grad,
                                                    TfcoDtype dtype, int n) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  int64_t bytes = 0;
  auto size = [&](auto t) {
    typedef decltype(t) T;
    if (!on_gpu) {
      bytes = grad
                  ? functor::ClipByGlobalNormGrad<CPUDevice, T>::ScratchBytes(n)
                  : functor::ClipByGlobalNorm<CPUDevice, T>::ScratchBytes(n);
    } else {
#if GOOGLE_CUDA
      bytes = grad
                  ? functor::ClipByGlobalNormGrad<GPUDevice, T>::ScratchBytes(n)
                  : functor::ClipByGlobalNorm<GPUDevice, T>::ScratchBytes(n);
#endif
    }
  };
  ForDtype(FloatTypes(), dtype, size);
  return bytes;
}

extern "C" TfcoError TfcoClipByGlobalNorm(
    const TfcoDevice* device, TfcoDtype dtype, int n, const void* const* t,
    const int64_t* sizes, const void* clip_norm, void* const* clipped,
    void* global_norm, void* scratch) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "ClipByGlobalNorm", device, dtype, [&](const auto& d, auto type) {
        typedef decltype(type) T;
        functor::ClipByGlobalNorm<std::decay_t<decltype(d)>, T>()(
            d, Flats<typename TTypes<T>::ConstFlat>(n, t, sizes),
            *static_cast<const T*>(clip_norm),
            Flats<typename TTypes<T>::Flat>(n, clipped, sizes),
            typename TTypes<T>::Scalar(static_cast<T*>(global_norm)), scratch);
      });
}

extern "C" TfcoError TfcoClipByGlobalNormGrad(
    const TfcoDevice* device, TfcoDtype dtype, int n, const void* const* t,
    const int64_t* sizes, const void* clip_norm, const void* const* dclipped,
    const void* dglobal_norm, void* const* dt, void* dclip_norm,
    void* scratch) {
  using namespace tensorflow::customops;  // NOLINT(build/namespaces)
  return RunKernel<FloatTypes, FloatTypes>(
      "ClipByGlobalNormGrad", device, dtype, [&](const auto& d, auto type) {
        typedef decltype(type) T;
        functor::ClipByGlobalNormGrad<std::decay_t<decltype(d)>, T>()(
            d, Flats<typename TTypes<T>::ConstFlat>(n, t, sizes),
            *static_cast<const T*>(clip_norm),
            Flats<typename TTypes<T>::ConstFlat>(n, dclipped, sizes),
            typename TTypes<T>::ConstScalar(
                static_cast<const T*>(dglobal_norm)),
            Flats<typename TTypes<T>::Flat>(n, dt, sizes),
            typename TTypes<T>::Scalar(static_cast<T*>(dclip_norm)), scratch);
      });
}
