// Included by the CUDA 12 route (clang 16, --config=cuda12) after clang's CUDA
// wrapper header, before any source.
//
// CUDA 12's crt/host_defines.h defines __noinline__ as
// __attribute__((noinline)) under every CUDA compiler, which breaks
// libstdc++'s own __attribute__((__noinline__)). clang takes __noinline__ as
// a keyword in CUDA code, so the macro is not needed.
#undef __noinline__
