// Attention-sink strength read from attention probabilities A [B, H, T, S]
// (A(b, h, i, j): query i attends to key j; rows sum to 1; S = T for plain self-attention, and
// S may differ when extra keys such as registers are present).
//
//   attn_to_key(A, s)         Attn_<s>: mean attention to key s over a query set (VGA; all queries,
//                             or those a [B, T] / [T] mask selects, e.g. non-trigger queries)
//   key_attention_means(A)    ā_j = mean_{b,i} A_bij per head (NOP vs broadcast, App. "sink score")
//   sink_score(A)             max_j ā_j per head, and the key that attains it
//   first_key_attention(A)    the language-model studies' sink: mean attention of queries 1..T−1
//                             to key 0 per head (query 0 sees only key 0 under a causal mask)
//   uniform_first_key_attention(T)   what it reads when every query spreads its attention evenly
//
// Averages run over every (b, i) pair; with a causal mask the queries i < s, which cannot see
// key s, contribute zeros exactly as in the papers' formulas.
#pragma once
#include <cstdint>
#include <vector>

#include "sinklab/core/tensor.hpp"
#include "sinklab/probe/detail/checks.hpp"
#include "sinklab/probe/per_head.hpp"

namespace sinklab::probe {

namespace detail {
template <class T>
void require_attention(std::string_view fn, const Tensor<T>& A) {
  require_rank(fn, "attention", A, 4, "[B, H, T, S]");
  require_nonempty(fn, "attention", A);
}
// Causal metrics compare query and key positions, so they need S = T.
template <class T>
void require_square_attention(std::string_view fn, const Tensor<T>& A) {
  require_rank(fn, "attention", A, 4, "[B, H, T, T]");
  SINKLAB_CHECK(A.size(2) == A.size(3), fn, ": attention of shape ", A.shape(),
                " is not square in its last two axes (expected [B, H, T, T])");
  require_nonempty(fn, "attention", A);
}
template <class T>
void require_key(std::string_view fn, const Tensor<T>& A, int64_t s) {
  SINKLAB_CHECK(0 <= s && s < A.size(3), fn, ": key index ", s, " out of range for attention of shape ",
                A.shape());
}
// A query mask is [B, T] (per sequence) or [T] (shared by every sequence); nonzero selects.
template <class M>
bool mask_selects(const Tensor<M>& mask, int64_t b, int64_t i) {
  return mask.rank() == 1 ? mask(i) != M(0) : mask(b, i) != M(0);
}
template <class T, class M>
void require_query_mask(std::string_view fn, const Tensor<T>& A, const Tensor<M>& mask) {
  const int64_t B = A.size(0), Tq = A.size(2);
  const bool ok = mask.defined() && ((mask.rank() == 1 && mask.size(0) == Tq) ||
                                     (mask.rank() == 2 && mask.size(0) == B && mask.size(1) == Tq));
  SINKLAB_CHECK(ok, fn, ": query mask of shape ", mask.defined() ? mask.shape().str() : std::string("undefined"),
                " does not fit attention of shape ", A.shape(), " (expected [", B, ", ", Tq, "] or [", Tq, "])");
}
}  // namespace detail

// Attn_<s> per head over the queries a mask selects (mask [B, T] or [T], nonzero = include).
template <class T, class M>
PerHead attn_to_key(const Tensor<T>& A, int64_t s, const Tensor<M>& query_mask) {
  constexpr std::string_view fn = "probe::attn_to_key";
  detail::require_attention(fn, A);
  detail::require_key(fn, A, s);
  detail::require_query_mask(fn, A, query_mask);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2);
  std::vector<double> sum(static_cast<std::size_t>(H), 0.0);
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      if (!detail::mask_selects(query_mask, b, i)) continue;
      ++count;
      for (int64_t h = 0; h < H; ++h) sum[h] += static_cast<double>(A(b, h, i, s));
    }
  SINKLAB_CHECK(count > 0, fn, ": the query mask selects no query of attention ", A.shape());
  PerHead out;
  for (double v : sum) out.values.push_back(v / static_cast<double>(count));
  return out;
}

// Attn_<s> per head over all queries.
template <class T>
PerHead attn_to_key(const Tensor<T>& A, int64_t s) {
  return attn_to_key(A, s, Tensor<uint8_t>::ones({A.defined() && A.rank() == 4 ? A.size(2) : 0}));
}

template <class T>
PerHead first_key_attention(const Tensor<T>& A) {
  detail::require_attention("probe::first_key_attention", A);
  Tensor<uint8_t> queries = Tensor<uint8_t>::ones({A.size(2)});
  queries(0) = 0;  // it says nothing about a sink: under a causal mask it can attend only to key 0
  return attn_to_key(A, 0, queries);
}
// Σ_{i=1}^{T−1} 1/(i+1) / (T − 1): query i attending evenly to its i + 1 keys gives key 0 1/(i+1).
inline double uniform_first_key_attention(int64_t T) {
  double u = 0;
  for (int64_t i = 1; i < T; ++i) u += 1.0 / static_cast<double>(i + 1);
  return T > 1 ? u / static_cast<double>(T - 1) : 0.0;
}

// ā_j = mean over batch and queries of A_bij, as a [H, S] tensor.
template <class T>
Tensor<double> key_attention_means(const Tensor<T>& A) {
  detail::require_attention("probe::key_attention_means", A);
  const int64_t B = A.size(0), H = A.size(1), Tq = A.size(2), S = A.size(3);
  const Tensor<T> a = A.contiguous();
  const T* p = a.data();
  Tensor<double> out = Tensor<double>::zeros({H, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      double* o = out.data() + h * S;
      const T* m = p + (b * H + h) * Tq * S;
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < S; ++j) o[j] += static_cast<double>(m[i * S + j]);
    }
  const double inv = 1.0 / static_cast<double>(B * Tq);
  for (int64_t k = 0; k < out.numel(); ++k) out.data()[k] *= inv;
  return out;
}

struct SinkScore {
  PerHead score;             // max_j ā_j
  std::vector<int64_t> key;  // argmax_j ā_j (first on ties)
};

template <class T>
SinkScore sink_score(const Tensor<T>& A) {
  const Tensor<double> abar = key_attention_means(A);
  const int64_t H = abar.size(0), Tk = abar.size(1);
  SinkScore out;
  for (int64_t h = 0; h < H; ++h) {
    int64_t best = 0;
    for (int64_t j = 1; j < Tk; ++j)
      if (abar(h, j) > abar(h, best)) best = j;
    out.score.values.push_back(abar(h, best));
    out.key.push_back(best);
  }
  return out;
}

}  // namespace sinklab::probe
