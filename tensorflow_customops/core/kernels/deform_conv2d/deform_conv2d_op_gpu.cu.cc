// GPU kernels of CustomOps>DeformableConv2d and its gradient op. Compiled by
// nvcc under --config=cuda.
//
// Each pass is a matrix product one of whose operands is the CPU kernels'
// column matrix (m * the bilinear value of each (pixel, tap, channel)),
// built tile by tile in shared memory rather than in a buffer (the core
// allocates no device memory):
//   forward       output[pixel, oc]        = sum over (tap, c) of column *
//   filter filter grad   grad_filter[tap, c, oc]  = sum over pixels of column *
//   dy column grad   dcol[pixel, tap, c]      = sum over oc of dy * filter
// The column gradient's epilogue adds its share to the input gradient with
// atomics, in an order that varies from run to run (the glue refuses it
// where TensorFlow's op determinism is enabled), and sums the offset and
// mask gradients over the offset group's channels in a fixed order. The
// float and double filter gradient splits the pixels over blocks, enough to
// fill the GPU, and adds their partial sums with atomics (a fixed order
// would need a scratch buffer); half and bfloat16 keep one block per filter
// tile, so that they round once. Every other sum runs in a fixed order: the
// forward over taps, then channels; a block's filter gradient over images,
// then pixels; dcol over output channels.

#if GOOGLE_CUDA

#include <algorithm>
#include <type_traits>

#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"
#include "tensorflow_customops/core/kernels/portable/gpu_launch.cu.h"

