// Materialised attention: builds the full T×S logits and weights per head. It is the oracle of
// the tests and the path a recording probe takes (it can hand out probabilities and logits);
// memory O(T·S) per head. Same arguments and results as the fused kernels.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "sinklab/core/parallel.hpp"
#include "sinklab/kernels/cpu/attention_common.hpp"
#include "sinklab/kernels/cpu/gemm.hpp"

namespace sinklab::kernels::cpu {

namespace detail {

// Logits (scaled, transformed when the score has a logits transform, −inf where masked),
// weights a_ij and, for the softmax family, the normalised p_ij and the row lse, of one
// (batch, head): all [T, S] row-major in caller buffers. With `logits_grad` (and a transform)
// it also receives the transform's derivative at each logit.
template <class Score, class Mask, class T>
void reference_head(const Score& score, const typename Score::template Args<T>& args, int64_t h,
                    const AttentionDims& dm, const T* Q, const T* K, T scale, int64_t kvlen, T* logits, T* weights,
                    T* probs, T* lse, T* logits_grad = nullptr) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  gemm(Trans::N, Trans::T, dm.T, dm.S, dm.d, scale, Q, dm.d, K, dm.d, T(0), logits, dm.S);
  if constexpr (score::HasLogitsTransform<Score>) {
    if (logits_grad)
      for (int64_t n = 0; n < dm.T * dm.S; ++n) logits_grad[n] = score.logits_grad(logits[n]);
    transform_logits(score, logits, dm.T * dm.S);
  }
  for (int64_t i = 0; i < dm.T; ++i) {
    const int64_t e = Mask::key_end(i, dm.T, dm.S, kvlen);
    T* s = logits + i * dm.S;
    T* a = weights + i * dm.S;
    for (int64_t j = e; j < dm.S; ++j) s[j] = ninf;
    if constexpr (Score::family == score::Family::Normalised) {
      T* p = probs + i * dm.S;
      score::OnlineRow<T> row = score.template start<T>(args, h);
      T mx = ninf;
      for (int64_t j = 0; j < e; ++j) mx = std::max(mx, s[j]);
      row.rescale(mx);
      if (row.m == ninf) {
        lse[i] = ninf;
        for (int64_t j = 0; j < dm.S; ++j) p[j] = a[j] = T(0);
        continue;
      }
      for (int64_t j = 0; j < e; ++j) row.add(std::exp(s[j] - row.m));
      lse[i] = row.lse();
      for (int64_t j = 0; j < dm.S; ++j) {
        p[j] = j < e ? std::exp(s[j] - lse[i]) : T(0);
        a[j] = j < e ? score.weight(p[j]) : T(0);
      }
    } else {
      const score::RowConstants rc = score.row(e, kvlen);
      for (int64_t j = 0; j < dm.S; ++j)
        a[j] = j < e ? score.weight(s[j], static_cast<T>(rc.scale), static_cast<T>(rc.bias)) : T(0);
    }
  }
}

}  // namespace detail

