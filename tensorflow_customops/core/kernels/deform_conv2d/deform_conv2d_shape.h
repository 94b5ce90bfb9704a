// DeformableConv2d's attrs and shape checks, shared by its shape functions,
// its kernels and its XLA lowering, so that each rejects a bad call with the
// same message. Dims are int64 with -1 for unknown (the shape functions'
// kUnknownDim); a check runs where its dims are known.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_SHAPE_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_SHAPE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/util/overflow.h"
#include "tensorflow_customops/core/kernels/deform_conv2d/deform_conv2d_op.h"

namespace tensorflow {
namespace customops {
namespace deform_conv2d {

enum class Padding { kValid, kSame, kExplicit };

struct Attrs {
  int64_t stride_h, stride_w, dilation_h, dilation_w;
  Padding padding;
  // Explicit padding only.
  int64_t pad_top, pad_bottom, pad_left, pad_right;
  int64_t offset_groups;  // 0: read from offset's channels
  bool nchw;
  bool use_mask;
};

// Dims in (N, H, W, C) order from a rank-4 tensor in the attrs' layout.
inline std::array<int64_t, 4> Nhwc(const std::array<int64_t, 4>& dims,
                                   bool nchw) {
  return nchw ? std::array<int64_t, 4>{dims[0], dims[2], dims[3], dims[1]}
              : dims;
}

// The (height, width) entries of a 4-entry attr list in data_format order,
// whose batch and channel entries must be 1.
inline Status SpatialPair(const std::vector<int32_t>& list, const char* name,
                          bool nchw, int64_t* h, int64_t* w) {
  if (list.size() != 4) {
    return errors::InvalidArgument("DeformableConv2d: ", name,
                                   " must have 4 entries (data_format order), "
                                   "got ",
                                   list.size());
  }
  const int c = nchw ? 1 : 3;
  if (list[0] != 1 || list[c] != 1) {
    return errors::InvalidArgument(
        "DeformableConv2d: ", name,
        " must be 1 in the batch and channel dimensions, got [", list[0], ", ",
        list[1], ", ", list[2], ", ", list[3], "]");
  }
  *h = list[nchw ? 2 : 1];
  *w = list[nchw ? 3 : 2];
  if (*h < 1 || *w < 1) {
    return errors::InvalidArgument("DeformableConv2d: ", name,
                                   " must be positive, got ", *h, " and ", *w);
  }
  return OkStatus();
}

// Reads and checks the attrs; Context is an InferenceContext or an
// OpKernelConstruction (anything with GetAttr).
template <typename Context>
Status GetAttrs(Context* c, Attrs* a) {
  std::string data_format, padding;
  TF_RETURN_IF_ERROR(c->GetAttr("data_format", &data_format));
  a->nchw = data_format == "NCHW";
  std::vector<int32_t> strides, dilations;
  TF_RETURN_IF_ERROR(c->GetAttr("strides", &strides));
  TF_RETURN_IF_ERROR(c->GetAttr("dilations", &dilations));
  TF_RETURN_IF_ERROR(
      SpatialPair(strides, "strides", a->nchw, &a->stride_h, &a->stride_w));
  TF_RETURN_IF_ERROR(SpatialPair(dilations, "dilations", a->nchw,
                                 &a->dilation_h, &a->dilation_w));
  TF_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  a->padding = padding == "SAME"    ? Padding::kSame
               : padding == "VALID" ? Padding::kValid
                                    : Padding::kExplicit;
  std::vector<int32_t> pads;
  TF_RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &pads));
  a->pad_top = a->pad_bottom = a->pad_left = a->pad_right = 0;
  if (a->padding == Padding::kExplicit) {
    if (pads.size() != 8) {
      return errors::InvalidArgument(
          "DeformableConv2d: explicit_paddings must have 8 entries (before "
          "and after each dimension, data_format order) with EXPLICIT "
          "padding, got ",
          pads.size());
    }
    const int c_dim = a->nchw ? 1 : 3;
    for (int i = 0; i < 8; ++i) {
      if (pads[i] < 0) {
        return errors::InvalidArgument(
            "DeformableConv2d: explicit_paddings must be non-negative, got ",
            pads[i]);
      }
    }
    if (pads[0] != 0 || pads[1] != 0 || pads[2 * c_dim] != 0 ||
        pads[2 * c_dim + 1] != 0) {
      return errors::InvalidArgument(
          "DeformableConv2d: explicit_paddings must be 0 in the batch and "
          "channel dimensions");
    }
    const int h = a->nchw ? 2 : 1, w = a->nchw ? 3 : 2;
    a->pad_top = pads[2 * h];
    a->pad_bottom = pads[2 * h + 1];
    a->pad_left = pads[2 * w];
    a->pad_right = pads[2 * w + 1];
  } else if (!pads.empty()) {
    return errors::InvalidArgument(
        "DeformableConv2d: explicit_paddings must be empty unless padding is "
        "EXPLICIT, got ",
        pads.size(), " entries");
  }
  int32_t offset_groups;
  TF_RETURN_IF_ERROR(c->GetAttr("offset_groups", &offset_groups));
  if (offset_groups < 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: offset_groups must be positive, or 0 to read it "
        "from offset's channels, got ",
        offset_groups);
  }
  a->offset_groups = offset_groups;
  TF_RETURN_IF_ERROR(c->GetAttr("use_mask", &a->use_mask));
  return OkStatus();
}

