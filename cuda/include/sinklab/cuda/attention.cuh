// Host launchers for the fused attention kernels (kernels/cuda/attention_forward.hpp,
// attention_backward.hpp): the __global__ entry points, grid and shared-memory sizing (opting
// in to more than 48 KiB of dynamic shared memory where a configuration needs it) and error
// checks after each launch. Device pointers throughout; the caller owns the buffers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sinklab/core/error.hpp"
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/attention_backward.hpp"
#include "sinklab/kernels/cuda/attention_forward.hpp"

namespace sinklab::kernels::cuda::host {

// Threads per block (one query or key row each) and keys per shared-memory tile.
struct AttentionLaunch {
  int threads = 64;
  int64_t block_k = 32;
  cudaStream_t stream = nullptr;
};

namespace detail {

template <class Score, class Mask, class T>
__global__ void attention_forward_kernel(Score score, typename Score::template Args<T> args, const T* q, const T* k,
                                         const T* v, T* out, T* lse, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_forward<simt::Cuda, Score, Mask, T>(ctx, score, args, q, k, v, out, lse, sh);
}
template <class Score, class Mask, class T>
__global__ void attention_backward_rows_kernel(Score score, typename Score::template Args<T> args, const T* q,
                                               const T* k, const T* v, const T* out, const T* lse, const T* dout, T* D,
                                               T* row_grad, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_rows<simt::Cuda, Score, Mask, T>(ctx, score, args, q, k, v, out, lse, dout, D,
                                                                     row_grad, sh);
}
template <class Score, class Mask, class T>
__global__ void attention_backward_kv_kernel(Score score, const T* q, const T* k, const T* v, const T* lse, const T* D,
                                             const T* dout, T* dk, T* dv, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_kv<simt::Cuda, Score, Mask, T>(ctx, score, q, k, v, lse, D, dout, dk, dv, sh);
}
template <class Score, class Mask, class T>
__global__ void attention_backward_q_kernel(Score score, const T* q, const T* k, const T* v, const T* lse, const T* D,
                                            const T* dout, T* dq, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_q<simt::Cuda, Score, Mask, T>(ctx, score, q, k, v, lse, D, dout, dq, sh);
}
template <class T>
__global__ void attention_backward_params_kernel(const T* row_grad, T* dparam, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_backward_params(ctx, row_grad, dparam, sh);
}

// Allows `kernel` `bytes` of dynamic shared memory, or fails naming `what`, the configuration
// that does not fit and what to do about it.
template <class Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes, const char* what, const std::string& config,
                        const char* remedy) {
  if (bytes <= 48 * 1024) return;
  int dev = 0, most = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  SINKLAB_CHECK(bytes <= static_cast<std::size_t>(most), what, ": ", config, " need ", bytes,
                " bytes of shared memory; the device allows ", most, " per block (", remedy, ")");
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}
template <class Kernel>
void allow_shared(Kernel kernel, std::size_t bytes, const AttentionLaunch& cfg, const char* what) {
  allow_shared_bytes(kernel, bytes, what,
                     std::to_string(cfg.threads) + " threads with block_k " + std::to_string(cfg.block_k),
                     "use fewer threads or a smaller block_k");
}

inline unsigned grid(int64_t blocks) { return static_cast<unsigned>(blocks < 2147483647 ? blocks : 2147483647); }

inline void launched(const char* what) { check(cudaGetLastError(), what); }

// dparam += the per-head sums of row_grad: a block of kParamsThreads per head (both attention
// families' backward end with it).
template <class T>
void launch_backward_params(const T* row_grad, T* dparam, const kernels::cuda::AttentionShape& sh,
                            cudaStream_t stream) {
  constexpr int threads = kernels::cuda::kParamsThreads;
  attention_backward_params_kernel<T>
      <<<grid(sh.H > 0 ? sh.H : 1), threads, threads * sizeof(T), stream>>>(row_grad, dparam, sh);
  launched("attention_backward_params_kernel");
}

}  // namespace detail

