// Activation ranges for asymmetric per-tensor quantization (W8A8): the running min and max of
// every calibration batch observed, turned into an asymmetric UniformQuantizer (0 always
// inside the range, so zero padding and ReLU zeros stay exact).
#pragma once
#include <algorithm>
#include <cstdint>

#include "sinklab/quant/uniform.hpp"

namespace sinklab::quant {

class MinMaxObserver {
 public:
  template <class T>
  void observe(const Tensor<T>& x) {
    double lo, hi;
    detail::absmax_and_range("quant::MinMaxObserver::observe", x, lo, hi);
    lo_ = batches_ ? std::min(lo_, lo) : lo;
    hi_ = batches_ ? std::max(hi_, hi) : hi;
    ++batches_;
  }
  int64_t batches() const { return batches_; }
  double min() const { return lo_; }
  double max() const { return hi_; }

  UniformQuantizer quantizer(int bits = 8) const {
    SINKLAB_CHECK(batches_ > 0, "quant::MinMaxObserver::quantizer: no calibration batch observed");
    return UniformQuantizer::asymmetric(lo_, hi_, bits);
  }
  template <class T>
  Tensor<T> fake_quantize(const Tensor<T>& x, int bits = 8) const {
    return quant::fake_quantize(x, quantizer(bits));
  }
  void reset() { batches_ = 0; }

 private:
  double lo_ = 0, hi_ = 0;
  int64_t batches_ = 0;
};

}  // namespace sinklab::quant
