// CPU kernels of CustomOps>ClipByGlobalNorm and CustomOps>ClipByGlobalNormGrad.

#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensorflow_customops/core/kernels/clip_by_global_norm/clip_by_global_norm_op.h"
#include "tensorflow_customops/core/kernels/portable/cpu_simd.h"

namespace tensorflow {
namespace customops {

namespace functor {
namespace {

// The elements of all the tensors, taken in order as one sequence, are cut
// into chunks of kChunkSize (the last one shorter); a chunk can span many
// small tensors. Chunks fix the summation order by the sizes alone, so sums
// do not depend on the number of threads, and they keep per-task overhead low
// where a model has hundreds of small tensors.
constexpr int64_t kChunkSize = 1 << 14;

struct Piece {
  int tensor;
  int64_t begin;
  int64_t end;
};

class Chunks {
 public:
  // t: a ConstFlatList.
  template <typename FlatList>
  explicit Chunks(const FlatList& t) {
    first_piece_.push_back(0);
    int64_t filled = 0;
    for (int i = 0; i < static_cast<int>(t.size()); ++i) {
      for (int64_t begin = 0; begin < t[i].size();) {
        if (filled == kChunkSize) {
          first_piece_.push_back(pieces_.size());
          filled = 0;
        }
        const int64_t end = std::min(t[i].size(), begin + kChunkSize - filled);
        pieces_.push_back({i, begin, end});
        filled += end - begin;
        begin = end;
      }
    }
    first_piece_.push_back(pieces_.size());
  }

  int64_t size() const { return first_piece_.size() - 1; }

  // Sum over the pieces of `chunk`, in order, of piece_sum(piece).
  template <typename PieceSum>
  double Sum(int64_t chunk, PieceSum piece_sum) const {
    double sum = 0;
    ForEachPiece(chunk, [&](const Piece& piece) { sum += piece_sum(piece); });
    return sum;
  }

  template <typename Fn>
  void ForEachPiece(int64_t chunk, Fn fn) const {
    for (int64_t k = first_piece_[chunk]; k < first_piece_[chunk + 1]; ++k) {
      fn(pieces_[k]);
    }
  }

 private:
  std::vector<Piece> pieces_;
  std::vector<int64_t> first_piece_;  // of each chunk, and one past the last
};

// Runs fn(chunk) for every chunk: one contiguous range of chunks per thread,
// none for fewer than kMinChunksPerThread chunks, where waking the pool costs
// more than the work. Within a range, chunks go forwards or, with `reverse`,
// backwards. The second pass over the data runs in reverse, so that each
// thread starts with the chunks it read last, which are likely still in its
// cache (CPUDevice::parallelFor runs the first range on the calling thread both
// times). Which thread runs a chunk never changes the result.
constexpr int64_t kMinChunksPerThread = 4;

template <typename T, typename Fn>
void ForEachChunk(const CPUDevice& d, int64_t chunks, bool reverse, Fn fn) {
  const auto run_range = [&](int64_t begin, int64_t end) {
    if (reverse) {
      for (int64_t c = end; c-- > begin;) fn(c);
    } else {
      for (int64_t c = begin; c < end; ++c) fn(c);
    }
  };
  const int64_t ranges =
      std::min<int64_t>(d.numThreads(), chunks / kMinChunksPerThread);
  if (ranges <= 1) {
    run_range(0, chunks);
    return;
  }
  const double elements_per_range =
      static_cast<double>(chunks) * kChunkSize / static_cast<double>(ranges);
  d.parallelFor(
      ranges,
      Eigen::TensorOpCost(elements_per_range * sizeof(T),
                          elements_per_range * sizeof(T), elements_per_range),
      [&](Eigen::Index first, Eigen::Index last) {
        for (Eigen::Index r = first; r < last; ++r) {
          run_range(chunks * r / ranges, chunks * (r + 1) / ranges);
        }
      });
}

// Sum of term(j) over [0, n) in a fixed order: kLanes accumulators, so that
// consecutive additions do not wait on each other and the loop vectorises,
// added pairwise at the end.
constexpr int kLanes = 16;

template <typename Term>
inline double LaneSum(int64_t n, Term term) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) acc[lane] += term(j + lane);
  }
  for (; j < n; ++j) acc[0] += term(j);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int lane = 0; lane < width; ++lane) acc[lane] += acc[lane + width];
  }
  return acc[0];
}

// The loops over the elements. Sums are taken in double.
template <typename T>
double SumOfSquares(const T* x, int64_t n) {
  return LaneSum(n, [x](int64_t j) {
    const double v = static_cast<double>(x[j]);
    return v * v;
  });
}

template <typename T>
double Dot(const T* x, const T* y, int64_t n) {
  return LaneSum(n, [x, y](int64_t j) {
    return static_cast<double>(x[j]) * static_cast<double>(y[j]);
  });
}

template <typename T>
void Scale(const T* x, T scale, T* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale;
}

