// The GPU check's case files (format in case_file.py), and the comparison of
// GPU outputs with the expected ones. Host code with no TensorFlow or CUDA
// dependency, so it is tested on machines without a GPU.

#ifndef TOOLS_GPU_CHECK_CASE_FILE_H_
#define TOOLS_GPU_CHECK_CASE_FILE_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace gpu_check {

enum class DType : uint8_t {
  kHalf = 1,
  kBfloat16 = 2,
  kFloat = 3,
  kDouble = 4,
  kInt32 = 5,
  kInt64 = 6,
  kInt8 = 7,
  kUint8 = 8,
};

int SizeOf(DType dtype);
const char* Name(DType dtype);

struct Tensor {
  DType dtype = DType::kFloat;
  std::vector<int64_t> dims;
  std::vector<char> data;

  int64_t NumElements() const;
  // Element i as a double (half and bfloat16 widened exactly).
  double At(int64_t i) const;
};

struct Case {
  std::string name;
  std::string op;
  std::map<std::string, double> attrs;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> outputs;

  // The attr or input named `key`; throws std::runtime_error naming the case
  // when it is missing.
  double Attr(const std::string& key) const;
  const Tensor& Input(const std::string& key) const;
};

// Throw std::runtime_error with the file and the problem.
std::vector<Case> ReadCases(const std::string& path);
void WriteCases(const std::string& path, const std::vector<Case>& cases);

// How `actual` compares with `expected`, elementwise:
// |actual - expected| <= atol + rtol * |expected|, NaN exactly where expected
// has NaN, infinities equal. Shapes and dtypes must match.
struct Comparison {
  bool ok = true;
  std::string problem;       // the first failure, empty when ok
  int64_t mismatches = 0;    // elements outside the tolerance
  double max_abs_error = 0;  // over elements that are finite in both
};
Comparison Compare(const Tensor& expected, const Tensor& actual, double rtol,
                   double atol);

// Compares every expected output of `expected` with the same-named output of
// `actual` (the GPU's), with the case's rtol and atol attrs.
Comparison CompareCase(const Case& expected, const Case& actual);

// Prints a line per case of `expected` ("PASS name ..." or "FAIL name: why")
// and then "N passed, N failed"; returns the number failed. A case fails when
// `errors` holds a message for it (it could not run), when `actual` lacks it,
// or when CompareCase fails.
int Report(const std::vector<Case>& expected,
           const std::map<std::string, Case>& actual,
           const std::map<std::string, std::string>& errors, std::ostream& out);

}  // namespace gpu_check

#endif  // TOOLS_GPU_CHECK_CASE_FILE_H_