namespace tensorflow {
namespace customops {

namespace {

using deform_conv2d::Sample;
using deform_conv2d::Strides;

// A block owns a kTile x kTile tile of its product; each of its 16 x 16
// threads (tx, ty) the rows RowOf(i) = 4 ty + i, i < 4, which it reads from
// shared memory with one 16-byte load (two for double), and the columns
// ColumnOf(j), j < 4: 4 tx + j, one load too, or, for the column gradient,
// whose epilogue adds to the input gradient with atomics, tx + 16 j, so that
// neighbouring threads add to neighbouring channels.
constexpr int kTile = 64;
constexpr int kSide = 16;
constexpr int kThreads = kSide * kSide;
constexpr int kPerThread = kTile / kSide;
// Shared tiles' rows are kTile + kPad long: 16-byte aligned, and a store
// down a column meets at most two threads per bank.
constexpr int kPad = 4;

__device__ int RowOf(int i) {
  return kPerThread * static_cast<int>(threadIdx.x / kSide) + i;
}

template <bool kAdjacent>
__device__ int ColumnOf(int j) {
  const int tx = static_cast<int>(threadIdx.x % kSide);
  return kAdjacent ? kPerThread * tx + j : tx + kSide * j;
}
// The length of one step along a product's inner dimension.
constexpr int kStep = 16;

// The largest divisor of n that is at most limit (n >= 1).
int64_t LargestDivisor(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

int64_t Gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The sizes and strides every kernel derives from the arguments, computed on
// the host and passed by value.
struct Geometry {
  TfcoDeformConv2dArgs a;
  int64_t taps, cg, og, cog, plane, pixels;
  // Channel runs that start at a multiple of their length lie in one group
  // and one offset group, so one sample per pixel serves the whole run:
  // `step` channels for the forward's step, `tile` for the gradients' tiles.
  int64_t step, tile;
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
  g.pixels = a.n * g.plane;
  const int64_t run = Gcd(g.cg, g.cog);
  g.step = LargestDivisor(run, kStep);
  g.tile = LargestDivisor(run, kTile);
  g.in = deform_conv2d::InputStrides(a);
  g.off = deform_conv2d::MapStrides(a, 2 * a.offset_groups * g.taps);
  g.msk = deform_conv2d::MapStrides(a, a.offset_groups * g.taps);
  g.out = deform_conv2d::MapStrides(a, a.o);
  return g;
}

// A sample (deform_conv2d::Sample) kept in shared memory for a block's
// threads, with its mask factor and where its image starts in the input. A
// pixel beyond the last has no corners and m = 0, so its column entries are
// 0.
template <typename A>
struct SharedSample {
  int64_t image;  // image * in.n
  int64_t dy;     // where the pixel's grad_output row starts
  int64_t offset[4];
  A weight[4];
  A m, ly, lx;
  bool valid[4];
  bool nan, near, inside, real;
};

template <typename T, typename A>
__device__ void LoadSample(const Geometry& g, const T* offset, const T* mask,
                           int64_t p, int64_t k, int64_t offset_group,
                           SharedSample<A>* out) {
  SharedSample<A> r = {};
  if (p < g.pixels) {
    const int64_t image = p / g.plane, pixel = p % g.plane;
    A m;
    const Sample<A> s = deform_conv2d::SampleAt<T, A>(
        g.a, g.in, g.off, g.msk, offset, mask, image, pixel, pixel / g.a.wo,
        pixel % g.a.wo, k, offset_group, &m);
    r.image = image * g.in.n;
    r.dy = image * g.out.n + pixel * g.out.y;
    for (int q = 0; q < 4; ++q) {
      r.offset[q] = s.offset[q];
      r.weight[q] = s.weight[q];
      r.valid[q] = s.valid[q];
    }
    r.m = m;
    r.ly = s.ly;
    r.lx = s.lx;
    r.nan = s.nan;
    r.near = s.near;
    r.inside = s.inside;
    r.real = true;
  }
  *out = r;
}

// The column entry of a sample for the channel at `in`: m * its bilinear
// value (valid corners in torchvision's order), NaN for a NaN coordinate,
// as the CPU kernels' im2col.
template <typename T, typename A>
__device__ A ColumnValue(const SharedSample<A>& s, const T* in) {
  if (s.nan) return Eigen::NumTraits<A>::quiet_NaN();
  A v = A(0);
  if (s.inside) {
    for (int q = 0; q < 4; ++q) {
      if (s.valid[q]) v += s.weight[q] * static_cast<A>(in[s.offset[q]]);
    }
  }
  return s.m * v;
}

// x[i] = p[i], i < 4, from 16-byte aligned shared memory.
__device__ void Load4(const float* p, float (&x)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  x[0] = v.x;
  x[1] = v.y;
  x[2] = v.z;
  x[3] = v.w;
}
__device__ void Load4(const double* p, double (&x)[4]) {
  const double2 v = reinterpret_cast<const double2*>(p)[0];
  const double2 w = reinterpret_cast<const double2*>(p)[1];
  x[0] = v.x;
  x[1] = v.y;
  x[2] = w.x;
  x[3] = w.y;
}

// acc[i][j] += sum over the step's r < n of a[r][RowOf(i)] *
// b[r][ColumnOf<kAdjacent>(j)], r in order.
template <bool kAdjacent, typename A, int kRowsA, int kRowsB>
__device__ void MultiplyStep(const A (&a)[kRowsA][kTile + kPad],
                             const A (&b)[kRowsB][kTile + kPad], int n,
                             A (&acc)[kPerThread][kPerThread]) {
  for (int r = 0; r < n; ++r) {
    A x[kPerThread], y[kPerThread];
    Load4(&a[r][RowOf(0)], x);
    if (kAdjacent) {
      Load4(&b[r][ColumnOf<true>(0)], y);
    } else {
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) y[j] = b[r][ColumnOf<false>(j)];
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) acc[i][j] += x[i] * y[j];
    }
  }
}

// Block (x, y): kTile pixels from x * kTile by kTile output channels of one
// group (y = group * tiles + tile); the inner dimension walks taps, then the
// group's channels, `step` at a time.
template <typename T, bool kNchw>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const Geometry g, const T* __restrict__ input,
                  const T* __restrict__ filter, const T* __restrict__ offset,
                  const T* __restrict__ mask, T* __restrict__ output) {
  typedef functor::DeformConvAccumulator<T> A;
  __shared__ SharedSample<A> samples[kTile];
  __shared__ __align__(16) A columns[kStep][kTile + kPad];  // [channel][pixel]
  // [channel][output channel]
  __shared__ __align__(16) A weights[kStep][kTile + kPad];
  const int64_t p0 = blockIdx.x * int64_t{kTile};
  const int64_t tiles = (g.og + kTile - 1) / kTile;
  const int64_t group = blockIdx.y / tiles;
  const int64_t oc0 = group * g.og + (blockIdx.y % tiles) * kTile;
  const int64_t oc_end = (group + 1) * g.og;
  const int step = static_cast<int>(g.step);
  A acc[kPerThread][kPerThread] = {};
  for (int64_t k = 0; k < g.taps; ++k) {
    for (int64_t ci0 = 0; ci0 < g.cg; ci0 += step) {
      const int64_t c0 = group * g.cg + ci0;
      if (ci0 == 0 || c0 % g.cog == 0) {
        if (threadIdx.x < kTile) {
          LoadSample(g, offset, mask, p0 + threadIdx.x, k, c0 / g.cog,
                     &samples[threadIdx.x]);
        }
        __syncthreads();
      }
      for (int e = threadIdx.x; e < step * kTile; e += kThreads) {
        // Neighbouring threads read neighbouring channels (NHWC) or pixels.
        const int ci = kNchw ? e / kTile : e % step;
        const int p = kNchw ? e % kTile : e / step;
        const SharedSample<A>& s = samples[p];
        columns[ci][p] =
            ColumnValue<T, A>(s, input + s.image + (c0 + ci) * g.in.c);
      }
      for (int e = threadIdx.x; e < step * kTile; e += kThreads) {
        const int ci = e / kTile, j = e % kTile;
        weights[ci][j] =
            oc0 + j < oc_end
                ? static_cast<A>(
                      filter[(k * g.cg + ci0 + ci) * g.a.o + oc0 + j])
                : A(0);
      }
      __syncthreads();
      MultiplyStep<true>(columns, weights, step, acc);
      __syncthreads();
    }
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t p = p0 + RowOf(i);
    if (p >= g.pixels) continue;
    T* out = output + (p / g.plane) * g.out.n + (p % g.plane) * g.out.y;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t oc = oc0 + ColumnOf<true>(j);
      if (oc < oc_end) out[oc * g.out.c] = static_cast<T>(acc[i][j]);
    }
  }
}