// Output size and padding before along one spatial dim, as Conv2D computes
// them for SAME and VALID, and from the explicit padding otherwise. `in` and
// `k` are known.
inline Status OutputSize(int64_t in, int64_t k, int64_t dilation,
                         int64_t stride, Padding padding, int64_t before,
                         int64_t after, const char* dim, int64_t* out,
                         int64_t* pad_before) {
  const int64_t window = MultiplyWithoutOverflow(k - 1, dilation);
  if (window < 0 || window > (int64_t{1} << 40)) {
    return errors::InvalidArgument("DeformableConv2d: the dilated filter ", dim,
                                   " (", k, " taps, dilation ", dilation,
                                   ") is too large");
  }
  const int64_t effective = window + 1;
  if (padding == Padding::kSame) {
    *out = (in + stride - 1) / stride;
    const int64_t total =
        std::max<int64_t>((*out - 1) * stride + effective - in, 0);
    *pad_before = total / 2;
    return OkStatus();
  }
  const int64_t padded = in + before + after;
  if (padded < 0 || padded - effective + stride < 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: the ", dim, " of the padded input (", padded,
        ") is less than the dilated filter's (", effective, ")");
  }
  *out = (padded - effective + stride) / stride;
  *pad_before = padding == Padding::kExplicit ? before : 0;
  return OkStatus();
}

// Everything the kernels need, from the inputs' dims; -1 where unknown.
struct Geometry {
  int64_t n, h, w, c, kh, kw, o, groups, offset_groups, ho, wo, pad_top,
      pad_left;
};

