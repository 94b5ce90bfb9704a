// See ArrayRef.h beside this file: declarations only, for TensorFlow 2.19's
// tma_metadata.h.
#ifndef TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_SMALLVECTOR_H_
#define TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_SMALLVECTOR_H_

#include <cstddef>

namespace llvm {

template <typename T, unsigned N = 0>
class SmallVector {
 public:
  const T* data() const;
  std::size_t size() const;
};

}  // namespace llvm

#endif  // TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_SMALLVECTOR_H_