// Forward. When `probs` / `logits` are given they receive the weights a_ij (what multiplies the
// values: after clipping or the point-wise map; 0 at masked keys) and the scaled logits (after
// the score's logits transform, if any; −inf at masked keys), both [B, H, T, S]. An active
// `edit` [B, H, T, S] replaces the weights by scale ⊙ a + shift before they multiply the values
// (a probe's intervention on attention rows); `probs` then holds the edited weights.
template <class Score, class Mask, class T, HostDevice Dev>
AttentionForward<T, Dev> attention_reference_forward(const Score& score, const Mask&, const Tensor<T, Dev>& q_,
                                                const Tensor<T, Dev>& k_, const Tensor<T, Dev>& v_,
                                                const score::params_t<Score, T, Dev>& params,
                                                const AttentionOptions& opt = {}, Tensor<T, Dev>* probs = nullptr,
                                                Tensor<T, Dev>* logits = nullptr, const Edit<T, Dev>& edit = {}) {
  detail::require_float<T>();
  static_assert(score::is_policy_v<Score>, "attention_reference_forward: Score must be a sinklab::score policy");
  static_assert(mask::is_policy_v<Mask>,
                "attention_reference_forward: Mask must be a sinklab::mask policy");
  constexpr const char* kernel = "attention_reference_forward";
  const AttentionDims dm = detail::check_shapes(kernel, q_, k_, v_, opt);
  detail::check_score_params<T, Score, Dev>(kernel, score, params, dm);
  detail::check_edit(kernel, edit, Shape{dm.B, dm.H, dm.T, dm.S});
  const Tensor<T, Dev> q = q_.contiguous(), k = k_.contiguous(), v = v_.contiguous();
  constexpr bool normalised = Score::family == score::Family::Normalised;

  AttentionForward<T, Dev> res;
  res.out = detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T, dm.d});
  if constexpr (normalised) res.lse = detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T});
  if (probs) *probs = detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T, dm.S});
  if (logits) *logits = detail::output_zeros<T, Dev>({dm.B, dm.H, dm.T, dm.S});
  const auto args = score.args(params);
  const T scale = static_cast<T>(detail::score_scale(opt, dm.d));
  const int64_t TS = dm.T * dm.S;

  parallel_for(0, dm.B * dm.H, 1, [&](int64_t lo, int64_t hi) {
    detail::Scratch<T> s_buf(TS), a_buf(TS), p_buf(normalised ? TS : 0);
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / dm.H, h = bh % dm.H, hk = h / dm.group();
      const T* Q = q.data() + bh * dm.T * dm.d;
      const T* K = k.data() + (b * dm.Hkv + hk) * dm.S * dm.d;
      const T* V = v.data() + (b * dm.Hkv + hk) * dm.S * dm.d;
      T* s = logits ? logits->data() + bh * TS : s_buf.data();
      T* a = probs ? probs->data() + bh * TS : a_buf.data();
      T* lse = normalised ? res.lse.data() + bh * dm.T : nullptr;
      detail::reference_head<Score, Mask>(score, args, h, dm, Q, K, scale, detail::kv_length(opt, b, dm.S), s, a,
                                          p_buf.data(), lse);
      if (edit.active()) detail::apply_edit(edit, a, bh * TS, TS);
      gemm(Trans::N, Trans::N, dm.T, dm.d, dm.S, T(1), a, dm.S, V, dm.d, T(0), res.out.data() + bh * dm.T * dm.d, dm.d);
    }
  });
  return res;
}

