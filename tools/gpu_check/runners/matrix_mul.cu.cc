// MatrixMul's GPU kernel.

#include "tensorflow_customops/core/kernels/matrix_mul/matrix_mul_op.h"
#include "tools/gpu_check/runner.h"

namespace gpu_check {
namespace {

std::map<std::string, Tensor> RunMatrixMul(const Case& c, const GPUDevice& d) {
  const Tensor& a = c.Input("a");
  const Tensor& b = c.Input("b");
  const bool ta = c.Attr("transpose_a") != 0;
  const bool tb = c.Attr("transpose_b") != 0;
  if (a.dims.size() != 2 || b.dims.size() != 2 || a.dtype != b.dtype) {
    throw std::runtime_error("a and b must be matrices of one dtype");
  }
  const int64_t m = ta ? a.dims[1] : a.dims[0];
  const int64_t n = tb ? b.dims[0] : b.dims[1];
  DeviceBuffer da(a), db(b);
  DeviceBuffer product = DeviceBuffer::Poisoned(m * n * SizeOf(a.dtype));
  CheckCore(TfcoMatrixMul(d.core(), CoreDtype(a.dtype), da.get<void>(),
                          a.dims[0], a.dims[1], db.get<void>(), b.dims[0],
                          b.dims[1], ta, tb, product.get<void>()));
  d.synchronize();
  return {{"product", product.Download(a.dtype, {m, n})}};
}

const RegisterRunner kMatrixMul({"MatrixMul"}, RunMatrixMul);

}  // namespace
}  // namespace gpu_check
