// The GPU half of bench/train_step (`--device cuda`): the decoder of bench/decoder.hpp built as
// Module<float, cuda> and timed on the GPU. Compiled by nvcc into the same program when the CUDA
// backend is built (bench/train_step_cuda.cu); bench/train_step.cpp prints it beside PyTorch's
// same model on the same GPU.
#pragma once
#include <cstdint>
#include <string>

#include "decoder.hpp"

namespace sinklab::bench {

struct CudaTrainStep {
  std::string device;  // the GPU's name and sm_XY; empty when there is none (`why` says why)
  std::string why;
  int64_t params = 0;
  double loss0 = 0;     // forward-only loss of the fresh model
  double loss_end = 0;  // forward-only loss after the warmup + timed training steps
  double train_s = 0;   // median seconds per training step (forward, backward, AdamW)
  double fwd_s = 0;     // median seconds per forward-only pass
  bool tensor_core_attention = false;  // the fused attention took the tensor-core kernels (attention_mma.cuh)
};

// A fresh model (the same numbers on every call) with its tape at `precision`; `warmup` untimed
// then `steps` timed calls of each of the training step and the forward-only pass. Every call
// ends with the loss copied to the host, so a host clock times the GPU's whole step.
CudaTrainStep cuda_train_step(const ModelSize& s, int warmup, int steps,
                              kernels::Precision precision = kernels::Precision::fp32);

}  // namespace sinklab::bench