// Block (x, y, z): filter elements of tap k = z % taps, group z / taps, `tile`
// channels from y * tile within the group by kTile output channels from
// (x % tiles) * kTile, where tiles covers the group's output channels; the
// inner dimension walks the pixels of all images from (x / tiles) * chunk,
// `chunk` of them (a multiple of kStep), kStep at a time. Where one chunk
// does not hold every pixel, the block adds its sums with atomics to
// grad_filter, zeroed before.
template <typename T, bool kNchw>
__global__ void __launch_bounds__(kThreads)
    FilterGradKernel(const Geometry g, const int64_t chunk,
                     const T* __restrict__ input, const T* __restrict__ offset,
                     const T* __restrict__ mask,
                     const T* __restrict__ grad_output,
                     T* __restrict__ grad_filter) {
  typedef functor::DeformConvAccumulator<T> A;
  __shared__ SharedSample<A> samples[kStep];
  __shared__ __align__(16) A columns[kStep][kTile + kPad];  // [pixel][channel]
  __shared__ __align__(16)
      A dys[kStep][kTile + kPad];  // [pixel][output channel]
  const int64_t k = blockIdx.z % g.taps, group = blockIdx.z / g.taps;
  const int64_t ci0 = blockIdx.y * g.tile, c0 = group * g.cg + ci0;
  const int64_t tiles = (g.og + kTile - 1) / kTile;
  const int64_t oc0 = group * g.og + (blockIdx.x % tiles) * kTile;
  const int64_t oc_end = (group + 1) * g.og;
  const int64_t begin = (blockIdx.x / tiles) * chunk;
  const int64_t end = begin + chunk < g.pixels ? begin + chunk : g.pixels;
  const bool atomic = chunk < g.pixels;
  const int tile = static_cast<int>(g.tile);
  A acc[kPerThread][kPerThread] = {};
  for (int64_t p0 = begin; p0 < end; p0 += kStep) {
    if (threadIdx.x < kStep) {
      LoadSample(g, offset, mask, p0 + threadIdx.x, k, c0 / g.cog,
                 &samples[threadIdx.x]);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kStep * kTile; e += kThreads) {
      // Channel ci of the tile, and output channel ci of the block;
      // neighbouring threads read neighbouring channels (NHWC) or pixels.
      const int ci = kNchw ? e / kStep : e % kTile;
      const int p = kNchw ? e % kStep : e / kTile;
      const SharedSample<A>& s = samples[p];
      columns[p][ci] =
          ci < tile ? ColumnValue<T, A>(s, input + s.image + (c0 + ci) * g.in.c)
                    : A(0);
      dys[p][ci] =
          s.real && oc0 + ci < oc_end
              ? static_cast<A>(grad_output[s.dy + (oc0 + ci) * g.out.c])
              : A(0);
    }
    __syncthreads();
    MultiplyStep<true>(columns, dys, kStep, acc);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int ci = RowOf(i);
    if (ci >= tile) continue;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t oc = oc0 + ColumnOf<true>(j);
      if (oc >= oc_end) continue;
      T* at = grad_filter + (k * g.cg + ci0 + ci) * g.a.o + oc;
      if (atomic) {
        GpuAtomicAdd(at, static_cast<T>(acc[i][j]));
      } else {
        *at = static_cast<T>(acc[i][j]);
      }
    }
  }
}

