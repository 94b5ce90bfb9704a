// XLA's HLO builder, the builder library and the shape utilities the
// lowerings use, from wherever the TensorFlow release the glue is built for
// keeps them: xla/hlo/builder/ (seen in 2.20 and 2.21), xla/client/ (2.16),
// tensorflow/compiler/xla/client/ (2.12). The API the lowerings use is the
// same in each.

#ifndef TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_BUILDER_H_
#define TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_BUILDER_H_

#if __has_include("xla/hlo/builder/xla_builder.h")
#include "xla/hlo/builder/lib/arithmetic.h"
#include "xla/hlo/builder/lib/constants.h"
#include "xla/hlo/builder/lib/loops.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"
#elif __has_include("xla/client/xla_builder.h")
#include "xla/client/lib/arithmetic.h"
#include "xla/client/lib/constants.h"
#include "xla/client/lib/loops.h"
#include "xla/client/xla_builder.h"
#include "xla/shape_util.h"
#else
#include "tensorflow/compiler/xla/client/lib/arithmetic.h"
#include "tensorflow/compiler/xla/client/lib/constants.h"
#include "tensorflow/compiler/xla/client/lib/loops.h"
#include "tensorflow/compiler/xla/client/xla_builder.h"
#include "tensorflow/compiler/xla/shape_util.h"
#endif

#endif  // TENSORFLOW_CUSTOMOPS_COMPILER_TF2XLA_XLA_BUILDER_H_
