#include "tensorflow_customops/compiler/tf2xla/custom_call.h"

#if TFCO_XLA_LEGACY_CALLS

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#if __has_include("xla/service/custom_call_status_internal.h")
#include "xla/service/custom_call_status_internal.h"
#include "xla/service/custom_call_target_registry.h"
#else
#include "tensorflow/compiler/xla/service/custom_call_status_internal.h"
#include "tensorflow/compiler/xla/service/custom_call_target_registry.h"
#endif

#define EIGEN_USE_THREADS
#include "unsupported/Eigen/CXX11/Tensor"

namespace tensorflow {
namespace customops {
namespace legacy {

namespace {

size_t ByteWidth(DataType type) {
  switch (type) {
    case ::xla::PRED:
    case ::xla::S8:
    case ::xla::U8:
      return 1;
    case ::xla::F16:
    case ::xla::BF16:
      return 2;
    case ::xla::F32:
    case ::xla::S32:
      return 4;
    default:
      return 8;
  }
}

// The pool KeepPool recorded: TensorFlow's LocalDevice pools live as long as
// the process.
std::atomic<Eigen::ThreadPoolInterface*> kept_pool{nullptr};
std::atomic<int> kept_threads{1};

// Reads what FfiAttributes::str() writes: `{name = value, ...}` with values
// `array<i64: 1, 2>`, `3 : i64`, `0x3F800000 : f32` (bits), `true`, or a
// string whose bytes other than printable ASCII are `\XX`.
class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  template <typename Value>
  bool Parse(std::map<std::string, Value>* out) {
    if (!Take("{")) return false;
    if (Take("}")) return pos_ == text_.size();
    while (true) {
      const size_t end = text_.find(" = ", pos_);
      if (end == absl::string_view::npos) return false;
      const std::string name(text_.substr(pos_, end - pos_));
      pos_ = end + 3;
      Value value;
      if (!ParseValue(&value.ints, &value.number, &value.text)) return false;
      (*out)[name] = std::move(value);
      if (Take("}")) return pos_ == text_.size();
      if (!Take(", ")) return false;
    }
  }

