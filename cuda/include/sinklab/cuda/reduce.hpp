// Reductions of the CUDA backend through Thrust, written against an execution policy: the same
// code runs on a GPU (thrust::device) and on Thrust's host systems (thrust::cpp::par), where the
// tests check it on a machine without one (tests/cuda/test_cuda_reduce_host.cpp). Sums are in
// double, as the CPU's gradient clipping sums (optim/clip.hpp); Thrust's reduction order is fixed
// for a given system and size, so results repeat run to run.
#pragma once
#include <thrust/functional.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <cstdint>

#include "sinklab/core/config.hpp"

namespace sinklab::kernels::cuda::host {

namespace detail {
template <class T>
struct SquareInDouble {
  SINKLAB_HD double operator()(T x) const { return static_cast<double>(x) * static_cast<double>(x); }
};
template <class T>
struct AbsInDouble {
  SINKLAB_HD double operator()(T x) const { return x < T(0) ? -static_cast<double>(x) : static_cast<double>(x); }
};
// max that keeps a NaN: a NaN anywhere makes the result NaN, as the CPU's non-finite check needs.
struct MaxKeepingNaN {
  SINKLAB_HD double operator()(double a, double b) const { return a != a || b != b ? a + b : (a > b ? a : b); }
};
}  // namespace detail

// Σ x² over x[0, n), in double.
template <class Policy, class T>
double sum_of_squares(const Policy& exec, const T* x, int64_t n) {
  return thrust::transform_reduce(exec, x, x + n, detail::SquareInDouble<T>{}, 0.0, thrust::plus<double>());
}

// max |x| over x[0, n) in double (0 for n = 0; NaN when any element is NaN).
template <class Policy, class T>
double max_abs(const Policy& exec, const T* x, int64_t n) {
  return thrust::transform_reduce(exec, x, x + n, detail::AbsInDouble<T>{}, 0.0, detail::MaxKeepingNaN{});
}

}  // namespace sinklab::kernels::cuda::host