// Backward from dL/dout; recomputes everything from q, k, v (it does not trust `fwd` beyond
// its shape, so it checks the fused path independently). With the forward's `edit`, dV uses the
// edited weights and dA = scale ⊙ dO·Vᵀ reaches the score.
template <class Score, class Mask, class T, HostDevice Dev>
AttentionGrads<T, Score, Dev> attention_reference_backward(const Score& score, const Mask&, const Tensor<T, Dev>& q_,
                                                      const Tensor<T, Dev>& k_, const Tensor<T, Dev>& v_,
                                                      const score::params_t<Score, T, Dev>& params, const Tensor<T, Dev>& dout_,
                                                      const AttentionOptions& opt = {}, const Edit<T, Dev>& edit = {}) {
  detail::require_float<T>();
  constexpr const char* kernel = "attention_reference_backward";
  const AttentionDims dm = detail::check_shapes(kernel, q_, k_, v_, opt);
  detail::check_score_params<T, Score, Dev>(kernel, score, params, dm);
  detail::check_edit(kernel, edit, Shape{dm.B, dm.H, dm.T, dm.S});
  SINKLAB_CHECK(dout_.shape() == q_.shape(), kernel, ": dout ", dout_.shape(), " must have the shape of q ",
                q_.shape());
  const Tensor<T, Dev> q = q_.contiguous(), k = k_.contiguous(), v = v_.contiguous(), dout = dout_.contiguous();
  constexpr bool normalised = Score::family == score::Family::Normalised;

  AttentionGrads<T, Score, Dev> g;
  g.dq = detail::output_zeros<T, Dev>(q.shape());
  g.dk = detail::output_zeros<T, Dev>(k.shape());
  g.dv = detail::output_zeros<T, Dev>(v.shape());
  g.dscore = policy::zeros_like(params);
  const auto args = score.args(params);
  const T scale = static_cast<T>(detail::score_scale(opt, dm.d));
  const int64_t TS = dm.T * dm.S;
  detail::RowParamGrads<Score, T, Dev> dparam(dm.B * dm.H);
  constexpr bool transformed = score::HasLogitsTransform<Score>;

  parallel_for(0, dm.B * dm.Hkv, 1, [&](int64_t lo, int64_t hi) {
    detail::Scratch<T> s(TS), a(TS), p(TS), da(TS), lse(dm.T), tg(transformed ? TS : 0);
    for (int64_t bk = lo; bk < hi; ++bk) {
      const int64_t b = bk / dm.Hkv, hk = bk % dm.Hkv;
      const int64_t kvlen = detail::kv_length(opt, b, dm.S);
      const T* K = k.data() + bk * dm.S * dm.d;
      const T* V = v.data() + bk * dm.S * dm.d;
      T* dK = g.dk.data() + bk * dm.S * dm.d;
      T* dV = g.dv.data() + bk * dm.S * dm.d;
      for (int64_t h = hk * dm.group(); h < (hk + 1) * dm.group(); ++h) {
        const int64_t bh = b * dm.H + h;
        const T* Q = q.data() + bh * dm.T * dm.d;
        const T* dO = dout.data() + bh * dm.T * dm.d;
        detail::reference_head<Score, Mask>(score, args, h, dm, Q, K, scale, kvlen, s.data(), a.data(), p.data(),
                                            lse.data(), tg.data());
        // dA = dO·Vᵀ (times the edit's scale), then dS in place of dA.
        gemm(Trans::N, Trans::T, dm.T, dm.S, dm.d, T(1), dO, dm.d, V, dm.d, T(0), da.data(), dm.S);
        if (edit.active()) {
          detail::apply_edit(edit, a.data(), bh * TS, TS);
          const T* es = edit.scale.data() + bh * TS;
          for (int64_t e = 0; e < TS; ++e) da[e] *= es[e];
        }
        for (int64_t i = 0; i < dm.T; ++i) {
          const int64_t e = Mask::key_end(i, dm.T, dm.S, kvlen);
          T* dsr = da.data() + i * dm.S;
          if constexpr (normalised) {
            const T* pr = p.data() + i * dm.S;
            T D = 0;
            for (int64_t j = 0; j < e; ++j) D += pr[j] * score.weight_grad(pr[j]) * dsr[j];
            for (int64_t j = 0; j < dm.S; ++j) dsr[j] = j < e ? pr[j] * (score.weight_grad(pr[j]) * dsr[j] - D) : T(0);
            if constexpr (dparam.enabled) dparam.add(bh, static_cast<double>(score.row_param_grad(args, h, lse[i], D)));
          } else {
            const score::RowConstants rc = score.row(e, kvlen);
            const T* sr = s.data() + i * dm.S;
            for (int64_t j = 0; j < dm.S; ++j)
              dsr[j] =
                  j < e ? score.weight_grad(sr[j], static_cast<T>(rc.scale), static_cast<T>(rc.bias)) * dsr[j] : T(0);
          }
          if constexpr (transformed)  // dS at the raw logits
            for (int64_t j = 0; j < e; ++j) dsr[j] *= tg[i * dm.S + j];
        }
        gemm(Trans::N, Trans::N, dm.T, dm.d, dm.S, scale, da.data(), dm.S, K, dm.d, T(0),
             g.dq.data() + bh * dm.T * dm.d, dm.d);
        gemm(Trans::T, Trans::N, dm.S, dm.d, dm.T, scale, da.data(), dm.S, Q, dm.d, T(1), dK, dm.d);
        gemm(Trans::T, Trans::N, dm.S, dm.d, dm.T, T(1), a.data(), dm.S, dO, dm.d, T(1), dV, dm.d);
      }
    }
  });
  dparam.scatter(score, g.dscore, dm.H);
  return g;
}

}  // namespace sinklab::kernels::cpu