// out [B, H, T, d] and, for the softmax family, lse [B, H, T] from q, k, v (see AttentionShape).
template <class Score, class Mask, class T>
void attention_forward(const Score& score, const typename Score::template Args<T>& args, const T* q, const T* k,
                       const T* v, T* out, T* lse, kernels::cuda::AttentionShape sh, const AttentionLaunch& cfg = {}) {
  sh.block_k = cfg.block_k;
  const std::size_t shared = kernels::cuda::attention_forward_shared_bytes<T>(cfg.threads, sh.block_k, sh.d);
  const int64_t blocks = kernels::cuda::attention_forward_blocks(sh, cfg.threads);
  if (blocks == 0) return;  // no query rows
  auto kernel = detail::attention_forward_kernel<Score, Mask, T>;
  detail::allow_shared(kernel, shared, cfg, "attention_forward");
  kernel<<<detail::grid(blocks), cfg.threads, shared, cfg.stream>>>(score, args, q, k, v, out, lse, sh);
  detail::launched("attention_forward_kernel");
}

// dq [B, H, T, d], dk, dv [B, H_kv, S, d] (overwritten) and, for a sink, dparam [H] (accumulated)
// from the forward's out and lse and dO. D and row_grad: [B, H, T] scratch (row_grad may be null
// without a sink).
template <class Score, class Mask, class T>
void attention_backward(const Score& score, const typename Score::template Args<T>& args, const T* q, const T* k,
                        const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv, T* dparam, T* D,
                        T* row_grad, kernels::cuda::AttentionShape sh, const AttentionLaunch& cfg = {}) {
  sh.block_k = cfg.block_k;
  const std::size_t shared = kernels::cuda::attention_backward_shared_bytes<T>(cfg.threads, sh.block_k, sh.d);
  const unsigned query_blocks = detail::grid(kernels::cuda::attention_forward_blocks(sh, cfg.threads));
  const unsigned key_blocks = detail::grid(sh.B * sh.Hkv * ((sh.S + cfg.threads - 1) / cfg.threads));
  // A launch of no blocks is an error: with no query rows (T = 0) only the key side runs (dk and
  // dv come out zero), with no keys (S = 0) only the query side.
  if constexpr (score::row_grad_t<Score, T>::delta != score::Delta::None) {  // D first
    if (query_blocks > 0) {
      auto rows = detail::attention_backward_rows_kernel<Score, Mask, T>;
      detail::allow_shared(rows, shared, cfg, "attention_backward_rows");
      rows<<<query_blocks, cfg.threads, shared, cfg.stream>>>(score, args, q, k, v, out, lse, dout, D, row_grad, sh);
      detail::launched("attention_backward_rows_kernel");
    }
  }
  if (key_blocks > 0) {
    auto kv = detail::attention_backward_kv_kernel<Score, Mask, T>;
    detail::allow_shared(kv, shared, cfg, "attention_backward_kv");
    kv<<<key_blocks, cfg.threads, shared, cfg.stream>>>(score, q, k, v, lse, D, dout, dk, dv, sh);
    detail::launched("attention_backward_kv_kernel");
  }
  if (query_blocks > 0) {
    auto qk = detail::attention_backward_q_kernel<Score, Mask, T>;
    detail::allow_shared(qk, shared, cfg, "attention_backward_q");
    qk<<<query_blocks, cfg.threads, shared, cfg.stream>>>(score, q, k, v, lse, D, dout, dq, sh);
    detail::launched("attention_backward_q_kernel");
  }
  if constexpr (Score::has_sink) {
    SINKLAB_CHECK(row_grad && dparam, "attention_backward: ", Score::name, " needs row_grad and dparam");
    detail::launch_backward_params(row_grad, dparam, sh, cfg.stream);
  }
}

}  // namespace sinklab::kernels::cuda::host
