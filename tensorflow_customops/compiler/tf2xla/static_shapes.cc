#include "tensorflow_customops/compiler/tf2xla/static_shapes.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow_customops/compiler/tf2xla/xla_builder.h"

namespace tensorflow {
namespace customops {
namespace {

// Input i's name: its argument's, indexed where the op's one argument is a
// list (the library's ops with a list input have no other).
std::string InputName(const OpDef& op_def, int i) {
  if (op_def.input_arg_size() == 1) {
    const OpDef::ArgDef& arg = op_def.input_arg(0);
    if (!arg.number_attr().empty() || !arg.type_list_attr().empty()) {
      return absl::StrCat(arg.name(), "[", i, "]");
    }
  }
  return i < op_def.input_arg_size() ? op_def.input_arg(i).name()
                                     : absl::StrCat("input ", i);
}

}  // namespace

Status CheckStaticDimensions(XlaOpKernelContext* context,
                             absl::Span<const int> inputs,
                             absl::Span<const int> row_inputs) {
  const std::string& op = context->op_kernel().type_string();
  const OpDef* op_def = nullptr;
  TF_RETURN_IF_ERROR(OpRegistry::Global()->LookUpOpDef(op, &op_def));
  for (const int i : inputs) {
    const xla::Shape shape = *context->builder()->GetShape(context->Input(i));
    const bool rows =
        std::find(row_inputs.begin(), row_inputs.end(), i) != row_inputs.end();
    for (int d = rows ? 1 : 0; d < shape.dimensions_size(); ++d) {
      if (!shape.is_dynamic_dimension(d)) continue;
      const std::string name = InputName(*op_def, i);
      return errors::Unimplemented(
          op, " under XLA: dimension ", d, " of ", name,
          " is dynamic (at most ", shape.dimensions(d),
          ", as from tf.boolean_mask or tf.where), and ", name,
          rows ? " may have a dynamic first dimension only"
               : " must have a static shape",
          ". Compute it outside the compiled function, or pad it to a static "
          "shape.");
    }
  }
  return OkStatus();
}

}  // namespace customops
}  // namespace tensorflow
