// The fused CUDA attention kernels timed on the GPU (see attention_cuda.hpp). Launch
// configurations are swept for softmax and the fastest total (forward + backward) at the longest
// T times every score, so the policy ratios compare like with like.
#include "attention_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/cuda/attention.cuh"
#include "sinklab/cuda/memory.cuh"

namespace sinklab::bench {
namespace {

using DeviceTensor = Tensor<float, cuda>;

struct Buffers {
  DeviceTensor q, k, v, dout, out, lse, D, row_grad, dq, dk, dv, sink, dsink;
};

Buffers make_buffers(int64_t B, int64_t H, int64_t T, int64_t d) {
  Rng rng(7);
  auto normal = [&](int64_t n) { return DeviceTensor::from({n}, rng.normal<float>({n}, 0.f, 1.f).to_vector()); };
  auto zeros = [&](int64_t n) { return DeviceTensor::from({n}, std::vector<float>(n, 0.f)); };
  const int64_t n = B * H * T * d, rows = B * H * T;
  return {normal(n), normal(n), normal(n), normal(n), zeros(n),  zeros(rows), zeros(rows),
          zeros(rows), zeros(n),  zeros(n),  zeros(n),  normal(H), zeros(H)};
}

struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    cuda_backend::check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_backend::check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  // The median of up to `reps` timed calls after two warm-ups, stopping early (after three) once
  // the timed calls add up to a second, so that slow configurations do not dominate the run.
  template <class F>
  double median_ms(F&& f, int reps) {
    for (int w = 0; w < 2; ++w) f();
    std::vector<float> t;
    float total = 0;
    while (static_cast<int>(t.size()) < reps && (t.size() < 3 || total < 1000.f)) {
      float ms = 0;
      cuda_backend::check(cudaEventRecord(start), "cudaEventRecord");
      f();
      cuda_backend::check(cudaEventRecord(stop), "cudaEventRecord");
      cuda_backend::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      cuda_backend::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      t.push_back(ms);
      total += ms;
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

template <class Score>
CudaAttentionTiming time_score(const Score& score, Buffers& x, int64_t B, int64_t H, int64_t T, int64_t d,
                               const cuda_backend::AttentionLaunch& cfg, int reps) {
  typename Score::template Args<float> args{};
  if constexpr (Score::has_sink) args.sink_logit = x.sink.data();
  const kernels::cuda::AttentionShape sh{B, H, H, T, T, d, 0.0, cfg.block_k, nullptr};
  Events ev;
  auto forward = [&] {
    cuda_backend::attention_forward<Score, mask::Causal, float>(score, args, x.q.data(), x.k.data(), x.v.data(),
                                                                x.out.data(), x.lse.data(), sh, cfg);
  };
  auto backward = [&] {
    cuda_backend::attention_backward<Score, mask::Causal, float>(
        score, args, x.q.data(), x.k.data(), x.v.data(), x.out.data(), x.lse.data(), x.dout.data(), x.dq.data(),
        x.dk.data(), x.dv.data(), x.dsink.data(), x.D.data(), x.row_grad.data(), sh, cfg);
  };
  CudaAttentionTiming r{Score::name, T, cfg.threads, cfg.block_k};
  r.forward_ms = ev.median_ms(forward, reps);
  forward();
  r.backward_ms = ev.median_ms(backward, reps);
  return r;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(ref[i])));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

CudaAttentionRun cuda_attention_timings(int64_t B, int64_t H, int64_t d, const std::vector<int64_t>& Ts, int reps) {
  CudaAttentionRun run;
  const char* why = nullptr;
  if (cuda_backend::device_count(&why) == 0) {
    run.why = why ? why : "no CUDA device";
    return run;
  }
  cudaDeviceProp prop{};
  cuda_backend::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  run.device = prop.name;

  const std::vector<cuda_backend::AttentionLaunch> configs{{32, 32}, {64, 32}, {128, 16}, {128, 32}, {128, 64}};
  cuda_backend::AttentionLaunch best = configs[1];
  double best_total = -1;
  for (int64_t T : Ts) {
    Buffers x = make_buffers(B, H, T, d);
    std::vector<float> out0, dq0;
    for (const auto& cfg : configs) {
      try {
        CudaAttentionTiming t = time_score(score::Softmax{}, x, B, H, T, d, cfg, reps);
        const std::vector<float> out = x.out.to_vector(), dq = x.dq.to_vector();
        if (out0.empty()) out0 = out, dq0 = dq;
        t.out_diff = max_rel_diff(out, out0);
        t.dq_diff = max_rel_diff(dq, dq0);
        run.launches.push_back(t);
        if (T == Ts.back() && (best_total < 0 || t.forward_ms + t.backward_ms < best_total)) {
          best_total = t.forward_ms + t.backward_ms;
          best = cfg;
        }
      } catch (const std::exception&) {
        cudaGetLastError();  // a configuration whose shared memory the device cannot give: not timed
      }
    }
  }
  for (int64_t T : Ts) {
    Buffers x = make_buffers(B, H, T, d);
    run.scores.push_back(time_score(score::Softmax{}, x, B, H, T, d, best, reps));
    run.scores.push_back(time_score(score::SoftmaxSink{}, x, B, H, T, d, best, reps));
    run.scores.push_back(time_score(score::ClippedSoftmax{}, x, B, H, T, d, best, reps));
    run.scores.push_back(time_score(score::Sigmoid{}, x, B, H, T, d, best, reps));
    run.scores.push_back(time_score(score::ReLU{}, x, B, H, T, d, best, reps));
  }
  return run;
}

}  // namespace sinklab::bench
