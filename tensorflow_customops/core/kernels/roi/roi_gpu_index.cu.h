// Device helpers shared by the RoI GPU kernels (*_gpu.cu.cc of the kernel
// core only).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GPU_INDEX_CU_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GPU_INDEX_CU_H_

#if GOOGLE_CUDA

#include <type_traits>

#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"
#include "tensorflow_customops/core/kernels/roi/roi_geometry.h"

namespace tensorflow {
namespace customops {
namespace roi {

// Logical (k, ph, pw, c) of an element of a pooled tensor.
struct PooledIndex {
  int64_t k;
  int ph;
  int pw;
  int64_t c;
};

// Decodes linear index i of a pooled tensor of `channels` channels laid out
// as args.pooled_layout (NHWC when its channel stride is 1, else NCHW), so
// consecutive threads write consecutive elements. I is the index type (see
// WithIndexType).
template <typename I>
__device__ inline PooledIndex DecodePooled(I i, const RoiArgs& args,
                                           int64_t channels_in_tensor) {
  const I channels = static_cast<I>(channels_in_tensor);
  const I width = args.attrs.pooled_width;
  const I height = args.attrs.pooled_height;
  PooledIndex idx;
  if (args.pooled_layout.c_stride == 1) {
    idx.c = i % channels;
    i /= channels;
    idx.pw = static_cast<int>(i % width);
    i /= width;
    idx.ph = static_cast<int>(i % height);
    idx.k = i / height;
  } else {
    idx.pw = static_cast<int>(i % width);
    i /= width;
    idx.ph = static_cast<int>(i % height);
    i /= height;
    idx.c = i % channels;
    idx.k = i / channels;
  }
  return idx;
}

// Decodes group g of V outputs of one bin, whose channels are c + j * step
// for j < V, step = out_channels / V (V divides out_channels); the group's
// first output is at linear index *first. Groups are numbered in the pooled
// tensor's memory order, so for each j consecutive threads read and write
// consecutive channels in NHWC (coalesced loads and atomics).
template <int V, typename I>
__device__ inline PooledIndex DecodePooledGroup(I g, const RoiArgs& args,
                                                I* first) {
  const PooledIndex idx = DecodePooled(g, args, args.shape.out_channels / V);
  *first =
      static_cast<I>(args.pooled_layout.Offset(idx.k, idx.ph, idx.pw, idx.c));
  return idx;
}

// Calls launch(int32_t()) when the linear indices of a pooled tensor of
// `size` elements (plus a grid's stride) and the offsets within one image of
// the features fit in 32 bits, else launch(int64_t()): decoding an index
// takes six divisions, which cost several times more instructions in 64
// bits, and 64-bit offsets take twice the registers.
template <typename F>
void WithIndexType(int64_t size, const Layout& features, F&& launch) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  if (size < kLimit && features.n_stride < kLimit) {
    launch(int32_t());
  } else {
    launch(int64_t());
  }
}

inline int64_t PooledSize(const RoiArgs& args) {
  return args.shape.num_rois * args.attrs.bins() * args.shape.out_channels;
}

// Zeroes a feature gradient before a backward pass adds into it.
template <typename T>
void ZeroFeatures(const GPUDevice& d, const RoiArgs& args, T* data) {
  const RoiShape& s = args.shape;
  ZeroGpuMemory(d, data, s.batch * s.height * s.width * s.channels * sizeof(T));
}

// Calls launch(I(), std::integral_constant<int, V>()) for an align or pool
// kernel over `args`: I from WithIndexType, and V outputs per thread (see
// DecodePooledGroup). V channels of one bin share every sample position and
// weight (or the bin's bounds), and the box and bilinear arithmetic and the
// index decoding are most of the kernels' instructions, so a thread takes
// four channels where the channel count allows it; each channel is still
// summed (or scanned) in the same order as alone.
template <typename Args, typename F>
void WithChannelGroups(const Args& args, F&& launch) {
  constexpr int kGrouped = 4;
  WithIndexType(PooledSize(args), args.features_layout, [&](auto index) {
    if (args.shape.out_channels % kGrouped == 0) {
      launch(index, std::integral_constant<int, kGrouped>());
    } else {
      launch(index, std::integral_constant<int, 1>());
    }
  });
}

}  // namespace roi
}  // namespace customops
}  // namespace tensorflow

#endif  // GOOGLE_CUDA

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_ROI_GPU_INDEX_CU_H_
