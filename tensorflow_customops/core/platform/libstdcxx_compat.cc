// Keeps every library's libstdc++ requirement at GLIBCXX_3.4.21 (gcc 5's
// C++11 ABI, which TensorFlow's wheels need anyway), so the wheel installs
// where TensorFlow's own wheels do, though it is built with gcc 12.
//
// gcc 11 and 12 headers make code import symbols that only their libstdc++
// has. tensorflow_customops.bzl links each library with
// --wrap for each, which sends our objects' references here:
// - std::condition_variable::wait got a new default version,
//   GLIBCXX_3.4.30, for a change that does not concern it; the
//   GLIBCXX_3.4.11 version is the same function. It is looked up by
//   version at run time: a reference to it by name, even versioned, would
//   be wrapped back to this function.
// - std::__throw_bad_array_new_length (GLIBCXX_3.4.29) throws what
//   operator new[] throws for an impossible size, which older libstdc++
//   provides (CXXABI_1.3.8).
// - std::stringstream's default constructor (GLIBCXX_3.4.26, which XLA's FFI
//   headers use) is its constructor of an open mode (GLIBCXX_3.4.21) with
//   in | out.
// The definitions are hidden, so nothing outside the library binds to them.

#include <dlfcn.h>

#include <ios>
#include <new>

// dlopen's and dlvsym's GLIBC_2.34 versions would raise the glibc floor; the
// old ones are the same functions (in libdl before glibc 2.34, which the
// libraries therefore need).
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");

namespace {

constexpr char kWait[] =
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE";

using Wait = void (*)(void* condition_variable, void* lock);

Wait OldWait() {
  // The libstdc++ this library was loaded with.
  void* libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void* wait = libstdcxx ? dlvsym(libstdcxx, kWait, "GLIBCXX_3.4.11") : nullptr;
  // Every libstdc++ since gcc 4.4 has it.
  if (wait == nullptr) __builtin_trap();
  return reinterpret_cast<Wait>(wait);
}

}  // namespace

extern "C" {

__attribute__((visibility("hidden"))) void
__wrap__ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE(
    void* condition_variable, void* lock) {
  static const Wait wait = OldWait();
  wait(condition_variable, lock);
}

[[noreturn]] __attribute__((visibility("hidden"))) void
__wrap__ZSt28__throw_bad_array_new_lengthv() {
  throw std::bad_array_new_length();
}

void _ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1ESt13_Ios_Openmode(
    void* stream, std::ios_base::openmode mode);

__attribute__((visibility("hidden"))) void
__wrap__ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev(
    void* stream) {
  _ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1ESt13_Ios_Openmode(
      stream, std::ios_base::in | std::ios_base::out);
}

}  // extern "C"
