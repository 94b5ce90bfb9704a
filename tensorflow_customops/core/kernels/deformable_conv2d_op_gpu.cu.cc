// GPU kernels of CustomOps>DeformableConv2d and its gradient op. Compiled by
// nvcc under --config=cuda.
//
// Direct kernels, no column buffer (the core allocates no device memory):
// the forward pass and the filter gradient give each output element to one
// thread, which samples in the CPU kernels' way (deform_conv::Sample) and
// sums in a fixed order; the offset and mask gradients too, one thread per
// (pixel, offset group, tap). The input gradient adds each sample's
// contribution to its four corners with atomics, in an order that varies
// from run to run: the glue refuses it where TensorFlow's op determinism is
// enabled.

#if GOOGLE_CUDA

#include "tensorflow_customops/core/kernels/deformable_conv2d_op.h"
#include "tensorflow_customops/core/kernels/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

namespace {

using deform_conv::Sample;
using deform_conv::Strides;

// The sizes and strides every kernel derives from the arguments, computed on
// the host and passed by value.
struct Geometry {
  TfcoDeformConv2dArgs a;
  int64_t taps, cg, og, cog, plane;
  Strides in, off, msk, out;
};

Geometry MakeGeometry(const TfcoDeformConv2dArgs& a) {
  Geometry g;
  g.a = a;
  g.taps = a.kh * a.kw;
  g.cg = a.c / a.groups;
  g.og = a.o / a.groups;
  g.cog = a.c / a.offset_groups;
  g.plane = a.ho * a.wo;
  g.in = deform_conv::InputStrides(a);
  g.off = deform_conv::MapStrides(a, 2 * a.offset_groups * g.taps);
  g.msk = deform_conv::MapStrides(a, a.offset_groups * g.taps);
  g.out = deform_conv::MapStrides(a, a.o);
  return g;
}

template <typename T, typename A>
__device__ Sample<A> SampleOf(const Geometry& g, const T* offset, const T* mask,
                              int64_t image, int64_t pixel, int64_t k,
                              int64_t offset_group, A* m) {
  return deform_conv::SampleAt<T, A>(g.a, g.in, g.off, g.msk, offset, mask,
                                     image, pixel, pixel / g.a.wo,
                                     pixel % g.a.wo, k, offset_group, m);
}

// The column entry of a sample for the channel at `in`: m * its bilinear
// value, NaN for a NaN coordinate, as the CPU kernels' im2col.
template <typename T, typename A>
__device__ A ColumnValue(const Sample<A>& s, const T* in, A m) {
  if (s.nan) return Eigen::NumTraits<A>::quiet_NaN();
  return m * (s.inside ? deform_conv::Bilinear<T, A>(s, in) : A(0));
}

// One output element per thread: the sum over taps and the group's channels
// of column value * filter weight.
template <typename T>
__global__ void ForwardKernel(const Geometry g, const T* __restrict__ input,
                              const T* __restrict__ filter,
                              const T* __restrict__ offset,
                              const T* __restrict__ mask,
                              T* __restrict__ output) {
  typedef functor::DeformConvAccumulator<T> A;
  const int64_t o = g.a.o;
  for (int64_t i : GpuGridRangeX<int64_t>(g.a.n * g.plane * o)) {
    const int64_t oc = i % o, pixel = (i / o) % g.plane,
                  image = i / o / g.plane;
    const int64_t group = oc / g.og;
    A acc = A(0);
    for (int64_t k = 0; k < g.taps; ++k) {
      int64_t offset_group = -1;
      A m = A(1);
      Sample<A> s(A(0), A(0), 0, 0, g.in);
      for (int64_t ci = 0; ci < g.cg; ++ci) {
        const int64_t c = group * g.cg + ci;
        if (c / g.cog != offset_group) {
          offset_group = c / g.cog;
          s = SampleOf<T, A>(g, offset, mask, image, pixel, k, offset_group,
                             &m);
        }
        const T* in = input + image * g.in.n + c * g.in.c;
        acc += ColumnValue<T, A>(s, in, m) *
               static_cast<A>(filter[(k * g.cg + ci) * o + oc]);
      }
    }
    output[image * g.out.n + pixel * g.out.y + oc * g.out.c] =
        static_cast<T>(acc);
  }
}

// d(output)/d(column entry) of tap k, channel c at a pixel: the sum over
// the group's output channels of grad_output * filter weight.
template <typename T, typename A>
__device__ A ColumnGrad(const Geometry& g, const T* grad_output,
                        const T* filter, int64_t image, int64_t pixel,
                        int64_t k, int64_t c) {
  const int64_t group = c / g.cg, ci = c % g.cg;
  const T* dy = grad_output + image * g.out.n + pixel * g.out.y;
  const T* w = filter + (k * g.cg + ci) * g.a.o;
  A sum = A(0);
  for (int64_t oc = group * g.og; oc < (group + 1) * g.og; ++oc) {
    sum += static_cast<A>(dy[oc * g.out.c]) * static_cast<A>(w[oc]);
  }
  return sum;
}

// One (pixel, tap, channel) per thread: its column gradient times the mask
// and each corner's weight, added to the corner's input gradient.
template <typename T>
__global__ void InputGradKernel(const Geometry g, const T* __restrict__ filter,
                                const T* __restrict__ offset,
                                const T* __restrict__ mask,
                                const T* __restrict__ grad_output,
                                T* __restrict__ grad_input) {
  typedef functor::DeformConvAccumulator<T> A;
  const int64_t c_count = g.a.c;
  for (int64_t i : GpuGridRangeX<int64_t>(g.a.n * g.plane * g.taps * c_count)) {
    const int64_t c = i % c_count, k = (i / c_count) % g.taps;
    const int64_t pixel = (i / c_count / g.taps) % g.plane;
    const int64_t image = i / c_count / g.taps / g.plane;
    A m;
    const Sample<A> s =
        SampleOf<T, A>(g, offset, mask, image, pixel, k, c / g.cog, &m);
    if (!s.inside) continue;
    const A dcol =
        m * ColumnGrad<T, A>(g, grad_output, filter, image, pixel, k, c);
    T* gi = grad_input + image * g.in.n + c * g.in.c;
    for (int q = 0; q < 4; ++q) {
      // torchvision's col2im skips corners of weight 0.
      if (s.valid[q] && s.weight[q] > A(0)) {
        GpuAtomicAdd(gi + s.offset[q], static_cast<T>(s.weight[q] * dcol));
      }
    }
  }
}

// One (pixel, offset group, tap) per thread: the offset gradient (the
// slopes of the bilinear sums times the column gradient and the mask) and
// the mask gradient (values times the column gradient), summed over the
// offset group's channels in order.
template <typename T>
__global__ void OffsetMaskGradKernel(
    const Geometry g, const T* __restrict__ input, const T* __restrict__ filter,
    const T* __restrict__ offset, const T* __restrict__ mask,
    const T* __restrict__ grad_output, T* __restrict__ grad_offset,
    T* __restrict__ grad_mask) {
  typedef functor::DeformConvAccumulator<T> A;
  const int64_t groups = g.a.offset_groups;
  for (int64_t i : GpuGridRangeX<int64_t>(g.a.n * g.plane * groups * g.taps)) {
    const int64_t k = i % g.taps, og = (i / g.taps) % groups;
    const int64_t pixel = (i / g.taps / groups) % g.plane;
    const int64_t image = i / g.taps / groups / g.plane;
    A m;
    const Sample<A> s =
        SampleOf<T, A>(g, offset, mask, image, pixel, k, og, &m);
    A sum_y = A(0), sum_x = A(0), sum_m = A(0);
    if (s.nan) {
      sum_y = sum_x = sum_m = Eigen::NumTraits<A>::quiet_NaN();
    } else if (s.near) {
      for (int64_t c = og * g.cog; c < (og + 1) * g.cog; ++c) {
        const T* in = input + image * g.in.n + c * g.in.c;
        A v[4];
        for (int q = 0; q < 4; ++q) {
          v[q] = s.valid[q] ? static_cast<A>(in[s.offset[q]]) : A(0);
        }
        const A dc =
            ColumnGrad<T, A>(g, grad_output, filter, image, pixel, k, c);
        sum_y += (s.lx * (v[3] - v[1]) + (A(1) - s.lx) * (v[2] - v[0])) * dc;
        sum_x += (s.ly * (v[3] - v[2]) + (A(1) - s.ly) * (v[1] - v[0])) * dc;
        if (s.inside) {
          sum_m += (s.weight[0] * v[0] + s.weight[1] * v[1] +
                    s.weight[2] * v[2] + s.weight[3] * v[3]) *
                   dc;
        }
      }
    }
    const int64_t tap = og * g.taps + k;
    T* go = grad_offset + image * g.off.n + pixel * g.off.y;
    go[2 * tap * g.off.c] = static_cast<T>(m * sum_y);
    go[(2 * tap + 1) * g.off.c] = static_cast<T>(m * sum_x);
    if (g.a.use_mask) {
      grad_mask[image * g.msk.n + pixel * g.msk.y + tap * g.msk.c] =
          static_cast<T>(sum_m);
    }
  }
}

// One filter element per thread: the sum over images and pixels of column
// value * grad_output.
template <typename T>
__global__ void FilterGradKernel(const Geometry g, const T* __restrict__ input,
                                 const T* __restrict__ offset,
                                 const T* __restrict__ mask,
                                 const T* __restrict__ grad_output,
                                 T* __restrict__ grad_filter) {
  typedef functor::DeformConvAccumulator<T> A;
  const int64_t o = g.a.o;
  for (int64_t i : GpuGridRangeX<int64_t>(g.taps * g.cg * o)) {
    const int64_t oc = i % o, ci = (i / o) % g.cg, k = i / o / g.cg;
    const int64_t c = (oc / g.og) * g.cg + ci;
    A acc = A(0);
    for (int64_t image = 0; image < g.a.n; ++image) {
      const T* in = input + image * g.in.n + c * g.in.c;
      for (int64_t pixel = 0; pixel < g.plane; ++pixel) {
        A m;
        const Sample<A> s =
            SampleOf<T, A>(g, offset, mask, image, pixel, k, c / g.cog, &m);
        acc +=
            ColumnValue<T, A>(s, in, m) *
            static_cast<A>(
                grad_output[image * g.out.n + pixel * g.out.y + oc * g.out.c]);
      }
    }
    grad_filter[i] = static_cast<T>(acc);
  }
}

}  // namespace