// Block (x, y): kTile pixels from x * kTile, tap k = y % taps of offset group
// y / taps. For each `tile` of the offset group's channels it multiplies
// grad_output by the filter into dcol (output channels kStep at a time),
// adds m * dcol * each corner's weight to the input gradient, and adds the
// tile's share of the offset and mask gradients to per-pixel sums: each
// thread over its channels, then across its 16-thread row with shuffles in a
// fixed pattern.
template <typename T, bool kNchw>
__global__ void __launch_bounds__(kThreads)
    ColumnGradKernel(const Geometry g, const T* __restrict__ input,
                     const T* __restrict__ filter, const T* __restrict__ offset,
                     const T* __restrict__ mask,
                     const T* __restrict__ grad_output,
                     T* __restrict__ grad_input, T* __restrict__ grad_offset,
                     T* __restrict__ grad_mask) {
  typedef functor::DeformConvAccumulator<T> A;
  __shared__ SharedSample<A> samples[kTile];
  __shared__ __align__(16)
      A dys[kStep][kTile + kPad];  // [output channel][pixel]
  // [output channel][channel]
  __shared__ __align__(16) A weights[kStep][kTile + kPad];
  const int tx = threadIdx.x % kSide;
  const int64_t p0 = blockIdx.x * int64_t{kTile};
  const int64_t k = blockIdx.y % g.taps, offset_group = blockIdx.y / g.taps;
  const int tile = static_cast<int>(g.tile);
  if (threadIdx.x < kTile) {
    LoadSample(g, offset, mask, p0 + threadIdx.x, k, offset_group,
               &samples[threadIdx.x]);
  }
  __syncthreads();
  // Per pixel RowOf(i): the offset (y, x) and mask gradient sums, kept by
  // the row's thread tx = 0.
  A sums[kPerThread][3] = {};
  for (int64_t c0 = offset_group * g.cog; c0 < (offset_group + 1) * g.cog;
       c0 += tile) {
    const int64_t group = c0 / g.cg, ci0 = c0 % g.cg;
    A acc[kPerThread][kPerThread] = {};
    for (int64_t oc0 = group * g.og; oc0 < (group + 1) * g.og; oc0 += kStep) {
      const int64_t left = (group + 1) * g.og - oc0;
      const int n = static_cast<int>(left < kStep ? left : kStep);
      for (int e = threadIdx.x; e < kStep * kTile; e += kThreads) {
        // Neighbouring threads read neighbouring output channels (NHWC) or
        // pixels of grad_output.
        const int j = kNchw ? e / kTile : e % kStep;
        const int p = kNchw ? e % kTile : e / kStep;
        const SharedSample<A>& s = samples[p];
        dys[j][p] =
            s.real && j < n
                ? static_cast<A>(grad_output[s.dy + (oc0 + j) * g.out.c])
                : A(0);
        const int ci = p;  // the same loop bounds serve the filter's tile
        weights[j][ci] =
            ci < tile && j < n
                ? static_cast<A>(
                      filter[(k * g.cg + ci0 + ci) * g.a.o + oc0 + j])
                : A(0);
      }
      __syncthreads();
      MultiplyStep<false>(dys, weights, n, acc);
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const SharedSample<A>& s = samples[RowOf(i)];
      A part[3] = {};
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int ci = ColumnOf<false>(j);
        if (!s.real || ci >= tile || !s.near || s.nan) continue;
        const int64_t at = s.image + (c0 + ci) * g.in.c;
        const A dc = acc[i][j];
        A v[4];
        for (int q = 0; q < 4; ++q) {
          v[q] = s.valid[q] ? static_cast<A>(input[at + s.offset[q]]) : A(0);
        }
        part[0] += (s.lx * (v[3] - v[1]) + (A(1) - s.lx) * (v[2] - v[0])) * dc;
        part[1] += (s.ly * (v[3] - v[2]) + (A(1) - s.ly) * (v[1] - v[0])) * dc;
        if (!s.inside) continue;
        part[2] += (s.weight[0] * v[0] + s.weight[1] * v[1] +
                    s.weight[2] * v[2] + s.weight[3] * v[3]) *
                   dc;
        const A dcol = s.m * dc;
        for (int q = 0; q < 4; ++q) {
          // torchvision's col2im skips corners of weight 0.
          if (s.valid[q] && s.weight[q] > A(0)) {
            GpuAtomicAdd(grad_input + at + s.offset[q],
                         static_cast<T>(s.weight[q] * dcol));
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        for (int lane = kSide / 2; lane > 0; lane /= 2) {
          part[r] += __shfl_xor_sync(0xffffffff, part[r], lane, kSide);
        }
        sums[i][r] += part[r];
      }
    }
  }
  if (tx != 0) return;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const SharedSample<A>& s = samples[RowOf(i)];
    if (!s.real) continue;
    const int64_t p = p0 + RowOf(i);
    const int64_t image = p / g.plane, pixel = p % g.plane;
    const int64_t tap = offset_group * g.taps + k;
    const A nan = Eigen::NumTraits<A>::quiet_NaN();
    T* go = grad_offset + image * g.off.n + pixel * g.off.y;
    go[2 * tap * g.off.c] = static_cast<T>(s.nan ? nan : s.m * sums[i][0]);
    go[(2 * tap + 1) * g.off.c] =
        static_cast<T>(s.nan ? nan : s.m * sums[i][1]);
    if (g.a.use_mask) {
      grad_mask[image * g.msk.n + pixel * g.msk.y + tap * g.msk.c] =
          static_cast<T>(s.nan ? nan : sums[i][2]);
    }
  }
}

