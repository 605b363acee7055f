// The GPU half of bench/attention (`--device cuda`): the CUDA attention kernels timed with CUDA
// events. Compiled by nvcc into the same program when the CUDA backend is built
// (bench/attention_cuda.cu); bench/attention.cpp prints the tables beside PyTorch's numbers.
//
// Two kernel families: the tensor-core kernels (cuda/include/sinklab/cuda/attention_mma.cuh:
// q, k, v, dO as bf16 or fp16 codes, float out, lse and gradients) and the float32 SIMT kernels
// (attention.cuh: a query or key row per thread).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklab::bench {

// The first CUDA device: its name and SM count, or an empty name and the runtime's reason.
struct CudaDeviceInfo {
  std::string name, why;
  int sms = 0;
};
CudaDeviceInfo cuda_device_info();

// How long timing goes on: after `warmups` untimed calls, timed calls until they add up to
// `budget_s` seconds, at least `min_reps` and at most `max_reps`; the median is reported.
struct CudaTimingBudget {
  double budget_s = 0.3;
  int min_reps = 3, max_reps = 100, warmups = 2;
};

// ---------------------------------------------------------------- tensor-core kernels

struct CudaMmaTiming {
  std::string score;  // the score policy's name (Score::name)
  std::string elem;   // "bf16" or "fp16": the codes q, k, v, dO are given in
  int64_t d = 0, T = 0;
  double forward_ms = 0, backward_ms = 0;  // medians; backward is all of attention_mma_backward
  int forward_reps = 0, backward_reps = 0;
};

// Once per shape: the conversion of q, k, v, dO (float → bf16 codes, four calls of
// attention_mma_codes; not part of the timings above), and the softmax kernels' bf16 results
// against the float32 SIMT kernels' on the same float inputs (max |x − ref| / max |ref| of out,
// dq, dk, dv; NaN if a result is not finite; negative where not compared).
struct CudaMmaShape {
  int64_t d = 0, T = 0;
  int64_t forward_blocks = 0, block_rows = 0;  // the forward's grid: blocks of block_rows query rows
  double codes_ms = 0;
  double out_diff = -1, dq_diff = -1, dk_diff = -1, dv_diff = -1;
};

struct CudaMmaRun {
  std::vector<int64_t> unsupported_d;  // head sizes attention_mma_supports refuses (not timed)
  std::vector<CudaMmaShape> shapes;
  std::vector<CudaMmaTiming> timings;  // every score in bf16, softmax also in fp16, every (d, T)
};

// Causal attention, q/k/v/dO [B, H, T, d] standard normal, for every d in `ds` and T in `Ts`.
// `check_T`: the shapes at this T get the comparison with the SIMT kernels (0: none).
CudaMmaRun cuda_mma_timings(int64_t B, int64_t H, const std::vector<int64_t>& ds, const std::vector<int64_t>& Ts,
                            const CudaTimingBudget& budget, int64_t check_T);

// ---------------------------------------------------------------- float32 SIMT kernels

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
  std::vector<CudaAttentionTiming> launches;  // softmax under each launch configuration, every T
  std::vector<CudaAttentionTiming> scores;    // every score under the best configuration, every T
};

// Causal attention, float, q/k/v/dO [B, H, T, d] with standard-normal entries.
CudaAttentionRun cuda_attention_timings(int64_t B, int64_t H, int64_t d, const std::vector<int64_t>& Ts,
                                        const CudaTimingBudget& budget);

}  // namespace sinklab::bench
