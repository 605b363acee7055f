// The common float instantiations, compiled once instead of in every program that uses them.
//
// sinklab is header-only: by default every translation unit instantiates (and optimises) each
// op it uses, which is most of the time a program of a few models takes to compile. The ops
// list their common float instantiations with SINKLAB_EXTERN_TEMPLATE(...); what that expands to
// depends on how the translation unit is built:
//
//   default                  nothing (header-only: instantiate on use)
//   SINKLAB_PRECOMPILED      `extern template ...;` — the program links the target
//                            sinklab::precompiled, which holds them
//   SINKLAB_INSTANTIATE      `template ...;` — src/precompiled.cpp, the body of that target
//
// Instantiations not on the lists (another element type, a user's own policy) are made on use
// either way.
#pragma once

#if defined(SINKLAB_INSTANTIATE)
#define SINKLAB_EXTERN_TEMPLATE(...) template __VA_ARGS__;
#elif defined(SINKLAB_PRECOMPILED)
#define SINKLAB_EXTERN_TEMPLATE(...) extern template __VA_ARGS__;
#else
#define SINKLAB_EXTERN_TEMPLATE(...)
#endif
