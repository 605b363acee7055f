// Differentiable matrix products. A product with a weight (b of rank 2) runs at the tape's
// precision (fp32, or bf16 operands with fp32 accumulation), forward and backward alike; batched
// products stay fp32.
#pragma once
#include "sinklab/autodiff/tape.hpp"
#include "sinklab/core/extern_template.hpp"

namespace sinklab::autodiff {

// a [..., M, K] · b [K, N] → [..., M, N]  (a weight shared over the leading axes), or
// a [B..., M, K] · b [B..., K, N] → [B..., M, N]  (batched, equal leading axes).
template <class T, class D>
Var<T, D> matmul(Var<T, D> a, Var<T, D> b) {
  using kernels::Trans;
  SINKLAB_CHECK(a.tape == b.tape && a.tape, "matmul: operands come from different tapes");
  const Tensor<T, D> av = a.value(), bv = b.value();
  const Shape& sa = av.shape();
  const Shape& sb = bv.shape();
  SINKLAB_CHECK(sa.rank() >= 2 && sb.rank() >= 2, "matmul: operands need rank >= 2, got ", sa, " and ", sb);
  const int64_t K = sa[-1];
  SINKLAB_CHECK(sb[-2] == K, "matmul: inner dimensions differ: ", sa, " · ", sb, " (", K, " vs ", sb[-2], ")");
  const int64_t N = sb[-1];
  if (sb.rank() == 2) {
    const int64_t M = sa.numel() / K;  // all leading axes folded into rows: one large GEMM
    const kernels::Precision p = a.tape->precision();
    Tensor<T, D> y = Tensor<T, D>::empty(sa.with(-1, N));
    backend<D>::gemm_at(p, Trans::N, Trans::N, M, N, K, T(1), av.data(), K, bv.data(), N, T(0), y.data(), N);
    return a.tape->record(y, {a, b}, [a, b, av, bv, M, N, K, p](Tape<T, D>& t, const Tensor<T, D>& g) {
      bool fresh = false;  // a first contribution is written (beta 0), later ones added (beta 1)
      if (a.requires_grad()) {  // da += g · bᵀ
        T* ga = t.grad_buffer(a, fresh).data();
        backend<D>::gemm_at(p, Trans::N, Trans::T, M, K, N, T(1), g.data(), N, bv.data(), N, fresh ? T(0) : T(1), ga, K);
      }
      if (b.requires_grad()) {  // db += aᵀ · g
        T* gb = t.grad_buffer(b, fresh).data();
        backend<D>::gemm_at(p, Trans::T, Trans::N, K, N, M, T(1), av.data(), K, g.data(), N, fresh ? T(0) : T(1), gb, N);
      }
    });
  }
  SINKLAB_CHECK(sa.rank() == sb.rank(), "matmul: batched operands need equal rank, got ", sa, " and ", sb);
  int64_t batch = 1;
  for (int i = 0; i < sa.rank() - 2; ++i) {
    SINKLAB_CHECK(sa[i] == sb[i], "matmul: batch axes differ: ", sa, " · ", sb);
    batch *= sa[i];
  }
  const int64_t M = sa[-2];
  Tensor<T, D> y = Tensor<T, D>::empty(sa.with(-1, N));
  backend<D>::gemm_batched(Trans::N, Trans::N, batch, M, N, K, T(1), av.data(), M * K, bv.data(), K * N, T(0),
                             y.data(), M * N);
  return a.tape->record(y, {a, b}, [a, b, av, bv, batch, M, N, K](Tape<T, D>& t, const Tensor<T, D>& g) {
    bool fresh = false;
    if (a.requires_grad()) {
      T* ga = t.grad_buffer(a, fresh).data();
      backend<D>::gemm_batched(Trans::N, Trans::T, batch, M, K, N, T(1), g.data(), M * N, bv.data(), K * N,
                                 fresh ? T(0) : T(1), ga, M * K);
    }
    if (b.requires_grad()) {
      T* gb = t.grad_buffer(b, fresh).data();
      backend<D>::gemm_batched(Trans::T, Trans::N, batch, K, N, M, T(1), av.data(), M * K, g.data(), M * N,
                                 fresh ? T(0) : T(1), gb, K * N);
    }
  });
}

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(Var<float> matmul(Var<float>, Var<float>))

}  // namespace sinklab::autodiff
