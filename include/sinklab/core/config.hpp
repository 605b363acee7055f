// Build-wide macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define SINKLAB_HD __host__ __device__
#else
#define SINKLAB_HD
#endif

// Unroll the next loop n times in the CPU kernels. Empty under nvcc: its front end parses the
// CPU headers a .cu file includes and warns on every GCC pragma (#1675), and the host copies
// nvcc compiles there are reference paths, not the timed ones.
#define SINKLAB_PRAGMA(x) _Pragma(#x)
#if defined(__CUDACC__)
#define SINKLAB_UNROLL(n)
#else
#define SINKLAB_UNROLL(n) SINKLAB_PRAGMA(GCC unroll n)
#endif

#define SINKLAB_VERSION_MAJOR 0
#define SINKLAB_VERSION_MINOR 1
#define SINKLAB_VERSION_PATCH 0