// Calls launch(std::bool_constant<nchw>()): the kernels' tile fills pick
// their thread order by layout at compile time.
template <typename F>
void WithLayout(const TfcoDeformConv2dArgs& args, F&& launch) {
  if (args.nchw) {
    launch(std::true_type());
  } else {
    launch(std::false_type());
  }
}

unsigned Blocks(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace

namespace functor {

template <typename T>
struct DeformableConv2d<GPUDevice, T> {
  void operator()(const GPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, T* output) {
    const Geometry g = MakeGeometry(args);
    if (g.pixels == 0 || args.o == 0) return;
    WithLayout(args, [&](auto nchw) {
      LaunchGpuKernel(
          ForwardKernel<T, decltype(nchw)::value>,
          dim3(Blocks(g.pixels, kTile),
               static_cast<unsigned>(args.groups) * Blocks(g.og, kTile)),
          dim3(kThreads), d, g, input, filter, offset, mask, output);
    });
  }
};

template <typename T>
struct DeformableConv2dGrad<GPUDevice, T> {
  void operator()(const GPUDevice& d, const TfcoDeformConv2dArgs& args,
                  const T* input, const T* filter, const T* offset,
                  const T* mask, const T* grad_output, T* grad_input,
                  T* grad_filter, T* grad_offset, T* grad_mask) {
    const Geometry g = MakeGeometry(args);
    const int64_t taps = args.offset_groups * g.taps;
    ZeroGpuMemory(d, grad_input, args.n * args.h * args.w * args.c * sizeof(T));
    if (g.pixels == 0 || args.o == 0) {
      // Nothing flows back: an empty batch or output, or no filters.
      ZeroGpuMemory(d, grad_filter, g.taps * g.cg * args.o * sizeof(T));
      ZeroGpuMemory(d, grad_offset, g.pixels * 2 * taps * sizeof(T));
      if (args.use_mask) {
        ZeroGpuMemory(d, grad_mask, g.pixels * taps * sizeof(T));
      }
      return;
    }
    WithLayout(args, [&](auto nchw) {
      LaunchGpuKernel(
          ColumnGradKernel<T, decltype(nchw)::value>,
          dim3(Blocks(g.pixels, kTile), static_cast<unsigned>(taps)),
          dim3(kThreads), d, g, input, filter, offset, mask, grad_output,
          grad_input, grad_offset, grad_mask);
      const auto kernel = FilterGradKernel<T, decltype(nchw)::value>;
      const int64_t tiles = Blocks(g.og, kTile);
      const int64_t steps = Blocks(g.pixels, kStep);
      int64_t per_block = steps;
      if (std::is_same<T, functor::DeformConvAccumulator<T>>::value) {
        // Enough chunks of the pixels for about four grids of the blocks
        // the GPU holds at once, so that the last grid's tail is short.
        int resident = 1;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &resident, kernel, kThreads, 0) != cudaSuccess) {
          resident = 1;
        }
        const int64_t target =
            int64_t{4} * d.getNumGpuMultiProcessors() * std::max(1, resident);
        const int64_t blocks = tiles * (g.cg / g.tile) * g.taps * args.groups;
        const int64_t chunks =
            std::min(steps, std::max<int64_t>(1, target / blocks));
        per_block = (steps + chunks - 1) / chunks;
      }
      const int64_t chunks = (steps + per_block - 1) / per_block;
      if (chunks > 1) {
        ZeroGpuMemory(d, grad_filter, g.taps * g.cg * args.o * sizeof(T));
      }
      LaunchGpuKernel(kernel,
                      dim3(static_cast<unsigned>(tiles * chunks),
                           static_cast<unsigned>(g.cg / g.tile),
                           static_cast<unsigned>(g.taps * args.groups)),
                      dim3(kThreads), d, g, per_block * kStep, input, offset,
                      mask, grad_output, grad_filter);
    });
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
