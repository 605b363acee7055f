// A batch of next-token training pairs, shared by the data sources that produce token sequences.
#pragma once
#include <cstdint>

#include "sinklab/core/tensor.hpp"

namespace sinklab::data {

struct TokenBatch {
  Tensor<int32_t> x;  // [B, T] inputs
  Tensor<int32_t> y;  // [B, T] targets: y[b, t] is the token after x[b, t]
};

}  // namespace sinklab::data
