// CUDA's split of its runtime header, as the emulation has it: one header.

#ifndef TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_API_H_
#define TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_API_H_

#include "cuda_runtime.h"

#endif  // TOOLS_GPU_CHECK_EMULATION_INCLUDE_CUDA_RUNTIME_API_H_
