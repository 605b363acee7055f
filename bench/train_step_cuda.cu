// The decoder's training step on the GPU (see train_step_cuda.hpp): the same model, optimiser and
// batch as the cpu side, every op through kernels::backend<cuda>. Under Precision::bf16 (the
// tape's) the weight products are cuBLAS bf16 GEMMs with float32 sums (cuda/gemm.cuh) and the fused
// attention takes the tensor-core kernels where kernels::cuda::host::detail::use_mma says so (head size
// 32, 64 or 128 on sm_80 and later), the float32 SIMT kernels otherwise.
#include "train_step_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "sinklab/cuda/backend.cuh"

namespace sinklab::bench {
namespace {

template <class F>
double median_seconds(F&& f, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

}  // namespace

CudaTrainStep cuda_train_step(const ModelSize& s, int warmup, int steps, kernels::Precision precision) {
  CudaTrainStep r;
  const char* why = nullptr;
  if (kernels::cuda::host::device_count(&why) == 0) {
    r.why = why ? why : "no CUDA device";
    return r;
  }
  cudaDeviceProp prop{};
  kernels::cuda::host::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  r.device = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  DecoderSetup<cuda> d(s);
  d.tape.set_precision(precision);
  // The attention op's own test (attention_ops.cuh) on this device, for the head size the
  // decoder's attention takes (nn/attention.hpp: d_model / heads, the configs set no head_dim).
  kernels::AttentionOptions attention_options;
  attention_options.precision = precision;
  r.tensor_core_attention = kernels::cuda::host::detail::use_mma<float>(attention_options, s.d / s.heads);
  for (const auto* p : d.params) r.params += p->numel();
  auto forward_only = [&] {
    autodiff::no_grad off;
    d.tape.clear();
    return d.model->loss(d.tape, d.batch.x, d.batch.y).item();
  };
  auto train_step = [&] {
    d.tape.clear();
    d.opt->zero_grad();
    autodiff::Var<float, cuda> loss = d.model->loss(d.tape, d.batch.x, d.batch.y);
    d.tape.backward(loss);
    d.opt->step();
    return loss.item();
  };
  r.loss0 = forward_only();
  r.train_s = median_seconds(train_step, warmup, steps);
  r.fwd_s = median_seconds(forward_only, warmup, steps);
  r.loss_end = forward_only();
  return r;
}

}  // namespace sinklab::bench
