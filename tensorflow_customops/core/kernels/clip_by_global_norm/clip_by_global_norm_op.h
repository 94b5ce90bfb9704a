// CustomOps>ClipByGlobalNorm and CustomOps>ClipByGlobalNormGrad in the kernel
// core: their entry points, for the OpKernels (clip_by_global_norm_op.cc),
// and, for the core's own sources, their functors.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CLIP_BY_GLOBAL_NORM_OP_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CLIP_BY_GLOBAL_NORM_OP_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

/* The bytes of device scratch memory that TfcoClipByGlobalNorm (grad = 0) or
 * TfcoClipByGlobalNormGrad (grad = 1) needs for n tensors of a floating-point
 * `dtype`, on the GPU (on_gpu = 1) or the CPU; 0 when it needs none. */
extern "C" TFCO_CORE_API int64_t
TfcoClipByGlobalNormScratchBytes(int on_gpu, int grad, TfcoDtype dtype, int n);

/* clipped[i] = t[i] * factor and *global_norm = the global norm, for n >= 1
 * tensors t[i] of sizes[i] elements of a floating-point `dtype` (clipped[i]
 * may be t[i]). clip_norm points to one value of `dtype` in host memory;
 * global_norm is device memory on GPU. `scratch` is device memory of
 * TfcoClipByGlobalNormScratchBytes bytes (null if 0). */
extern "C" TFCO_CORE_API TfcoError TfcoClipByGlobalNorm(
    const TfcoDevice* device, TfcoDtype dtype, int n, const void* const* t,
    const int64_t* sizes, const void* clip_norm, void* const* clipped,
    void* global_norm, void* scratch);

/* The gradient: dt[i] (which may be dclipped[i]) and *dclip_norm from t,
 * dclipped (of t's sizes) and *dglobal_norm. clip_norm is a host value as in
 * the forward; dglobal_norm and dclip_norm are device memory on GPU, scratch
 * as in the forward (grad = 1). */
extern "C" TFCO_CORE_API TfcoError TfcoClipByGlobalNormGrad(
    const TfcoDevice* device, TfcoDtype dtype, int n, const void* const* t,
    const int64_t* sizes, const void* clip_norm, const void* const* dclipped,
    const void* dglobal_norm, void* const* dt, void* dclip_norm, void* scratch);

#ifdef TFCO_PORTABLE
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensorflow_customops/core/kernels/portable/device.h"

namespace tensorflow {
namespace customops {
namespace functor {

template <typename T>
using ConstFlatList = std::vector<typename TTypes<T>::ConstFlat>;
template <typename T>
using FlatList = std::vector<typename TTypes<T>::Flat>;

// The factor tf.clip_by_global_norm applies, computed in T as it does:
// clip_norm * min(1 / norm, 1 / clip_norm), plus (norm - norm) so that an inf
// or NaN norm makes the factor NaN.
template <typename T>
EIGEN_DEVICE_FUNC inline T ClipScale(T norm, T clip_norm) {
  const T inv_norm = T(1) / norm;
  const T inv_clip = T(1) / clip_norm;
  // A minimum that propagates NaN, like tf.minimum.
  const T smaller = (Eigen::numext::isnan(inv_norm) || inv_norm < inv_clip)
                        ? inv_norm
                        : inv_clip;
  return clip_norm * smaller + (norm - norm);
}

// What the gradient needs from the two global sums. With norm = sqrt(sumsq)
// and the factor s = clip / norm while clipping (1/norm < 1/clip), else 1:
//   dt[i]      = s * dclipped[i] + t[i] * x_coef
//   x_coef     = (dot * ds/dnorm + dglobal_norm) / norm
//   dclip_norm = dot * ds/dclip
// where dot = sum(dclipped[i] * t[i]). x_coef is 0 for a zero norm (every t is
// zero then), and everything is NaN for an inf or NaN norm, as in the forward.
struct ClipGradCoefficients {
  double scale;
  double x_coef;
  double dclip_norm;
};

EIGEN_DEVICE_FUNC inline ClipGradCoefficients ClipGrad(double sumsq, double dot,
                                                       double clip,
                                                       double dglobal_norm) {
  const double norm = Eigen::numext::sqrt(sumsq);
  const double nan_unless_finite = norm - norm;
  const bool clipping = 1.0 / norm < 1.0 / clip;
  const double scale = clipping ? clip / norm : 1.0;
  const double dscale_dnorm = clipping ? -clip / (norm * norm) : 0.0;
  const double dscale_dclip = clipping ? 1.0 / norm : 0.0;
  const double dnorm = dot * dscale_dnorm + dglobal_norm;
  return {scale + nan_unless_finite,
          (norm > 0 ? dnorm / norm : 0.0) + nan_unless_finite,
          dot * dscale_dclip + nan_unless_finite};
}

// Forward: clipped[i] = t[i] * ClipScale(norm, clip_norm), global_norm = norm
// as T, with the sum of squares accumulated in double in an order that does
// not depend on the number of threads. clip_norm is a host value (HostMemory
// on GPU); global_norm is device memory. `scratch` is device memory of
// ScratchBytes(t.size()) bytes, which the caller allocates (none on CPU).
template <typename Device, typename T>
struct ClipByGlobalNorm {
  static int64_t ScratchBytes(int64_t num_tensors);
  void operator()(const Device& d, const ConstFlatList<T>& t, T clip_norm,
                  const FlatList<T>& clipped,
                  typename TTypes<T>::Scalar global_norm, void* scratch);
};

// Gradient, with the coefficients of ClipGrad; dglobal_norm and dclip_norm
// are device memory, clip_norm a host value, scratch as for the forward.
template <typename Device, typename T>
struct ClipByGlobalNormGrad {
  static int64_t ScratchBytes(int64_t num_tensors);
  void operator()(const Device& d, const ConstFlatList<T>& t, T clip_norm,
                  const ConstFlatList<T>& dclipped,
                  typename TTypes<T>::ConstScalar dglobal_norm,
                  const FlatList<T>& dt, typename TTypes<T>::Scalar dclip_norm,
                  void* scratch);
};

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_PORTABLE

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CLIP_BY_GLOBAL_NORM_OP_H_
