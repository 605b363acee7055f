// The CUDA attention kernels timed on the GPU (see attention_cuda.hpp).
//
// Tensor-core kernels: q, k, v and dO are converted to 16-bit codes once per shape (timed on
// their own), then every score's forward and backward is timed on the codes. Inputs of every
// shape are the leading elements of one buffer of standard normals per tensor, drawn on the
// device (Philox, core/rng.hpp) for the largest shape.
//
// SIMT kernels: launch configurations are swept for softmax and the fastest total (forward +
// backward) at the longest T times every score, so the policy ratios compare like with like.
#include "attention_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <vector>

#include "sinklab/core/rng.hpp"
#include "sinklab/cuda/attention.cuh"
#include "sinklab/cuda/attention_mma.cuh"
#include "sinklab/cuda/attention_ops.cuh"
#include "sinklab/cuda/device.cuh"

namespace sinklab::bench {
namespace {

using kernels::cuda::host::check;

// Device memory for n elements of T, freed with the object.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n) : n_(n) {
    check(cudaMalloc(reinterpret_cast<void**>(&p_), static_cast<std::size_t>(std::max<int64_t>(n, 1)) * sizeof(T)),
          "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  T* data() const { return p_; }
  void zero() { check(cudaMemset(p_, 0, static_cast<std::size_t>(n_) * sizeof(T)), "cudaMemset"); }
  // The first n elements on the host.
  std::vector<T> to_host(int64_t n) const {
    std::vector<T> h(static_cast<std::size_t>(n));
    check(cudaMemcpy(h.data(), p_, h.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
  }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

__global__ void fill_normal_kernel(float* x, int64_t n, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; 2 * i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double z0, z1;
    Philox4x32::normal2(Philox4x32::generate(key, static_cast<uint64_t>(i), 0), z0, z1);
    x[2 * i] = static_cast<float>(z0);
    if (2 * i + 1 < n) x[2 * i + 1] = static_cast<float>(z1);
  }
}

// n standard normals of stream `key`.
DeviceBuffer<float> normal_buffer(int64_t n, uint64_t key) {
  DeviceBuffer<float> b(n);
  fill_normal_kernel<<<1024, 256>>>(b.data(), n, key);
  check(cudaGetLastError(), "fill_normal_kernel");
  return b;
}

struct Median {
  double ms = 0;
  int reps = 0;
};

struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  // The median of the timed calls of f (CudaTimingBudget says how many).
  template <class F>
  Median median_ms(F&& f, const CudaTimingBudget& b) {
    for (int w = 0; w < b.warmups; ++w) f();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<float> t;
    double total = 0;
    while (static_cast<int>(t.size()) < b.max_reps &&
           (static_cast<int>(t.size()) < b.min_reps || total < 1e3 * b.budget_s)) {
      float ms = 0;
      check(cudaEventRecord(start), "cudaEventRecord");
      f();
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      t.push_back(ms);
      total += ms;
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], static_cast<int>(t.size())};
  }
};

// max |a − ref| / max |ref|; NaN when a holds a NaN or an infinity (a broken kernel must not
// read as a small difference).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::quiet_NaN();
    diff = std::max(diff, std::abs(double(a[i]) - double(ref[i])));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// ---------------------------------------------------------------- tensor-core kernels

// The float inputs (largest shape), their codes, the outputs and the scratch, shared by every shape.
struct MmaBuffers {
  DeviceBuffer<float> q, k, v, dout;
  DeviceBuffer<uint16_t> qc, kc, vc, doutc;
  DeviceBuffer<float> out, lse, dq, dk, dv, D, row_grad, sink, dsink;
  MmaBuffers(int64_t n, int64_t rows, int64_t H)
      : q(normal_buffer(n, 1)), k(normal_buffer(n, 2)), v(normal_buffer(n, 3)), dout(normal_buffer(n, 4)),
        qc(n), kc(n), vc(n), doutc(n), out(n), lse(rows), dq(n), dk(n), dv(n), D(rows), row_grad(rows),
        sink(normal_buffer(H, 5)), dsink(H) {
    dsink.zero();
  }
};

template <class E>
void to_codes(MmaBuffers& x, int64_t n) {
  kernels::cuda::host::attention_mma_codes<E>(x.q.data(), n, x.qc.data());
  kernels::cuda::host::attention_mma_codes<E>(x.k.data(), n, x.kc.data());
  kernels::cuda::host::attention_mma_codes<E>(x.v.data(), n, x.vc.data());
  kernels::cuda::host::attention_mma_codes<E>(x.dout.data(), n, x.doutc.data());
}

template <class E, class Score>
void mma_forward(const Score& score, MmaBuffers& x, const kernels::cuda::AttentionShape& sh) {
  typename Score::template Args<float> args{};
  if constexpr (Score::has_sink) args.sink_logit = x.sink.data();
  kernels::cuda::host::attention_mma_forward<E, Score, mask::Causal>(score, args, x.qc.data(), x.kc.data(), x.vc.data(),
                                                              x.out.data(), x.lse.data(), sh);
}

template <class E, class Score>
void mma_backward(const Score& score, MmaBuffers& x, const kernels::cuda::AttentionShape& sh) {
  typename Score::template Args<float> args{};
  if constexpr (Score::has_sink) args.sink_logit = x.sink.data();
  kernels::cuda::host::attention_mma_backward<E, Score, mask::Causal>(
      score, args, x.qc.data(), x.kc.data(), x.vc.data(), x.out.data(), x.lse.data(), x.doutc.data(), x.dq.data(),
      x.dk.data(), x.dv.data(), Score::has_sink ? x.dsink.data() : nullptr, x.D.data(),
      Score::has_sink ? x.row_grad.data() : nullptr, sh);
}

template <class E, class Score>
CudaMmaTiming time_mma(const Score& score, MmaBuffers& x, const kernels::cuda::AttentionShape& sh,
                       const CudaTimingBudget& budget) {
  Events ev;
  CudaMmaTiming r{Score::name, E::name, sh.d, sh.T};
  const Median f = ev.median_ms([&] { mma_forward<E>(score, x, sh); }, budget);
  mma_forward<E>(score, x, sh);  // out and lse for the backward
  const Median b = ev.median_ms([&] { mma_backward<E>(score, x, sh); }, budget);
  r.forward_ms = f.ms, r.forward_reps = f.reps;
  r.backward_ms = b.ms, r.backward_reps = b.reps;
  return r;
}

// Softmax through the tensor-core kernels (bf16 codes, already converted) against the float32
// SIMT kernels on the same float inputs.
void compare_with_simt(MmaBuffers& x, const kernels::cuda::AttentionShape& sh, CudaMmaShape& r) {
  const int64_t n = sh.B * sh.H * sh.T * sh.d;
  const score::Softmax score;
  mma_forward<simt::Bf16>(score, x, sh);
  mma_backward<simt::Bf16>(score, x, sh);
  const std::vector<float> out = x.out.to_host(n), dq = x.dq.to_host(n), dk = x.dk.to_host(n), dv = x.dv.to_host(n);

  const kernels::cuda::host::AttentionLaunch cfg = kernels::cuda::host::attention_launch<float>(sh.d);
  typename score::Softmax::Args<float> args{};
  kernels::cuda::host::attention_forward<score::Softmax, mask::Causal, float>(score, args, x.q.data(), x.k.data(),
                                                                       x.v.data(), x.out.data(), x.lse.data(), sh, cfg);
  kernels::cuda::host::attention_backward<score::Softmax, mask::Causal, float>(
      score, args, x.q.data(), x.k.data(), x.v.data(), x.out.data(), x.lse.data(), x.dout.data(), x.dq.data(),
      x.dk.data(), x.dv.data(), nullptr, x.D.data(), nullptr, sh, cfg);
  r.out_diff = max_rel_diff(out, x.out.to_host(n));
  r.dq_diff = max_rel_diff(dq, x.dq.to_host(n));
  r.dk_diff = max_rel_diff(dk, x.dk.to_host(n));
  r.dv_diff = max_rel_diff(dv, x.dv.to_host(n));
}

// ---------------------------------------------------------------- float32 SIMT kernels

struct SimtBuffers {
  DeviceBuffer<float> q, k, v, dout, out, lse, D, row_grad, dq, dk, dv, sink, dsink;
  SimtBuffers(int64_t n, int64_t rows, int64_t H)
      : q(normal_buffer(n, 1)), k(normal_buffer(n, 2)), v(normal_buffer(n, 3)), dout(normal_buffer(n, 4)), out(n),
        lse(rows), D(rows), row_grad(rows), dq(n), dk(n), dv(n), sink(normal_buffer(H, 5)), dsink(H) {
    dsink.zero();
  }
};

template <class Score>
CudaAttentionTiming time_simt(const Score& score, SimtBuffers& x, int64_t B, int64_t H, int64_t T, int64_t d,
                              const kernels::cuda::host::AttentionLaunch& cfg, const CudaTimingBudget& budget) {
  typename Score::template Args<float> args{};
  if constexpr (Score::has_sink) args.sink_logit = x.sink.data();
  const kernels::cuda::AttentionShape sh{B, H, H, T, T, d, 0.0, cfg.block_k, nullptr};
  Events ev;
  auto forward = [&] {
    kernels::cuda::host::attention_forward<Score, mask::Causal, float>(score, args, x.q.data(), x.k.data(), x.v.data(),
                                                                x.out.data(), x.lse.data(), sh, cfg);
  };
  auto backward = [&] {
    kernels::cuda::host::attention_backward<Score, mask::Causal, float>(
        score, args, x.q.data(), x.k.data(), x.v.data(), x.out.data(), x.lse.data(), x.dout.data(), x.dq.data(),
        x.dk.data(), x.dv.data(), x.dsink.data(), x.D.data(), x.row_grad.data(), sh, cfg);
  };
  CudaAttentionTiming r{Score::name, T, cfg.threads, cfg.block_k};
  r.forward_ms = ev.median_ms(forward, budget).ms;
  forward();
  r.backward_ms = ev.median_ms(backward, budget).ms;
  return r;
}

}  // namespace

CudaDeviceInfo cuda_device_info() {
  CudaDeviceInfo info;
  const char* why = nullptr;
  if (kernels::cuda::host::device_count(&why) == 0) {
    info.why = why ? why : "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.sms = prop.multiProcessorCount;
  return info;
}

CudaMmaRun cuda_mma_timings(int64_t B, int64_t H, const std::vector<int64_t>& ds, const std::vector<int64_t>& Ts,
                            const CudaTimingBudget& budget, int64_t check_T) {
  CudaMmaRun run;
  for (int64_t d : ds) {
    if (!kernels::cuda::host::attention_mma_supports(d)) {
      run.unsupported_d.push_back(d);
      continue;
    }
    const int64_t T_max = *std::max_element(Ts.begin(), Ts.end());
    MmaBuffers x(B * H * T_max * d, B * H * T_max, H);
    for (int64_t T : Ts) {
      const int64_t n = B * H * T * d;
      const kernels::cuda::AttentionShape sh{B, H, H, T, T, d, 0.0, 32, nullptr};
      CudaMmaShape shape{d, T, kernels::cuda::attention_mma_forward_blocks(sh), kernels::cuda::mma::kRows};
      {
        Events ev;
        shape.codes_ms = ev.median_ms([&] { to_codes<simt::Bf16>(x, n); }, budget).ms;
      }
      if (T == check_T) compare_with_simt(x, sh, shape);
      run.shapes.push_back(shape);
      run.timings.push_back(time_mma<simt::Bf16>(score::Softmax{}, x, sh, budget));
      run.timings.push_back(time_mma<simt::Bf16>(score::SoftmaxSink{}, x, sh, budget));
      run.timings.push_back(time_mma<simt::Bf16>(score::ClippedSoftmax{}, x, sh, budget));
      run.timings.push_back(time_mma<simt::Bf16>(score::Sigmoid{}, x, sh, budget));
      run.timings.push_back(time_mma<simt::Bf16>(score::ReLU{}, x, sh, budget));
      to_codes<simt::F16>(x, n);
      run.timings.push_back(time_mma<simt::F16>(score::Softmax{}, x, sh, budget));
    }
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return run;
}

CudaAttentionRun cuda_attention_timings(int64_t B, int64_t H, int64_t d, const std::vector<int64_t>& Ts,
                                        const CudaTimingBudget& budget) {
  CudaAttentionRun run;
  const std::vector<kernels::cuda::host::AttentionLaunch> configs{{32, 32}, {64, 32}, {128, 16}, {128, 32}, {128, 64}};
  kernels::cuda::host::AttentionLaunch best = configs[1];
  double best_total = -1;
  for (int64_t T : Ts) {
    SimtBuffers x(B * H * T * d, B * H * T, H);
    std::vector<float> out0, dq0;
    for (const auto& cfg : configs) {
      try {
        CudaAttentionTiming t = time_simt(score::Softmax{}, x, B, H, T, d, cfg, budget);
        const std::vector<float> out = x.out.to_host(B * H * T * d), dq = x.dq.to_host(B * H * T * d);
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
    SimtBuffers x(B * H * T * d, B * H * T, H);
    run.scores.push_back(time_simt(score::Softmax{}, x, B, H, T, d, best, budget));
    run.scores.push_back(time_simt(score::SoftmaxSink{}, x, B, H, T, d, best, budget));
    run.scores.push_back(time_simt(score::ClippedSoftmax{}, x, B, H, T, d, best, budget));
    run.scores.push_back(time_simt(score::Sigmoid{}, x, B, H, T, d, best, budget));
    run.scores.push_back(time_simt(score::ReLU{}, x, B, H, T, d, best, budget));
  }
  return run;
}

}  // namespace sinklab::bench