namespace functor {

template <typename T>
struct DeformableConv2d<GPUDevice, T> {
  void operator()(const GPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, T* output) {
    const Geometry g = MakeGeometry(args);
    const int64_t size = args.n * g.plane * args.o;
    if (size == 0) return;
    LaunchGpuLoop(ForwardKernel<T>, size, d, g, input, filter, offset, mask,
                  output);
  }
};

template <typename T>
struct DeformableConv2dGrad<GPUDevice, T> {
  void operator()(const GPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, const T* grad_output, T* grad_input,
                  T* grad_filter, T* grad_offset, T* grad_mask) {
    const Geometry g = MakeGeometry(args);
    const int64_t pixels = args.n * g.plane;
    const int64_t taps = args.offset_groups * g.taps;
    ZeroGpuMemory(d, grad_input, args.n * args.h * args.w * args.c * sizeof(T));
    if (pixels == 0 || args.o == 0) {
      // Nothing flows back: an empty batch or output, or no filters.
      ZeroGpuMemory(d, grad_filter, g.taps * g.cg * args.o * sizeof(T));
      ZeroGpuMemory(d, grad_offset, pixels * 2 * taps * sizeof(T));
      if (args.use_mask) ZeroGpuMemory(d, grad_mask, pixels * taps * sizeof(T));
      return;
    }
    LaunchGpuLoop(InputGradKernel<T>, pixels * g.taps * args.c, d, g, filter,
                  offset, mask, grad_output, grad_input);
    LaunchGpuLoop(OffsetMaskGradKernel<T>, pixels * taps, d, g, input, filter,
                  offset, mask, grad_output, grad_offset, grad_mask);
    LaunchGpuLoop(FilterGradKernel<T>, g.taps * g.cg * args.o, d, g, input,
                  offset, mask, grad_output, grad_filter);
  }
};

#define DEFINE_GPU_SPEC(T)                        \
  template struct DeformableConv2d<GPUDevice, T>; \
  template struct DeformableConv2dGrad<GPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_GPU_SPEC)
#undef DEFINE_GPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA
