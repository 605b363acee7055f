// Uniform integer fake quantization: q = clamp(round(x / scale) + zero_point, qmin, qmax),
// x̂ = (q − zero_point) · scale, so every x̂ is scale × an integer of [qmin − zp, qmax − zp].
// Rounding is to nearest with ties to even (rounding.hpp). Scales are fp32 values, as they
// would be stored next to integer weights; the arithmetic runs in double.
//
//   UniformQuantizer::symmetric(clip, bits)      zero point 0, integers [−(2^(b−1)−1), 2^(b−1)−1]
//                                                (narrow range, so ±clip map to ±qmax), scale = clip / qmax
//   UniformQuantizer::asymmetric(lo, hi, bits)   integers [0, 2^b − 1], range widened to contain 0 so
//                                                that 0 is exact, scale = (hi − lo)/(2^b − 1),
//                                                zero point = round(−lo / scale)
#pragma once
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>

#include "sinklab/core/error.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/quant/rounding.hpp"

namespace sinklab::quant {

struct UniformQuantizer {
  float scale = 1.f;
  int32_t zero_point = 0;
  int32_t qmin = -127, qmax = 127;

  static UniformQuantizer symmetric(double clip, int bits = 8) {
    SINKLAB_CHECK(bits >= 2 && bits <= 16, "quant::UniformQuantizer::symmetric: bits must be in [2, 16], got ", bits);
    SINKLAB_CHECK(std::isfinite(clip) && clip >= 0, "quant::UniformQuantizer::symmetric: clip must be finite and >= 0, got ",
                  clip);
    UniformQuantizer q;
    q.qmax = (1 << (bits - 1)) - 1;
    q.qmin = -q.qmax;
    q.zero_point = 0;
    // An all-zero tensor keeps scale 1: everything quantizes to 0 exactly.
    q.scale = clip > 0 ? static_cast<float>(clip / q.qmax) : 1.f;
    SINKLAB_CHECK(q.scale > 0, "quant::UniformQuantizer::symmetric: clip ", clip, " underflows an fp32 scale");
    return q;
  }

  static UniformQuantizer asymmetric(double lo, double hi, int bits = 8) {
    constexpr std::string_view fn = "quant::UniformQuantizer::asymmetric";
    SINKLAB_CHECK(bits >= 2 && bits <= 16, fn, ": bits must be in [2, 16], got ", bits);
    SINKLAB_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, fn, ": range [", lo, ", ", hi,
                  "] must be finite and ordered");
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    UniformQuantizer q;
    q.qmin = 0;
    q.qmax = (1 << bits) - 1;
    q.scale = hi > lo ? static_cast<float>((hi - lo) / q.qmax) : 1.f;
    SINKLAB_CHECK(q.scale > 0, fn, ": range [", lo, ", ", hi, "] underflows an fp32 scale");
    q.zero_point = static_cast<int32_t>(std::clamp(round_half_even(-lo / q.scale), 0.0, static_cast<double>(q.qmax)));
    return q;
  }

  // The code of x, as a V: a double, or an xsimd batch of doubles.
  template <class V>
  V code(V x) const {
    using std::max;
    using std::min;
    const V q = round_half_even(x / V(static_cast<double>(scale))) + V(static_cast<double>(zero_point));
    return min(max(q, V(static_cast<double>(qmin))), V(static_cast<double>(qmax)));
  }
  // A NaN gives qmin, as quantize_row gives it (its cast to int32 would be undefined).
  int32_t quantize(double x) const { return x != x ? qmin : static_cast<int32_t>(code(x)); }

  // out[j] = quantize(x[j]) for j < n (Code holds [qmin, qmax]); a NaN gives qmin. A plain loop,
  // which compilers vectorise (vcvtps2pd, vdivpd, vrndscalepd): std::nearbyint rounds half to even
  // in the default rounding mode, as round_half_even does in any mode, so the codes are
  // quantize()'s; 3× faster than the same code through xsimd batches and round_half_even's
  // selects on a Zen 4 core (0.34 against 1.1 ns per element), where it runs before every
  // integer GEMM. Refuses to run in another rounding mode.
  template <class T, class Code>
  void quantize_row(const T* x, int64_t n, Code* out) const {
    SINKLAB_CHECK(std::fegetround() == FE_TONEAREST, "quant::UniformQuantizer::quantize_row: the floating-point "
                  "rounding mode is not round-to-nearest (fesetround), so its codes would differ from quantize()'s");
    const double s = static_cast<double>(scale), zp = zero_point, lo = qmin, hi = qmax;
    for (int64_t j = 0; j < n; ++j) {
      double v = std::nearbyint(static_cast<double>(x[j]) / s) + zp;
      v = v >= lo ? v : lo;
      v = v <= hi ? v : hi;
      out[j] = static_cast<Code>(static_cast<int32_t>(v));
    }
  }
  double dequantize(int32_t q) const { return static_cast<double>(q - zero_point) * static_cast<double>(scale); }
  double fake(double x) const { return dequantize(quantize(x)); }
};

