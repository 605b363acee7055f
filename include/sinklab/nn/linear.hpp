// Linear (x·W [+ b]) and Embedding layers.
//
// Weights are stored [in, out] so the forward is one GEMM without a transpose; PyTorch
// stores nn.Linear weights [out, in] (transpose when exchanging checkpoints).
//
// Linear's weight starts from `init` (fan_in = in under Init::pytorch()); its bias, if any,
// from init.for_bias(in): 0, or U(±1/√in) under Init::pytorch() as nn.Linear. Embedding's table
// starts from init.for_embedding(): N(0, 1) under Init::pytorch() as nn.Embedding.
#pragma once
#include <string>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/nn/projection.hpp"

namespace sinklab::nn {

template <class T, class Device = cpu>
struct Linear {
  Parameter<T, Device> weight;  // [in, out]
  Parameter<T, Device> bias;    // [out], undefined when bias = false
  int64_t in = 0, out = 0;
  std::string name;

  Linear() = default;
  Linear(std::string prefix, int64_t in_features, int64_t out_features, Rng& rng, Init init = Init::normal(),
         bool with_bias = false)
      : in(in_features), out(out_features), name(std::move(prefix)) {
    SINKLAB_CHECK(in > 0 && out > 0, "Linear '", name, "': features must be positive, got in=", in, " out=", out);
    weight = Parameter<T, Device>(join_name(name, "weight"), make_tensor<T, Device>({in, out}, init, rng));
    if (with_bias)
      bias = Parameter<T, Device>(join_name(name, "bias"), make_tensor<T, Device>({out}, init.for_bias(in), rng));
  }

  bool has_bias() const { return bias.value.defined(); }

  // x [..., in] → [..., out]
  autodiff::Var<T, Device> operator()(autodiff::Tape<T, Device>& tape, autodiff::Var<T, Device> x) {
    SINKLAB_CHECK(x.rank() >= 1 && x.shape()[-1] == in, "Linear '", name, "': input of shape ", x.shape(),
                  " has last axis ", (x.rank() ? x.shape()[-1] : 0), ", expected ", in);
    auto y = x.rank() == 1 ? reshape(project(tape, reshape(x, {1, in}), weight), {out}) : project(tape, x, weight);
    return has_bias() ? y + tape.param(bias) : y;
  }

  template <class V>
  void parameters(V&& visit) {
    visit(weight);
    if (has_bias()) visit(bias);
  }
};

template <class T, class Device = cpu>
struct Embedding {
  Parameter<T, Device> weight;  // [vocab, dim]
  int64_t vocab = 0, dim = 0;
  std::string name;

  Embedding() = default;
  Embedding(std::string prefix, int64_t vocab_size, int64_t d, Rng& rng, Init init = Init::normal())
      : vocab(vocab_size), dim(d), name(std::move(prefix)) {
    SINKLAB_CHECK(vocab > 0 && dim > 0, "Embedding '", name, "': sizes must be positive, got vocab=", vocab,
                  " dim=", dim);
    weight = Parameter<T, Device>(join_name(name, "weight"),
                                  make_tensor<T, Device>({vocab, dim}, init.for_embedding(), rng));
  }

  autodiff::Var<T, Device> operator()(autodiff::Tape<T, Device>& tape, const Tensor<int32_t, Device>& ids) {
    return autodiff::embedding(tape.param(weight), ids);
  }

  template <class V>
  void parameters(V&& visit) {
    visit(weight);
  }
};

}  // namespace sinklab::nn
