// Build-wide macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define SINKLAB_HD __host__ __device__
#else
#define SINKLAB_HD
#endif

#define SINKLAB_VERSION_MAJOR 0
#define SINKLAB_VERSION_MINOR 1
#define SINKLAB_VERSION_PATCH 0
