// A trainable tensor with its gradient buffer. Tapes bind a Parameter as a leaf whose
// gradient accumulates straight into `grad`; optimisers, checkpoints and probes see
// parameters through a visitor over (name, Parameter&) pairs.
#pragma once
#include <string>
#include <utility>

#include "sinklab/core/tensor.hpp"

namespace sinklab::autodiff {

template <class T, class Device = cpu>
struct Parameter {
  std::string name;
  Tensor<T, Device> value;
  Tensor<T, Device> grad;
  bool requires_grad = true;

  Parameter() = default;
  Parameter(std::string n, Tensor<T, Device> v)
      : name(std::move(n)), value(std::move(v)), grad(Tensor<T, Device>::zeros(value.shape())) {}

  const Shape& shape() const { return value.shape(); }
  int64_t numel() const { return value.numel(); }
  void zero_grad() { grad.fill(T(0)); }
};

}  // namespace sinklab::autodiff
