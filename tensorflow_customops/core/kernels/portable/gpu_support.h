/* Whether the portable kernels' CUDA kernels can run on this machine (C
 * interface of the portable kernels, portable/api.h).
 *
 * The glue registers its GPU kernels only where they can: otherwise
 * TensorFlow places the ops on the CPU instead of failing them at every
 * step. The answer is worked out once per process, when first asked. */

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_H_

#include "tensorflow_customops/core/kernels/portable/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TfcoGpuSupport {
  /* The core holds CUDA kernels (built with --config=cuda). */
  int compiled;
  /* They can run here: the glue registers its GPU kernels. */
  int usable;
  /* The CUDA runtime they were built with, as CUDART_VERSION (13000 for
   * 13.0); 0 when not compiled. */
  int runtime_version;
  /* The least driver version (cudaDriverGetVersion) that runs them. */
  int driver_floor;
  /* cudaDriverGetVersion here; 0 when there is no driver or no CUDA. */
  int driver_version;
  /* The code the core holds, e.g. "sm_75, sm_80, PTX compute_80". */
  const char* code;
  /* Why the GPU kernels are not registered; "" when they are. */
  const char* reason;
} TfcoGpuSupport;

TFCO_CORE_API const TfcoGpuSupport* TfcoGetGpuSupport(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_CUSTOMOPS_CORE_KERNELS_GPU_SUPPORT_H_ */