 private:
  bool Take(absl::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  bool Integer(int64_t* value, int base = 10) {
    const std::string rest(text_.substr(pos_, 40));
    char* end = nullptr;
    errno = 0;
    *value = base == 16
                 ? static_cast<int64_t>(std::strtoull(rest.c_str(), &end, base))
                 : std::strtoll(rest.c_str(), &end, base);
    if (end == rest.c_str() || errno != 0) return false;
    pos_ += end - rest.c_str();
    return true;
  }

  bool ParseValue(std::vector<int64_t>* ints, double* number,
                  std::string* text) {
    int64_t value;
    if (Take("array<i64")) {
      if (Take(">")) return true;
      if (!Take(": ")) return false;
      do {
        if (!Integer(&value)) return false;
        ints->push_back(value);
      } while (Take(", "));
      return Take(">");
    }
    if (Take("true")) {
      ints->push_back(1);
      return true;
    }
    if (Take("false")) {
      ints->push_back(0);
      return true;
    }
    if (Take("\"")) {
      while (pos_ < text_.size() && text_[pos_] != '"') {
        if (text_[pos_] != '\\') {
          *text += text_[pos_++];
          continue;
        }
        const std::string hex(text_.substr(pos_ + 1, 2));
        char* end = nullptr;
        const long byte = std::strtol(hex.c_str(), &end, 16);
        if (hex.size() != 2 || end != hex.c_str() + 2) return false;
        *text += static_cast<char>(byte);
        pos_ += 3;
      }
      return Take("\"");
    }
    if (Take("0x")) {
      if (!Integer(&value, 16)) return false;
      if (Take(" : f32")) {
        const uint32_t bits = static_cast<uint32_t>(value);
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        *number = f;
        return true;
      }
      if (!Take(" : f64")) return false;
      std::memcpy(number, &value, sizeof(*number));
      return true;
    }
    if (!Integer(&value) || !Take(" : i64")) return false;
    ints->push_back(value);
    return true;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// The shapes, as DescribeBuffers writes them: for each buffer its element
// type, its rank and its dimensions.
std::vector<int64_t> Shapes(Span<const xla::Shape> shapes) {
  std::vector<int64_t> out;
  for (const xla::Shape& shape : shapes) {
    out.push_back(shape.element_type());
    out.push_back(shape.dimensions_size());
    for (const int64_t dim : shape.dimensions()) out.push_back(dim);
  }
  return out;
}

}  // namespace

size_t AnyBuffer::element_count() const {
  size_t count = 1;
  for (const int64_t dim : dims_) count *= dim;
  return count;
}

size_t AnyBuffer::size_bytes() const {
  return element_count() * ByteWidth(type_);
}

void ThreadPool::Schedule(std::function<void()> task) const {
  if (pool_ == nullptr) {
    task();
  } else {
    pool_->Schedule(std::move(task));
  }
}

void KeepPool(OpKernelConstruction* context) {
  DeviceBase* device = context->device();
  if (device == nullptr || !device->has_eigen_cpu_device()) return;
  const Eigen::ThreadPoolDevice* cpu = device->eigen_cpu_device();
  kept_threads.store(cpu->numThreads());
  kept_pool.store(cpu->getPool());
}

std::string DescribeBuffers(const FfiAttributes& attributes,
                            Span<const xla::Shape> operands,
                            Span<const xla::Shape> results) {
  FfiAttributes described = attributes;
  described.Ints("tfco_args", Shapes(operands))
      .Ints("tfco_rets", Shapes(results));
  return described.str();
}

bool CallFrame::Describe(const char* name, size_t count,
                         std::vector<Described>* out) {
  const auto found = attributes_.find(name);
  if (found == attributes_.end()) return false;
  const std::vector<int64_t>& v = found->second.ints;
  size_t i = 0;
  while (i + 2 <= v.size()) {
    const int64_t rank = v[i + 1];
    if (rank < 0 || v.size() - i - 2 < static_cast<size_t>(rank)) return false;
    out->push_back(
        {static_cast<DataType>(v[i]),
         std::vector<int64_t>(v.begin() + i + 2, v.begin() + i + 2 + rank)});
    i += 2 + rank;
  }
  return i == v.size() && (count == kAny || out->size() == count);
}

CallFrame::CallFrame(void* out, const void** in, const char* opaque,
                     size_t opaque_len, size_t num_args, size_t num_rets,
                     std::initializer_list<const char*> required)
    : out_(out), in_(in) {
  bool ok = Parser(absl::string_view(opaque, opaque_len)).Parse(&attributes_) &&
            Describe("tfco_args", num_args, &args_) &&
            Describe("tfco_rets", num_rets, &rets_);
  for (const char* name : required) {
    ok = ok && attributes_.count(name) > 0;
  }
  if (!ok) {
    error_ = Error::Internal(
        absl::StrCat("legacy custom call: unexpected attributes ",
                     absl::string_view(opaque, opaque_len)));
  }
}

AnyBuffer CallFrame::Arg(size_t i) const {
  return AnyBuffer(const_cast<void*>(in_[i]), args_[i].type, args_[i].dims);
}

AnyBuffer CallFrame::Ret(size_t i) const {
  // Several results come as a tuple: a table of their buffers.
  void* data = rets_.size() == 1 ? out_ : static_cast<void**>(out_)[i];
  return AnyBuffer(data, rets_[i].type, rets_[i].dims);
}

Span<const int64_t> CallFrame::Ints(const char* name) const {
  const auto found = attributes_.find(name);
  if (found == attributes_.end()) return {};
  return found->second.ints;
}

float CallFrame::Float(const char* name) const {
  const auto found = attributes_.find(name);
  if (found == attributes_.end())
    return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(found->second.number);
}

std::string CallFrame::String(const char* name) const {
  const auto found = attributes_.find(name);
  return found == attributes_.end() ? std::string() : found->second.text;
}

ThreadPool CallFrame::pool() const {
  return ThreadPool(kept_pool.load(), kept_threads.load());
}

void Finish(XlaCustomCallStatus* status, const Error& error) {
  if (error.failure()) status->message = error.message();
}

bool RegisterCpuHandler(const char* name, Handler handler) {
  xla::CustomCallTargetRegistry::Global()->Register(
      name, reinterpret_cast<void*>(handler), "Host");
  return true;
}

}  // namespace legacy
}  // namespace customops
}  // namespace tensorflow

#endif  // TFCO_XLA_LEGACY_CALLS
