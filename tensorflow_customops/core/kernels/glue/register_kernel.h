// TFCO_REGISTER_KERNEL_BUILDER: TensorFlow's REGISTER_KERNEL_BUILDER, except
// that a GPU kernel is registered only where the portable kernels' CUDA kernels
// can run (TfcoGetGpuSupport: a recent enough driver, code for every GPU).
// Otherwise TensorFlow places the ops on the CPU, and the first GPU kernel
// left out logs why, once. Every OpKernel registration of the glue uses it.
//
// TensorFlow's OpKernelRegistrar dereferences the KernelDef it is given
// (2.12 to 2.21), so a kernel left out must not reach it at all.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_REGISTER_KERNEL_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_REGISTER_KERNEL_H_

#include "tensorflow/core/framework/op_kernel.h"

namespace tensorflow {
namespace customops {

// Registers `kernel_def` (taking it) with `create`, unless it is a GPU
// kernel that cannot run here. Returns whether it was registered.
bool RegisterKernel(const KernelDef* kernel_def, const char* class_name,
                    OpKernel* (*create)(OpKernelConstruction*));

}  // namespace customops
}  // namespace tensorflow

#define TFCO_REGISTER_KERNEL_BUILDER(kernel_builder, ...) \
  TFCO_REGISTER_KERNEL_BUILDER_UNIQ(__COUNTER__, kernel_builder, __VA_ARGS__)
#define TFCO_REGISTER_KERNEL_BUILDER_UNIQ(ctr, kernel_builder, ...) \
  TFCO_REGISTER_KERNEL_BUILDER_IMPL(ctr, kernel_builder, __VA_ARGS__)
#define TFCO_REGISTER_KERNEL_BUILDER_IMPL(ctr, kernel_builder, ...)            \
  static const bool tfco_kernel_registered_##ctr TF_ATTRIBUTE_UNUSED =         \
      ::tensorflow::customops::RegisterKernel(                                 \
          ::tensorflow::register_kernel::kernel_builder.Build(), #__VA_ARGS__, \
          [](::tensorflow::OpKernelConstruction* context)                      \
              -> ::tensorflow::OpKernel* {                                     \
            return new __VA_ARGS__(context);                                   \
          });

#endif  // TENSORFLOW_CUSTOMOPS_CORE_KERNELS_REGISTER_KERNEL_H_
