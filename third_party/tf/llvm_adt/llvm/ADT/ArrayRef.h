// Declarations that let TensorFlow 2.19's pip headers compile: its
// xla/stream_executor/gpu/tma_metadata.h names llvm::ArrayRef and
// llvm::SmallVector, and the wheel ships no LLVM headers. No glue calls into
// those classes, so nothing here is ever emitted; the glue import check
// (tools/pip_package/check_glue_imports.py) would catch a reference.
#ifndef TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_ARRAYREF_H_
#define TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_ARRAYREF_H_

#include <cstddef>

namespace llvm {

template <typename T>
class ArrayRef {
 public:
  ArrayRef() = default;
  template <typename Container>
  ArrayRef(const Container& c) : data_(c.data()), size_(c.size()) {}  // NOLINT

 private:
  const T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace llvm

#endif  // TENSORFLOW_CUSTOMOPS_THIRD_PARTY_TF_LLVM_ADT_ARRAYREF_H_
