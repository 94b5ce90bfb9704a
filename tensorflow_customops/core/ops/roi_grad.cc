// C++ gradients of the RoI ops, used through SymbolicGradient. Python autodiff
// uses the gradients registered in python/ops/roi_ops.py. The align kinds'
// boxes get their box gradient op's; the pooling kinds round boxes to whole
// pixels, so their output is piecewise constant in the coordinates and the
// boxes get zero.

#include <string>
#include <vector>

#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {

typedef FunctionDefHelper FDH;

namespace {

// The forward op's attrs, passed through to its gradient op.
std::vector<std::string> AttrDefs(bool has_sampling_ratio, bool has_aligned) {
  std::vector<std::string> attrs = {
      "T: {half, bfloat16, float, double}", "pooled_height: int",
      "pooled_width: int", "spatial_scale: float", "data_format: string"};
  if (has_sampling_ratio) attrs.push_back("sampling_ratio: int");
  if (has_aligned) attrs.push_back("aligned: bool");
  return attrs;
}

typedef std::vector<std::pair<std::string, FDH::AttrValueWrapper>> AttrList;

// The boxes' type: the forward's Tboxes, or float for SymbolicGradient nodes
// written before the ops had it.
Status BoxesDtype(const AttrSlice& attrs, DataType* boxes) {
  *boxes = DT_FLOAT;
  if (attrs.Find("Tboxes") == nullptr) return OkStatus();
  return GetNodeAttr(attrs, "Tboxes", boxes);
}

std::string RoisArg(const std::string& name, DataType boxes) {
  return name + ": " + DataTypeString(boxes);
}

AttrList AttrRefs(bool has_sampling_ratio, bool has_aligned) {
  AttrList refs = {{"T", "$T"},
                   {"pooled_height", "$pooled_height"},
                   {"pooled_width", "$pooled_width"},
                   {"spatial_scale", "$spatial_scale"},
                   {"data_format", "$data_format"}};
  if (has_sampling_ratio) refs.push_back({"sampling_ratio", "$sampling_ratio"});
  if (has_aligned) refs.push_back({"aligned", "$aligned"});
  return refs;
}

// d(features) from the gradient op fed (dpooled, rois, shape(features));
// d(rois) from the box gradient op fed (dpooled, features, rois), or zero
// where `box_grad_op` is empty. `fixed_attrs` are set on both as values rather
// than passed through; the boxes' type (`attrs`' Tboxes) is one of them.
Status BilinearOrAverageGrad(const AttrSlice& attrs, const std::string& grad_op,
                             const std::string& box_grad_op,
                             bool has_sampling_ratio, bool has_aligned,
                             const AttrList& fixed_attrs, FunctionDef* g) {
  DataType boxes;
  TF_RETURN_IF_ERROR(BoxesDtype(attrs, &boxes));
  AttrList grad_op_attrs = AttrRefs(has_sampling_ratio, has_aligned);
  grad_op_attrs.insert(grad_op_attrs.end(), fixed_attrs.begin(),
                       fixed_attrs.end());
  grad_op_attrs.push_back({"Tboxes", boxes});
  FDH::Node drois =
      box_grad_op.empty()
          ? FDH::Node{{"drois"}, "ZerosLike", {"rois"}, {{"T", boxes}}}
          : FDH::Node{{"drois"},
                      box_grad_op,
                      {"dpooled", "features", "rois"},
                      grad_op_attrs};
  *g = FDH::Define(
      // Arg defs
      {"features: T", RoisArg("rois", boxes), "dpooled: T"},
      // Ret val defs
      {"dfeatures: T", RoisArg("drois", boxes)},
      // Attr defs
      AttrDefs(has_sampling_ratio, has_aligned),
      // Nodes
      {
          {{"features_shape"},
           "Shape",
           {"features"},
           {{"T", "$T"}, {"out_type", DT_INT32}}},
          {{"dfeatures"},
           grad_op,
           {"dpooled", "rois", "features_shape"},
           grad_op_attrs},
          drois,
      });
  return OkStatus();
}

Status RoiAlignGradFn(const AttrSlice& attrs, FunctionDef* g) {
  return BilinearOrAverageGrad(attrs, "CustomOps>RoiAlignGrad",
                               "CustomOps>RoiAlignGradBoxes",
                               /*has_sampling_ratio=*/true,
                               /*has_aligned=*/true, {}, g);
}

Status PsRoiAlignGradFn(const AttrSlice& attrs, FunctionDef* g) {
  // PsRoiAlign gained `aligned` in its second version; SymbolicGradient nodes
  // written before name no such attr and mean the default, true.
  bool aligned = true;
  if (attrs.Find("aligned") != nullptr) {
    TF_RETURN_IF_ERROR(GetNodeAttr(attrs, "aligned", &aligned));
  }
  return BilinearOrAverageGrad(
      attrs, "CustomOps>PsRoiAlignGrad", "CustomOps>PsRoiAlignGradBoxes",
      /*has_sampling_ratio=*/true,
      /*has_aligned=*/false, {{"aligned", aligned}}, g);
}

Status PsRoiPoolGradFn(const AttrSlice& attrs, FunctionDef* g) {
  return BilinearOrAverageGrad(attrs, "CustomOps>PsRoiPoolGrad",
                               /*box_grad_op=*/"",
                               /*has_sampling_ratio=*/false,
                               /*has_aligned=*/false, {}, g);
}

// RoiPool has two outputs; argmax is an index and gets no gradient. The
// function recomputes argmax, as SymbolicGradient only sees the inputs.
Status RoiPoolGradFn(const AttrSlice& attrs, FunctionDef* g) {
  DataType boxes;
  TF_RETURN_IF_ERROR(BoxesDtype(attrs, &boxes));
  AttrList refs = AttrRefs(false, false);
  refs.push_back({"Tboxes", boxes});
  *g = FDH::Define(
      // Arg defs
      {"features: T", RoisArg("rois", boxes), "dpooled: T", "dargmax: int32"},
      // Ret val defs
      {"dfeatures: T", RoisArg("drois", boxes)},
      // Attr defs
      AttrDefs(false, false),
      // Nodes
      {
          {{"pooled", "argmax"},
           "CustomOps>RoiPool",
           {"features", "rois"},
           refs},
          {{"features_shape"},
           "Shape",
           {"features"},
           {{"T", "$T"}, {"out_type", DT_INT32}}},
          {{"dfeatures"},
           "CustomOps>RoiPoolGrad",
           {"dpooled", "rois", "argmax", "features_shape"},
           refs},
          {{"drois"}, "ZerosLike", {"rois"}, {{"T", boxes}}},
      });
  return OkStatus();
}

}  // namespace

REGISTER_OP_GRADIENT("CustomOps>RoiPool", RoiPoolGradFn);
REGISTER_OP_GRADIENT("CustomOps>RoiAlign", RoiAlignGradFn);
REGISTER_OP_GRADIENT("CustomOps>PsRoiPool", PsRoiPoolGradFn);
REGISTER_OP_GRADIENT("CustomOps>PsRoiAlign", PsRoiAlignGradFn);

}  // namespace tensorflow
