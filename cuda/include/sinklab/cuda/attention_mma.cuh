// Host launchers for the tensor-core attention (kernels/cuda/attention_mma_forward.hpp,
// attention_mma_backward.hpp): the __global__ entry points, one per head size (32, 64, 128), shared
// memory opted in above 48 KiB, a check after each launch. Operands are dense 16-bit codes of E
// (simt::Bf16 or simt::F16; attention_mma_codes converts floats), results float. Device
// pointers throughout; the caller owns the buffers. Needs sm_80 or later.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "sinklab/core/error.hpp"
#include "sinklab/cuda/attention.cuh"
#include "sinklab/cuda/device.cuh"
#include "sinklab/kernels/cuda/attention_backward.hpp"
#include "sinklab/kernels/cuda/attention_mma_backward.hpp"
#include "sinklab/kernels/cuda/attention_mma_forward.hpp"
#include "sinklab/kernels/cuda/convert.hpp"

namespace sinklab::kernels::cuda::host {

inline bool attention_mma_supports(int64_t d) { return d == 32 || d == 64 || d == 128; }

namespace detail {

template <class E>
__global__ void attention_mma_codes_kernel(const float* src, int64_t n, uint16_t* dst) {
  simt::Cuda ctx;
  kernels::cuda::to_codes_dense<E>(ctx, src, 1, 1, n, n, n, dst);
}

template <class E, int D, class Score, class Mask>
__global__ void __launch_bounds__(kernels::cuda::mma::kThreads)
    attention_mma_forward_kernel(Score score, typename Score::template Args<float> args, const uint16_t* q,
                                 const uint16_t* k, const uint16_t* v, float* out, float* lse,
                                 kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_mma_forward<E, D, simt::Cuda, Score, Mask>(ctx, score, args, q, k, v, out, lse, sh);
}
template <class E, class Score>
__global__ void attention_mma_rows_kernel(Score score, typename Score::template Args<float> args, const float* out,
                                          const float* lse, const uint16_t* dout, float* D, float* row_grad,
                                          kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_mma_backward_rows<E>(ctx, score, args, out, lse, dout, D, row_grad, sh);
}
template <class E, int D, bool Statistics, class Score, class Mask>
__global__ void __launch_bounds__(kernels::cuda::mma::kThreads)
    attention_mma_q_kernel(Score score, typename Score::template Args<float> args, const uint16_t* q,
                           const uint16_t* k, const uint16_t* v, const float* lse, float* Drow, const uint16_t* dout,
                           float* dq, float* row_grad, kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_mma_backward_q<E, D, Statistics, simt::Cuda, Score, Mask>(ctx, score, args, q, k, v, lse,
                                                                                    Drow, dout, dq, row_grad, sh);
}
template <class E, int D, class Score, class Mask>
__global__ void __launch_bounds__(kernels::cuda::mma::kThreads)
    attention_mma_kv_kernel(Score score, const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                            const float* Drow, const uint16_t* dout, float* dk, float* dv,
                            kernels::cuda::AttentionShape sh) {
  simt::Cuda ctx;
  kernels::cuda::attention_mma_backward_kv<E, D, simt::Cuda, Score, Mask>(ctx, score, q, k, v, lse, Drow, dout, dk,
                                                                          dv, sh);
}

// Opts `kernel` in to `bytes` of dynamic shared memory. The largest configuration, the dK/dV
// pass at d = 128, takes 98 KiB: within what every GPU of sm_80 on allows a block (99 KiB on
// sm_86/89, 163 on the A100, 227 on the H100).
template <class Kernel>
void allow_mma_shared(Kernel kernel, std::size_t bytes, int64_t d, const char* what) {
  allow_shared_bytes(kernel, bytes, what, "the tensor-core kernels at head size " + std::to_string(d),
                     "they need sm_80 or later");
}
static_assert(kernels::cuda::attention_mma_backward_kv_shared_bytes<128>() <= 99 * 1024,
              "the tensor-core attention's largest block must fit sm_86/89's 99 KiB of shared memory");

// The operands a cp.async reads 16 bytes at a time must start on 16 bytes (rows then do: d is a
// multiple of 8), and a score that saves lse (the softmax family) writes it.
inline void check_mma_operands(const char* what, std::initializer_list<const void*> codes, bool needs_lse,
                               const void* lse) {
  for (const void* p : codes)
    SINKLAB_CHECK(p && reinterpret_cast<uintptr_t>(p) % 16 == 0, what,
                  ": q, k, v and dO must be device pointers aligned to 16 bytes, got ", p);
  SINKLAB_CHECK(!needs_lse || lse, what, ": the softmax family needs lse");
}

template <class F>
void with_head_size(int64_t d, const char* what, F&& f) {
  if (d == 32)
    f(std::integral_constant<int, 32>{});
  else if (d == 64)
    f(std::integral_constant<int, 64>{});
  else if (d == 128)
    f(std::integral_constant<int, 128>{});
  else
    ::sinklab::detail::fail(what, ": the tensor-core kernels take head sizes 32, 64 and 128, got ", d);
}

}  // namespace detail

// dst[0 … n) = src rounded to E (to nearest even).
template <class E>
void attention_mma_codes(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream = nullptr) {
  if (n == 0) return;
  const int64_t blocks = (n + 255) / 256;
  detail::attention_mma_codes_kernel<E><<<detail::grid(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(src, n, dst);
  detail::launched("attention_mma_codes_kernel");
}

// out [B, H, T, d] and, for the softmax family, lse [B, H, T] (may be null otherwise).
template <class E, class Score, class Mask>
void attention_mma_forward(const Score& score, const typename Score::template Args<float>& args, const uint16_t* q,
                           const uint16_t* k, const uint16_t* v, float* out, float* lse, kernels::cuda::AttentionShape sh,
                           cudaStream_t stream = nullptr) {
  sh.block_k = kernels::cuda::mma::kRows;
  const int64_t blocks = kernels::cuda::attention_mma_forward_blocks(sh);
  if (blocks == 0) return;
  detail::check_mma_operands("attention_mma_forward", {q, k, v}, score::saves_lse_v<Score>, lse);
  detail::with_head_size(sh.d, "attention_mma_forward", [&](auto d) {
    constexpr int D = decltype(d)::value;
    auto kernel = detail::attention_mma_forward_kernel<E, D, Score, Mask>;
    const std::size_t shared = kernels::cuda::attention_mma_forward_shared_bytes<D>();
    detail::allow_mma_shared(kernel, shared, sh.d, "attention_mma_forward");
    kernel<<<detail::grid(blocks), kernels::cuda::mma::kThreads, shared, stream>>>(score, args, q, k, v, out, lse, sh);
    detail::launched("attention_mma_forward_kernel");
  });
}

// dq [B, H, T, d], dk, dv [B, H_kv, S, d] (overwritten) and, for a sink, dparam [H] (accumulated)
// from the forward's out and lse and dO (codes). D, row_grad: [B, H, T] scratch (row_grad may be
// null without a sink).
template <class E, class Score, class Mask>
void attention_mma_backward(const Score& score, const typename Score::template Args<float>& args, const uint16_t* q,
                            const uint16_t* k, const uint16_t* v, const float* out, const float* lse,
                            const uint16_t* dout, float* dq, float* dk, float* dv, float* dparam, float* D,
                            float* row_grad, kernels::cuda::AttentionShape sh, cudaStream_t stream = nullptr) {
  using kernels::cuda::mma::kThreads;
  sh.block_k = kernels::cuda::mma::kRows;
  const int64_t query_blocks = kernels::cuda::attention_mma_forward_blocks(sh);
  const int64_t key_blocks = kernels::cuda::attention_mma_backward_kv_blocks(sh);
  constexpr score::Delta delta = score::row_grad_t<Score, float>::delta;
  if (query_blocks > 0 || key_blocks > 0)
    detail::check_mma_operands("attention_mma_backward", {q, k, v, dout}, score::saves_lse_v<Score>, lse);
  detail::with_head_size(sh.d, "attention_mma_backward", [&](auto d) {
    constexpr int Dh = decltype(d)::value;
    const std::size_t q_shared = kernels::cuda::attention_mma_backward_q_shared_bytes<Dh>();
    if constexpr (delta != score::Delta::None) {
      if (query_blocks > 0) {
        if constexpr (delta == score::Delta::FromKeys) {  // D = Σ P w'(P) dA needs a sweep over the keys
          auto stats = detail::attention_mma_q_kernel<E, Dh, true, Score, Mask>;
          detail::allow_mma_shared(stats, q_shared, Dh, "attention_mma_backward (statistics)");
          stats<<<detail::grid(query_blocks), kThreads, q_shared, stream>>>(score, args, q, k, v, lse, D, dout,
                                                                             nullptr, row_grad, sh);
          detail::launched("attention_mma_q_kernel (statistics)");
        } else {
          const int64_t rows = sh.B * sh.H * sh.T, per_block = 8;  // a warp per row
          detail::attention_mma_rows_kernel<E, Score><<<detail::grid((rows + per_block - 1) / per_block),
                                                        per_block * simt::kWarp, 0, stream>>>(score, args, out, lse,
                                                                                              dout, D, row_grad, sh);
          detail::launched("attention_mma_rows_kernel");
        }
      }
    }
    if (key_blocks > 0) {
      auto kv = detail::attention_mma_kv_kernel<E, Dh, Score, Mask>;
      const std::size_t kv_shared = kernels::cuda::attention_mma_backward_kv_shared_bytes<Dh>();
      detail::allow_mma_shared(kv, kv_shared, Dh, "attention_mma_backward (dK, dV)");
      kv<<<detail::grid(key_blocks), kThreads, kv_shared, stream>>>(score, q, k, v, lse, D, dout, dk, dv, sh);
      detail::launched("attention_mma_kv_kernel");
    }
    if (query_blocks > 0) {
      auto qk = detail::attention_mma_q_kernel<E, Dh, false, Score, Mask>;
      detail::allow_mma_shared(qk, q_shared, Dh, "attention_mma_backward (dQ)");
      qk<<<detail::grid(query_blocks), kThreads, q_shared, stream>>>(score, args, q, k, v, lse, D, dout, dq, nullptr,
                                                                      sh);
      detail::launched("attention_mma_q_kernel");
    }
  });
  if constexpr (Score::has_sink) {
    SINKLAB_CHECK(row_grad && dparam, "attention_mma_backward: ", Score::name, " needs row_grad and dparam");
    detail::launch_backward_params(row_grad, dparam, sh, stream);
  }
}

}  // namespace sinklab::kernels::cuda::host