inline std::string Dims(const std::array<int64_t, 4>& d) {
  std::string s = "[";
  for (int i = 0; i < 4; ++i) {
    s += (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
    s += i < 3 ? ", " : "]";
  }
  return s;
}

// Checks one dim of a tensor against what it must be (both may be unknown)
// and returns the known one of the two. The message names the dim and where
// the wanted size comes from: "offset [2, 5, 5, 18] must have batch size 1
// (the input's), got 2".
inline Status Match(int64_t* want, int64_t got, const char* tensor,
                    const char* dim, const char* source,
                    const std::array<int64_t, 4>& dims) {
  if (got >= 0 && *want >= 0 && got != *want) {
    return errors::InvalidArgument("DeformableConv2d: ", tensor, " ",
                                   Dims(dims), " must have ", dim, " ", *want,
                                   " (", source, "), got ", got);
  }
  if (*want < 0) *want = got;
  return OkStatus();
}

// input, offset, mask in the attrs' layout; filter HWIO. mask is ignored
// unless use_mask. Checks every known dim and fills `g`.
inline Status GetGeometry(const Attrs& a, const std::array<int64_t, 4>& input,
                          const std::array<int64_t, 4>& filter,
                          const std::array<int64_t, 4>& offset,
                          const std::array<int64_t, 4>& mask, Geometry* g) {
  const auto x = Nhwc(input, a.nchw);
  g->n = x[0];
  g->h = x[1];
  g->w = x[2];
  g->c = x[3];
  g->kh = filter[0];
  g->kw = filter[1];
  g->o = filter[3];
  const int64_t filter_in = filter[2];
  if (g->kh == 0 || g->kw == 0 || filter_in == 0) {
    return errors::InvalidArgument(
        "DeformableConv2d: filter ", Dims(filter),
        " must have positive height, width and input channels");
  }
  g->groups = -1;
  if (g->c == 0) {
    return errors::InvalidArgument("DeformableConv2d: input ", Dims(input),
                                   " must have channels");
  }
  if (g->c > 0 && filter_in > 0) {
    if (g->c % filter_in != 0) {
      return errors::InvalidArgument(
          "DeformableConv2d: input channels (", g->c,
          ") must be a multiple of filter's input channels (", filter_in,
          "): groups = input channels / filter input channels");
    }
    g->groups = g->c / filter_in;
    if (g->o >= 0 && g->o % g->groups != 0) {
      return errors::InvalidArgument(
          "DeformableConv2d: filter's output channels (", g->o,
          ") must be a multiple of groups (", g->groups, ")");
    }
  }
  g->ho = g->wo = -1;
  g->pad_top = a.pad_top;
  g->pad_left = a.pad_left;
  if (g->h >= 0 && g->kh >= 0) {
    TF_RETURN_IF_ERROR(OutputSize(g->h, g->kh, a.dilation_h, a.stride_h,
                                  a.padding, a.pad_top, a.pad_bottom, "height",
                                  &g->ho, &g->pad_top));
  }
  if (g->w >= 0 && g->kw >= 0) {
    TF_RETURN_IF_ERROR(OutputSize(g->w, g->kw, a.dilation_w, a.stride_w,
                                  a.padding, a.pad_left, a.pad_right, "width",
                                  &g->wo, &g->pad_left));
  }
  // offset: [N, Ho, Wo, 2 * offset_groups * kh * kw] (NCHW: channels second).
  const auto off = Nhwc(offset, a.nchw);
  int64_t kernel_taps = -1;
  if (g->kh >= 0 && g->kw >= 0) {
    kernel_taps = MultiplyWithoutOverflow(g->kh, g->kw);
    if (kernel_taps < 0 || kernel_taps > (int64_t{1} << 60)) {
      return errors::InvalidArgument("DeformableConv2d: filter ", Dims(filter),
                                     " has too many taps");
    }
  }
  g->offset_groups = a.offset_groups;
  if (g->offset_groups == 0) {
    g->offset_groups = -1;
    if (off[3] >= 0 && kernel_taps >= 0) {
      if (off[3] == 0 || off[3] % (2 * kernel_taps) != 0) {
        return errors::InvalidArgument(
            "DeformableConv2d: offset ", Dims(offset),
            " must have a positive multiple of 2 * kh * kw = ", 2 * kernel_taps,
            " channels (2 * offset_groups * kh * kw)");
      }
      g->offset_groups = off[3] / (2 * kernel_taps);
    }
  }
  if (g->c > 0 && g->offset_groups > 0 && g->c % g->offset_groups != 0) {
    return errors::InvalidArgument("DeformableConv2d: input channels (", g->c,
                                   ") must be a multiple of offset_groups (",
                                   g->offset_groups, ")");
  }
  int64_t taps = -1;
  if (kernel_taps >= 0 && g->offset_groups > 0) {
    taps = MultiplyWithoutOverflow(kernel_taps, g->offset_groups);
    if (taps < 0 || MultiplyWithoutOverflow(taps, 2) < 0) {
      return errors::InvalidArgument(
          "DeformableConv2d: offset_groups * kernel taps overflows int64");
    }
  }
  int64_t offset_channels = taps < 0 ? -1 : 2 * taps;
  TF_RETURN_IF_ERROR(
      Match(&g->n, off[0], "offset", "batch size", "the input's", offset));
  TF_RETURN_IF_ERROR(
      Match(&g->ho, off[1], "offset", "height", "the output's", offset));
  TF_RETURN_IF_ERROR(
      Match(&g->wo, off[2], "offset", "width", "the output's", offset));
  TF_RETURN_IF_ERROR(Match(&offset_channels, off[3], "offset", "channel count",
                           "2 * offset_groups * kh * kw", offset));
  if (a.use_mask) {
    const auto m = Nhwc(mask, a.nchw);
    int64_t mask_channels = taps;
    TF_RETURN_IF_ERROR(
        Match(&g->n, m[0], "mask", "batch size", "the input's", mask));
    TF_RETURN_IF_ERROR(
        Match(&g->ho, m[1], "mask", "height", "the output's", mask));
    TF_RETURN_IF_ERROR(
        Match(&g->wo, m[2], "mask", "width", "the output's", mask));
    TF_RETURN_IF_ERROR(Match(&mask_channels, m[3], "mask", "channel count",
                             "offset_groups * kh * kw", mask));
  }
  return OkStatus();
}

// The output's dims in the attrs' layout.
inline std::array<int64_t, 4> OutputDims(const Attrs& a, const Geometry& g) {
  return a.nchw ? std::array<int64_t, 4>{g.n, g.o, g.ho, g.wo}
                : std::array<int64_t, 4>{g.n, g.ho, g.wo, g.o};
}

// Bound on one output pixel's column, C * kh * kw elements, so that the
// core's block arithmetic stays far from int64's limit.
constexpr int64_t kMaxColumn = int64_t{1} << 50;

// The portable kernels' arguments of a call whose geometry GetGeometry checked
// (all dims known), or an error where its column is too long for the core.
inline Status CoreArgs(const Attrs& attrs, const Geometry& g,
                       TfcoDeformConv2dArgs* args) {
  const int64_t column =
      MultiplyWithoutOverflow(MultiplyWithoutOverflow(g.kh, g.kw), g.c);
  if (column < 0 || column > kMaxColumn) {
    return errors::InvalidArgument(
        "DeformableConv2d: input channels * filter taps (", g.c, " * ", g.kh,
        " * ", g.kw, ") exceeds 2^50");
  }
  *args = TfcoDeformConv2dArgs{g.n,
                               g.h,
                               g.w,
                               g.c,
                               g.kh,
                               g.kw,
                               g.o,
                               g.ho,
                               g.wo,
                               attrs.stride_h,
                               attrs.stride_w,
                               attrs.dilation_h,
                               attrs.dilation_w,
                               g.pad_top,
                               g.pad_left,
                               g.groups,
                               g.offset_groups,
                               attrs.nchw ? 1 : 0,
                               attrs.use_mask ? 1 : 0};
  return OkStatus();
}

}  // namespace deform_conv2d
}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_DEFORM_CONV2D_SHAPE_H_
