// Keeps every library's libstdc++ requirement at GLIBCXX_3.4.21 (gcc 5's
// C++11 ABI, which TensorFlow's wheels need anyway), so the wheel installs
// where TensorFlow's own wheels do, though it is built with gcc 12.
//
// gcc 11 and 12 headers make code import two symbols that only their
// libstdc++ has. tensorflow_customops.bzl links each library with
// --wrap for both, which sends our objects' references here:
// - std::condition_variable::wait got a new default version,
//   GLIBCXX_3.4.30, for a change that does not concern it; the
//   GLIBCXX_3.4.11 version is the same function.
// - std::__throw_bad_array_new_length (GLIBCXX_3.4.29) throws what
//   operator new[] throws for an impossible size, which older libstdc++
//   provides (CXXABI_1.3.8).
// Both definitions are hidden, so nothing outside the library binds to them.

#include <new>

extern "C" {

void TfcoConditionVariableWait3411(void* condition_variable, void* lock);
__asm__(
    ".symver TfcoConditionVariableWait3411,"
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@GLIBCXX_3.4."
    "11");

__attribute__((visibility("hidden"))) void
__wrap__ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE(
    void* condition_variable, void* lock) {
  TfcoConditionVariableWait3411(condition_variable, lock);
}

[[noreturn]] __attribute__((visibility("hidden"))) void
__wrap__ZSt28__throw_bad_array_new_lengthv() {
  throw std::bad_array_new_length();
}

}  // extern "C"