namespace detail {
// f(i0, m, codes): the codes of x[i0, i0 + m), a chunk of at most 512 elements at a time (i0 a
// multiple of 512), from quantize_row (vectorised), or from quantize() one by one where the
// rounding mode is not to-nearest, which quantize_row refuses.
template <class T, class F>
void for_each_code_chunk(const T* x, int64_t n, const UniformQuantizer& q, F&& f) {
  constexpr int64_t kChunk = 512;
  int32_t codes[kChunk];
  const bool nearest = std::fegetround() == FE_TONEAREST;
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    if (nearest) {
      q.quantize_row(x + i0, m, codes);
    } else {
      for (int64_t j = 0; j < m; ++j) codes[j] = q.quantize(static_cast<double>(x[i0 + j]));
    }
    f(i0, m, static_cast<const int32_t*>(codes));
  }
}

// f(begin, end) over [0, n): in parallel when the caller rounds to nearest, else all on the
// calling thread — the rounding mode is per thread and the pool's workers round to nearest, so
// a caller's other mode must not reach only some of the elements.
template <class F>
void in_callers_rounding(int64_t n, int64_t grain, F&& f) {
  if (std::fegetround() == FE_TONEAREST) {
    parallel_for(0, n, grain, f);
  } else if (n > 0) {
    f(int64_t{0}, n);
  }
}
}  // namespace detail

// Quantize → dequantize every element; the result is a new contiguous tensor, NaN where x is NaN.
// In parallel over chunks of elements (it runs on activations in every fake-quantized pass).
template <class T>
Tensor<T> fake_quantize(const Tensor<T>& x, const UniformQuantizer& q) {
  SINKLAB_CHECK(x.defined(), "quant::fake_quantize: undefined tensor");
  const Tensor<T> c = x.contiguous();
  Tensor<T> out = Tensor<T>::empty(x.shape());
  detail::in_callers_rounding(c.numel(), int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    detail::for_each_code_chunk(c.data() + begin, end - begin, q, [&](int64_t i0, int64_t m, const int32_t* codes) {
      const T* xs = c.data() + begin + i0;
      T* o = out.data() + begin + i0;
      for (int64_t j = 0; j < m; ++j) o[j] = xs[j] != xs[j] ? xs[j] : static_cast<T>(q.dequantize(codes[j]));
    });
  });
  return out;
}

// Mean squared error of fake quantization, in double: Σ (x − T(x̂))² / n, the squares summed in
// 8 interleaved lanes (element i in lane i mod 8, the lanes added in order at the end) — a fixed
// order, so a tensor gives the same bits whatever the thread count, and 0.8 ns per element on a
// Zen 4 core against 16 summed one by one through quantize(). The MSE range search
// (int8_weight.hpp) calls this once per candidate range.
template <class T>
double fake_quantize_mse(const Tensor<T>& x, const UniformQuantizer& q) {
  const Tensor<T> c = x.contiguous();
  const int64_t n = c.numel();
  constexpr int64_t kLanes = 8;
  double lane[kLanes] = {};
  detail::for_each_code_chunk(c.data(), n, q, [&](int64_t i0, int64_t m, const int32_t* codes) {
    const T* xs = c.data() + i0;  // i0 is a multiple of kLanes: element i0 + j sits in lane j mod kLanes
    double acc[kLanes];           // a local copy, which the compiler keeps in registers
    std::copy(lane, lane + kLanes, acc);
    auto add = [&](int64_t j, int64_t l) {
      const double e = static_cast<double>(xs[j]) - static_cast<double>(static_cast<T>(q.dequantize(codes[j])));
      acc[l] += e * e;
    };
    const int64_t whole = m - m % kLanes;
    for (int64_t j = 0; j < whole; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) add(j + l, l);
    for (int64_t j = whole; j < m; ++j) add(j, j - whole);
    std::copy(acc, acc + kLanes, lane);
  });
  double sum = 0;
  for (double l : lane) sum += l;
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

namespace detail {
template <class T>
void absmax_and_range(std::string_view fn, const Tensor<T>& x, double& lo, double& hi) {
  SINKLAB_CHECK(x.defined() && x.numel() > 0, fn, ": empty or undefined tensor");
  const Tensor<T> c = x.contiguous();
  lo = hi = static_cast<double>(c.data()[0]);
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double v = static_cast<double>(c.data()[i]);
    SINKLAB_CHECK(std::isfinite(v), fn, ": non-finite value ", v, " at flat index ", i, " of a tensor of shape ",
                  x.shape());
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
}
}  // namespace detail

}  // namespace sinklab::quant
