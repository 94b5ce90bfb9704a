// Status across the TensorFlow releases the glue is built for (2.12 to
// 2.21): tensorflow::Status is TSL's own class up to 2.12 and absl::Status
// later, so the glue spells it tensorflow::Status (and OkStatus()), and reads
// messages through StatusMessage.

#ifndef TENSORFLOW_CUSTOMOPS_CORE_PLATFORM_STATUS_COMPAT_H_
#define TENSORFLOW_CUSTOMOPS_CORE_PLATFORM_STATUS_COMPAT_H_

#include <string>
#include <type_traits>
#include <utility>

#include "tensorflow/core/platform/status.h"

namespace tensorflow {
namespace customops {

template <typename S, typename = void>
struct HasMessage : std::false_type {};
template <typename S>
struct HasMessage<S, std::void_t<decltype(std::declval<const S&>().message())>>
    : std::true_type {};

// A status's message: TSL's Status called it error_message() before it
// gained absl's message().
template <typename S>
std::string StatusMessage(const S& status) {
  if constexpr (HasMessage<S>::value) {
    return std::string(status.message());
  } else {
    return status.error_message();
  }
}

}  // namespace customops
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_PLATFORM_STATUS_COMPAT_H_
