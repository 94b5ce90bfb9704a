#include "tools/gpu_check/case_file.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace gpu_check {
namespace {

constexpr char kMagic[] = "TFCOGPU1";
constexpr size_t kMagicSize = 8;
constexpr uint8_t kInput = 0;
constexpr uint8_t kOutput = 1;

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// IEEE half to float, exactly (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) {
    return FromBits(sign | 0x7f800000 | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

class Reader {
 public:
  Reader(const std::string& path, std::vector<char> data)
      : path_(path), data_(std::move(data)) {}

  const char* Take(size_t size) {
    if (size > data_.size() - pos_) Fail("truncated");
    const char* p = data_.data() + pos_;
    pos_ += size;
    return p;
  }
  template <typename V>
  V Get() {
    V value;
    std::memcpy(&value, Take(sizeof(V)), sizeof(V));
    return value;
  }
  std::string String() {
    const uint32_t size = Get<uint32_t>();
    return std::string(Take(size), size);
  }
  bool AtEnd() const { return pos_ == data_.size(); }
  [[noreturn]] void Fail(const std::string& what) const {
    std::ostringstream message;
    message << path_ << ": " << what << " at byte " << pos_;
    throw std::runtime_error(message.str());
  }

 private:
  std::string path_;
  std::vector<char> data_;
  size_t pos_ = 0;
};

class Writer {
 public:
  template <typename V>
  void Put(V value) {
    Append(&value, sizeof(V));
  }
  void String(const std::string& s) {
    Put<uint32_t>(s.size());
    Append(s.data(), s.size());
  }
  void Append(const void* p, size_t size) {
    const char* c = static_cast<const char*>(p);
    data_.insert(data_.end(), c, c + size);
  }
  const std::vector<char>& data() const { return data_; }

 private:
  std::vector<char> data_;
};

Tensor ReadTensor(Reader* r, const std::string& key) {
  Tensor t;
  const uint8_t code = r->Get<uint8_t>();
  if (code < 1 || code > 8) r->Fail("tensor " + key + ": unknown dtype code");
  t.dtype = static_cast<DType>(code);
  const uint32_t rank = r->Get<uint32_t>();
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t dim = r->Get<int64_t>();
    if (dim < 0) r->Fail("tensor " + key + ": negative dimension");
    t.dims.push_back(dim);
  }
  const uint64_t size = r->Get<uint64_t>();
  if (size != static_cast<uint64_t>(t.NumElements() * SizeOf(t.dtype))) {
    r->Fail("tensor " + key + ": byte count does not match its shape");
  }
  const char* p = r->Take(size);
  t.data.assign(p, p + size);
  return t;
}

void WriteTensor(Writer* w, const std::string& key, uint8_t role,
                 const Tensor& t) {
  w->String(key);
  w->Put<uint8_t>(role);
  w->Put<uint8_t>(static_cast<uint8_t>(t.dtype));
  w->Put<uint32_t>(t.dims.size());
  for (int64_t d : t.dims) w->Put<int64_t>(d);
  w->Put<uint64_t>(t.data.size());
  w->Append(t.data.data(), t.data.size());
}

std::string Shape(const Tensor& t) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s << (i ? ", " : "") << t.dims[i];
  s << "]";
  return s.str();
}

}  // namespace

int SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBfloat16:
      return 2;
    case DType::kFloat:
    case DType::kInt32:
      return 4;
    case DType::kDouble:
    case DType::kInt64:
      return 8;
    case DType::kInt8:
    case DType::kUint8:
      return 1;
  }
  return 0;
}

const char* Name(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return "float16";
    case DType::kBfloat16:
      return "bfloat16";
    case DType::kFloat:
      return "float32";
    case DType::kDouble:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kInt8:
      return "int8";
    case DType::kUint8:
      return "uint8";
  }
  return "?";
}

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double Tensor::At(int64_t i) const {
  const char* p = data.data() + i * SizeOf(dtype);
  switch (dtype) {
    case DType::kHalf: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return HalfToFloat(bits);
    }
    case DType::kBfloat16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return FromBits(static_cast<uint32_t>(bits) << 16);
    }
    case DType::kFloat: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kDouble: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kInt8:
      return static_cast<int8_t>(*p);
    case DType::kUint8:
      return static_cast<uint8_t>(*p);
  }
  return 0;
}

double Case::Attr(const std::string& key) const {
  const auto it = attrs.find(key);
  if (it == attrs.end()) {
    throw std::runtime_error(name + ": missing attr " + key);
  }
  return it->second;
}

const Tensor& Case::Input(const std::string& key) const {
  const auto it = inputs.find(key);
  if (it == inputs.end()) {
    throw std::runtime_error(name + ": missing input " + key);
  }
  return it->second;
}