// dx = a * dy + b * x, in double.
template <typename T>
void Grad(const T* dy, double a, const T* x, double b, T* dx, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    dx[j] = static_cast<T>(a * static_cast<double>(dy[j]) +
                           b * static_cast<double>(x[j]));
  }
}

// Overloads for float and double, preferred to the templates, which they
// inline once per clone: AVX-512, AVX2 and the baseline (cpu_simd.h).
// clip_by_global_norm_op_test checks the sum against an emulation of the
// loops' order.
#define DEFINE_CLONED_LOOPS(T)                                            \
  TFCO_SIMD_CLONES double SumOfSquares(const T* x, int64_t n) {           \
    return SumOfSquares<T>(x, n);                                         \
  }                                                                       \
  TFCO_SIMD_CLONES double Dot(const T* x, const T* y, int64_t n) {        \
    return Dot<T>(x, y, n);                                               \
  }                                                                       \
  TFCO_SIMD_CLONES void Scale(const T* x, T scale, T* y, int64_t n) {     \
    Scale<T>(x, scale, y, n);                                             \
  }                                                                       \
  TFCO_SIMD_CLONES void Grad(const T* dy, double a, const T* x, double b, \
                             T* dx, int64_t n) {                          \
    Grad<T>(dy, a, x, b, dx, n);                                          \
  }
DEFINE_CLONED_LOOPS(float)
DEFINE_CLONED_LOOPS(double)
#undef DEFINE_CLONED_LOOPS

// Adds the per-chunk partial sums in chunk order.
double OrderedSum(const std::vector<double>& partials) {
  double sum = 0;
  for (double p : partials) sum += p;
  return sum;
}

}  // namespace

template <typename T>
struct ClipByGlobalNorm<CPUDevice, T> {
  static int64_t ScratchBytes(int64_t) { return 0; }

  void operator()(const CPUDevice& d, const ConstFlatList<T>& t, T clip_norm,
                  const FlatList<T>& clipped,
                  typename TTypes<T>::Scalar global_norm, void*) {
    const Chunks chunks(t);
    std::vector<double> partials(chunks.size());
    ForEachChunk<T>(d, chunks.size(), false, [&](int64_t c) {
      partials[c] = chunks.Sum(c, [&](const Piece& piece) {
        return SumOfSquares(t[piece.tensor].data() + piece.begin,
                            piece.end - piece.begin);
      });
    });
    const T norm = static_cast<T>(std::sqrt(OrderedSum(partials)));
    global_norm() = norm;
    const T scale = ClipScale(norm, clip_norm);
    ForEachChunk<T>(d, chunks.size(), true, [&](int64_t c) {
      chunks.ForEachPiece(c, [&](const Piece& piece) {
        Scale(t[piece.tensor].data() + piece.begin, scale,
              clipped[piece.tensor].data() + piece.begin,
              piece.end - piece.begin);
      });
    });
  }
};

template <typename T>
struct ClipByGlobalNormGrad<CPUDevice, T> {
  static int64_t ScratchBytes(int64_t) { return 0; }

  void operator()(const CPUDevice& d, const ConstFlatList<T>& t, T clip_norm,
                  const ConstFlatList<T>& dclipped,
                  typename TTypes<T>::ConstScalar dglobal_norm,
                  const FlatList<T>& dt, typename TTypes<T>::Scalar dclip_norm,
                  void*) {
    const Chunks chunks(t);
    std::vector<double> squares(chunks.size());
    std::vector<double> dots(chunks.size());
    ForEachChunk<T>(d, chunks.size(), false, [&](int64_t c) {
      squares[c] = chunks.Sum(c, [&](const Piece& piece) {
        return SumOfSquares(t[piece.tensor].data() + piece.begin,
                            piece.end - piece.begin);
      });
      dots[c] = chunks.Sum(c, [&](const Piece& piece) {
        return Dot(t[piece.tensor].data() + piece.begin,
                   dclipped[piece.tensor].data() + piece.begin,
                   piece.end - piece.begin);
      });
    });
    const ClipGradCoefficients coef = ClipGrad(
        OrderedSum(squares), OrderedSum(dots), static_cast<double>(clip_norm),
        static_cast<double>(dglobal_norm()));
    dclip_norm() = static_cast<T>(coef.dclip_norm);
    ForEachChunk<T>(d, chunks.size(), true, [&](int64_t c) {
      chunks.ForEachPiece(c, [&](const Piece& piece) {
        Grad(dclipped[piece.tensor].data() + piece.begin, coef.scale,
             t[piece.tensor].data() + piece.begin, coef.x_coef,
             dt[piece.tensor].data() + piece.begin, piece.end - piece.begin);
      });
    });
  }
};

#define DEFINE_CPU_SPEC(T)                        \
  template struct ClipByGlobalNorm<CPUDevice, T>; \
  template struct ClipByGlobalNormGrad<CPUDevice, T>;
TFCO_CALL_FLOAT_TYPES(DEFINE_CPU_SPEC)
#undef DEFINE_CPU_SPEC

}  // namespace functor
}  // namespace customops
}  // namespace tensorflow
