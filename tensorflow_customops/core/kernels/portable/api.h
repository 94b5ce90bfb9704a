/* The C interface of the portable kernels,
 * _tensorflow_customops_portable_kernels.so.
 *
 * The core holds every CPU and CUDA kernel of the library. It includes no
 * TensorFlow header and links no TensorFlow library, so it is compiled once
 * and serves every TensorFlow release; the op library of each release (the
 * glue: op registrations, OpKernels, gradients) calls it through the
 * functions declared by the kernels' headers (<op>_op.h), all built from the
 * types below. Only those functions are exported (-fvisibility=hidden).
 *
 * A function returns NULL on success, else a message that stays valid until
 * the calling thread's next call into the core. Inputs are validated by the
 * caller: the core trusts every shape and index it is given. */

#ifndef TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_API_H_
#define TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFCO_CORE_API __attribute__((visibility("default")))

typedef const char* TfcoError;

/* Element types, named after TensorFlow's. */
typedef enum TfcoDtype {
  TFCO_HALF = 1,
  TFCO_BFLOAT16 = 2,
  TFCO_FLOAT = 3,
  TFCO_DOUBLE = 4,
  TFCO_INT8 = 5,
  TFCO_UINT8 = 6,
  TFCO_INT32 = 7,
  TFCO_INT64 = 8,
} TfcoDtype;

/* The caller's CPU thread pool. `schedule` runs fn(arg) on one of its
 * threads; `current_thread_id` is the calling thread's index in the pool, or
 * -1 outside it. The core parallelises with Eigen's ThreadPoolDevice over
 * this pool, with `num_threads` as its thread count (TensorFlow's intra-op
 * parallelism). */
typedef struct TfcoThreadPool {
  void* pool;
  int num_threads;
  int pool_threads;
  void (*schedule)(void* pool, void (*fn)(void* arg), void* arg);
  int (*current_thread_id)(void* pool);
} TfcoThreadPool;

/* Where a kernel runs: on the CPU pool `cpu` when `gpu_stream` is NULL, else
 * as work enqueued on that CUDA stream (cudaStream_t), whose buffers are
 * device memory. The core never allocates device memory and never waits for
 * the stream: what the host must read comes back through TfcoCopyToHost and
 * TfcoWhenStreamDone. */
typedef struct TfcoDevice {
  const TfcoThreadPool* cpu;
  void* gpu_stream;
} TfcoDevice;

/* Enqueues a copy of `bytes` from device memory to host memory on `device`'s
 * CUDA stream and returns without waiting. `host` must be page-locked
 * (TensorFlow's GPU-compatible host memory), else CUDA would wait; it holds
 * the bytes once the stream has passed the copy (TfcoWhenStreamDone). */
TFCO_CORE_API TfcoError TfcoCopyToHost(const TfcoDevice* device,
                                       const void* gpu, void* host,
                                       int64_t bytes);

/* What TfcoWhenStreamDone calls, on a thread of the caller's CPU pool:
 * `error` is NULL when the stream ran without error, else CUDA's message,
 * valid during the call. */
typedef void (*TfcoDoneFn)(void* arg, TfcoError error);

/* Once the GPU has finished everything enqueued on `device`'s stream before
 * this call, hands fn(arg, error) to the CPU pool `device->cpu` (the struct
 * is copied, the pool must outlive the call); returns without waiting. fn
 * runs exactly once if this returns NULL, and never otherwise. CUDA's
 * callback thread, which may not call CUDA, only calls the pool's
 * `schedule`, which must not run fn on that thread. GPU only. */
TFCO_CORE_API TfcoError TfcoWhenStreamDone(const TfcoDevice* device,
                                           TfcoDoneFn fn, void* arg);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_CUSTOMOPS_CORE_KERNELS_CORE_API_H_ */
