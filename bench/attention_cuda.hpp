// The GPU half of bench/attention (`--device cuda`): the fused CUDA attention kernels timed with
// CUDA events. Compiled by nvcc into the same program when the CUDA backend is built
// (bench/attention_cuda.cu); bench/attention.cpp prints the tables beside PyTorch's numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklab::bench {

struct CudaAttentionTiming {
  std::string score;   // the score policy's name
  int64_t T = 0;
  int threads = 0;     // threads per block (query or key rows)
  int64_t block_k = 0; // keys per shared-memory tile
  double forward_ms = 0, backward_ms = 0;  // medians
  // max|out − out₀| / max|out₀| and the same for dq against the first configuration at this T:
  // every launch configuration must compute the same attention
  double out_diff = 0, dq_diff = 0;
};

struct CudaAttentionRun {
  std::string device;  // the GPU's name; empty when there is none (`why` says why)
  std::string why;
  std::vector<CudaAttentionTiming> launches;  // softmax under each launch configuration, every T
  std::vector<CudaAttentionTiming> scores;    // every score under the best configuration, every T
};

// Causal attention, float, q/k/v/dO [B, H, T, d] with standard-normal entries.
CudaAttentionRun cuda_attention_timings(int64_t B, int64_t H, int64_t d, const std::vector<int64_t>& Ts, int reps);

}  // namespace sinklab::bench