std::vector<Case> ReadCases(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(path + ": cannot open");
  Reader r(path, std::vector<char>(std::istreambuf_iterator<char>(file),
                                   std::istreambuf_iterator<char>()));
  if (std::memcmp(r.Take(kMagicSize), kMagic, kMagicSize) != 0) {
    r.Fail("not a GPU check case file (bad magic)");
  }
  std::vector<Case> cases(r.Get<uint32_t>());
  for (Case& c : cases) {
    c.name = r.String();
    c.op = r.String();
    for (uint32_t n = r.Get<uint32_t>(); n > 0; --n) {
      const std::string key = r.String();
      c.attrs[key] = r.Get<double>();
    }
    for (uint32_t n = r.Get<uint32_t>(); n > 0; --n) {
      const std::string key = r.String();
      const uint8_t role = r.Get<uint8_t>();
      if (role != kInput && role != kOutput) r.Fail("tensor " + key + ": role");
      (role == kInput ? c.inputs : c.outputs)[key] = ReadTensor(&r, key);
    }
  }
  if (!r.AtEnd()) r.Fail("trailing bytes");
  return cases;
}

void WriteCases(const std::string& path, const std::vector<Case>& cases) {
  Writer w;
  w.Append(kMagic, kMagicSize);
  w.Put<uint32_t>(cases.size());
  for (const Case& c : cases) {
    w.String(c.name);
    w.String(c.op);
    w.Put<uint32_t>(c.attrs.size());
    for (const auto& [key, value] : c.attrs) {
      w.String(key);
      w.Put<double>(value);
    }
    w.Put<uint32_t>(c.inputs.size() + c.outputs.size());
    for (const auto& [key, t] : c.inputs) WriteTensor(&w, key, kInput, t);
    for (const auto& [key, t] : c.outputs) WriteTensor(&w, key, kOutput, t);
  }
  std::ofstream file(path, std::ios::binary);
  file.write(w.data().data(), w.data().size());
  if (!file) throw std::runtime_error(path + ": cannot write");
}

Comparison Compare(const Tensor& expected, const Tensor& actual, double rtol,
                   double atol) {
  Comparison result;
  if (expected.dtype != actual.dtype || expected.dims != actual.dims) {
    result.ok = false;
    result.problem = std::string("expected ") + Name(expected.dtype) +
                     Shape(expected) + ", got " + Name(actual.dtype) +
                     Shape(actual);
    return result;
  }
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    const double e = expected.At(i);
    const double a = actual.At(i);
    bool close;
    if (std::isnan(e) || std::isnan(a)) {
      close = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      close = e == a;
    } else {
      const double error = std::fabs(a - e);
      result.max_abs_error = std::max(result.max_abs_error, error);
      close = error <= atol + rtol * std::fabs(e);
    }
    if (close) continue;
    if (result.ok) {
      std::ostringstream problem;
      problem.precision(17);
      problem << "element " << i << ": expected " << e << ", got " << a;
      result.problem = problem.str();
      result.ok = false;
    }
    ++result.mismatches;
  }
  return result;
}

Comparison CompareCase(const Case& expected, const Case& actual) {
  Comparison total;
  const double rtol = expected.Attr("rtol");
  const double atol = expected.Attr("atol");
  for (const auto& [key, want] : expected.outputs) {
    const auto it = actual.outputs.find(key);
    Comparison c;
    if (it == actual.outputs.end()) {
      c.ok = false;
      c.problem = "no output";
      c.mismatches = want.NumElements();
    } else {
      c = Compare(want, it->second, rtol, atol);
    }
    total.max_abs_error = std::max(total.max_abs_error, c.max_abs_error);
    total.mismatches += c.mismatches;
    if (!c.ok && total.ok) {
      total.ok = false;
      total.problem = key + ": " + c.problem;
    }
  }
  return total;
}

int Report(const std::vector<Case>& expected,
           const std::map<std::string, Case>& actual,
           const std::map<std::string, std::string>& errors,
           std::ostream& out) {
  int passed = 0;
  int failed = 0;
  for (const Case& want : expected) {
    std::string problem;
    Comparison c;
    const auto error = errors.find(want.name);
    const auto got = actual.find(want.name);
    if (error != errors.end()) {
      problem = error->second;
    } else if (got == actual.end()) {
      problem = "not run";
    } else {
      c = CompareCase(want, got->second);
      if (!c.ok) {
        std::ostringstream s;
        s << c.problem << " (" << c.mismatches << " elements out of tolerance)";
        problem = s.str();
      }
    }
    if (problem.empty()) {
      ++passed;
      out << "PASS " << want.name << "  max |error| " << c.max_abs_error
          << " (rtol " << want.Attr("rtol") << ", atol " << want.Attr("atol")
          << ")\n";
    } else {
      ++failed;
      out << "FAIL " << want.name << ": " << problem << "\n";
    }
  }
  out << passed << " passed, " << failed << " failed\n";
  return failed;
}

}  // namespace gpu_check
