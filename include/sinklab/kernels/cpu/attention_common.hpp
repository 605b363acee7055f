// Shared pieces of the CPU attention kernels: options, results, shape checks, counted outputs
// and scratch (attention_memory.hpp), and the score policy's hooks they all call.
//
// Layout: q [B, H, T, d]; k, v [B, H_kv, S, d]; out [B, H, T, d]; H a multiple of H_kv
// (grouped-query attention: query head h reads kv head h / (H / H_kv)). float or double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "sinklab/core/error.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/attention_memory.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/score.hpp"

namespace sinklab::kernels::cpu {

using kernels::AttentionOptions;

// What the forward keeps for the backward: the output and, for the softmax family, the row
// logsumexp (including the sink; −inf on a fully masked row). Point-wise scores save no stats.
template <class T, class Dev = sinklab::cpu>
struct AttentionForward {
  Tensor<T, Dev> out;  // [B, H, T, d]
  Tensor<T, Dev> lse;  // [B, H, T] (softmax family), undefined otherwise
};

template <class T, class Score, class Dev = sinklab::cpu>
struct AttentionGrads {
  Tensor<T, Dev> dq, dk, dv;
  score::params_t<Score, T, Dev> dscore;  // same shapes as the score's parameters
};

struct AttentionDims {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, d = 0;
  int64_t group() const { return H / Hkv; }
};

namespace detail {

template <class T>
constexpr void require_float() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "sinklab attention kernels take float or double tensors");
}

// A tensor the kernel returns, counted once in AttentionMemory.
template <class T, class Dev = sinklab::cpu>
Tensor<T, Dev> output_zeros(const Shape& s) {
  AttentionMemory::add(s.numel() * static_cast<int64_t>(sizeof(T)));
  return Tensor<T, Dev>::zeros(s);
}

// Same, for a kernel that writes every element.
template <class T, class Dev = sinklab::cpu>
Tensor<T, Dev> output_empty(const Shape& s) {
  AttentionMemory::add(s.numel() * static_cast<int64_t>(sizeof(T)));
  return Tensor<T, Dev>::empty(s);
}

// Scratch memory that lives for one parallel chunk.
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n) : v_(static_cast<std::size_t>(n)) { AttentionMemory::add(bytes()); }
  ~Scratch() { AttentionMemory::sub(bytes()); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return v_.data(); }
  T& operator[](int64_t i) { return v_[static_cast<std::size_t>(i)]; }

 private:
  int64_t bytes() const { return static_cast<int64_t>(v_.size() * sizeof(T)); }
  std::vector<T> v_;
};

// Rows of a [B, heads, L, d] tensor whose last axis has unit stride and whose other axes may
// have any strides: the fused kernels read q, k, v and dout and write out through these, so
// heads can stay in a projection's token-major layout [B, L, heads·d] (row stride heads·d)
// instead of being copied into head-major tensors.
template <class T>
struct HeadRows {
  T* data = nullptr;
  int64_t sb = 0, sh = 0, ld = 0;  // strides of batch, head and row, in elements
  T* at(int64_t b, int64_t h, int64_t row = 0) const { return data + b * sb + h * sh + row * ld; }
};
// t itself when its last axis has unit stride, else a contiguous copy.
template <class T, HostDevice Dev>
Tensor<T, Dev> unit_rows(const Tensor<T, Dev>& t) {
  return t.size(3) == 1 || t.stride(3) == 1 ? t : t.contiguous();
}
template <class T, HostDevice Dev>
HeadRows<const T> head_rows(const Tensor<T, Dev>& t) {
  return {t.data(), t.stride(0), t.stride(1), t.stride(2)};
}
template <class T, HostDevice Dev>
HeadRows<T> head_rows_mut(Tensor<T, Dev>& t) {
  return {t.data(), t.stride(0), t.stride(1), t.stride(2)};
}
// A caller's output view [B, heads, L, d]: the expected shape, unit stride along d, rows and
// heads that do not overlap (tasks write them in parallel), and not in the inputs' storage.
// Shape-only checks (this one and the next two) serve every device's kernels.
template <class T, class Dev>
void check_output_view(const char* kernel, const char* what, const Tensor<T, Dev>& t, const Shape& want,
                       std::initializer_list<const Tensor<T, Dev>*> inputs) {
  SINKLAB_CHECK(t.shape() == want, kernel, ": ", what, " of shape ", t.shape(), ", expected ", want);
  // Non-overlapping: axes taken by increasing stride, each steps past the whole extent of the
  // ones before it (the first past a row of d).
  bool ok = t.size(3) == 1 || t.stride(3) == 1;
  std::pair<int64_t, int64_t> axes[3] = {{t.stride(0), t.size(0)}, {t.stride(1), t.size(1)}, {t.stride(2), t.size(2)}};
  std::sort(std::begin(axes), std::end(axes));
  int64_t extent = t.size(3);
  for (const auto& [stride, size] : axes) {
    if (size == 1) continue;
    ok = ok && stride >= extent;
    extent = stride * size;
  }
  SINKLAB_CHECK(ok, kernel, ": ", what, " of shape ", t.shape(), " has strides [", t.stride(0), ", ", t.stride(1), ", ",
                t.stride(2), ", ", t.stride(3), "]; it needs unit stride along d and rows that do not overlap");
  for (const Tensor<T, Dev>* in : inputs)
    SINKLAB_CHECK(!t.shares_storage_with(*in), kernel, ": ", what, " must not share storage with q, k or v");
}

// n rows of d values from src, lds apart, to contiguous dst; returns dst. Rows kilobytes apart
// are a stride the hardware prefetcher does not follow, so the rows 8 ahead are fetched.
template <class T>
T* copy_rows(const T* src, int64_t lds, int64_t n, int64_t d, T* dst) {
  constexpr int64_t line = 64 / static_cast<int64_t>(sizeof(T));
  for (int64_t j = 0; j < n; ++j) {
    if (j + 8 < n)
      for (int64_t c = 0; c < d; c += line) __builtin_prefetch(src + (j + 8) * lds + c);
    std::copy(src + j * lds, src + j * lds + d, dst + j * d);
  }
  return dst;
}

template <class T, HostDevice Dev>
void zero_rows(Tensor<T, Dev>& t) {
  if (t.is_contiguous()) {
    t.fill(T(0));
    return;
  }
  const HeadRows<T> r = head_rows_mut(t);
  const int64_t heads = t.size(1), L = t.size(2), d = t.size(3);
  for (int64_t b = 0; b < t.size(0); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < L; ++i) std::fill(r.at(b, h, i), r.at(b, h, i) + d, T(0));
}

inline const char* shape_str_hint() { return "q [B, H, T, d], k and v [B, H_kv, S, d]"; }

template <class T, class Dev>
AttentionDims check_shapes(const char* kernel, const Tensor<T, Dev>& q, const Tensor<T, Dev>& k, const Tensor<T, Dev>& v,
                           const AttentionOptions& opt) {
  SINKLAB_CHECK(q.defined() && k.defined() && v.defined(), kernel, ": q, k and v must all be defined tensors");
  SINKLAB_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, kernel, ": expected ", shape_str_hint(), ", got q ",
                q.shape(), ", k ", k.shape(), ", v ", v.shape());
  AttentionDims dm{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  SINKLAB_CHECK(k.shape() == v.shape(), kernel, ": k ", k.shape(), " and v ", v.shape(),
                " must have the same shape [B, H_kv, S, d]");
  SINKLAB_CHECK(k.size(0) == dm.B, kernel, ": batch of q ", q.shape(), " and k ", k.shape(), " differ");
  SINKLAB_CHECK(k.size(3) == dm.d, kernel, ": head dimension of q ", q.shape(), " and k ", k.shape(), " differ");
  SINKLAB_CHECK(dm.d > 0, kernel, ": head dimension must be positive, got q ", q.shape());
  SINKLAB_CHECK(dm.Hkv > 0 && dm.H % dm.Hkv == 0, kernel, ": query heads of q ", q.shape(),
                " must be a multiple of the key/value heads of k ", k.shape());
  SINKLAB_CHECK(opt.block_q > 0 && opt.block_k > 0, kernel,
                ": block sizes must be positive, got block_q = ", opt.block_q, ", block_k = ", opt.block_k);
  if (opt.kv_lengths.defined()) {
    SINKLAB_CHECK(opt.kv_lengths.rank() == 1 && opt.kv_lengths.size(0) == dm.B, kernel, ": kv_lengths of shape ",
                  opt.kv_lengths.shape(), " must be [B] = [", dm.B, "] for q ", q.shape());
    for (int64_t b = 0; b < dm.B; ++b) {
      const int64_t n = opt.kv_lengths(b);
      SINKLAB_CHECK(0 <= n && n <= dm.S, kernel, ": kv_lengths[", b, "] = ", n, " is outside [0, S = ", dm.S,
                    "] for k ", k.shape());
    }
  }
  return dm;
}

// The backward's dO and the forward's saved output (and, for the softmax family, lse) against q.
template <class T, class Dev>
void check_saved(const char* kernel, const Tensor<T, Dev>& q, const Tensor<T, Dev>& dout,
                 const AttentionForward<T, Dev>& fwd, const AttentionDims& dm, bool normalised) {
  SINKLAB_CHECK(dout.shape() == q.shape(), kernel, ": dout ", dout.shape(), " must have the shape of q ", q.shape());
  SINKLAB_CHECK(fwd.out.defined() && fwd.out.shape() == q.shape(), kernel, ": saved output ",
                fwd.out.defined() ? fwd.out.shape() : Shape{}, " must have the shape of q ", q.shape());
  if (normalised)
    SINKLAB_CHECK(fwd.lse.defined() && fwd.lse.shape() == (Shape{dm.B, dm.H, dm.T}), kernel, ": saved lse ",
                  fwd.lse.defined() ? fwd.lse.shape() : Shape{}, " must be [B, H, T] = ", Shape{dm.B, dm.H, dm.T},
                  " (pass the AttentionForward of the same call)");
}

template <class T, class Score, class Dev>
void check_score_params(const char* kernel, const Score& score, const score::params_t<Score, T, Dev>& params,
                        const AttentionDims& dm) {
  score.validate(kernel);
  score.check_params(params, dm.H, kernel);
}

// The score's logits transform (when it has one) over n logits in place.
template <class Score, class T>
void transform_logits(const Score& score, T* s, int64_t n) {
  if constexpr (score::HasLogitsTransform<Score>)
    simd::apply(s, s, n, [&score](auto x) { return score.logits(x); });
}

// Per-(batch, head) sums of a score's row parameter gradients (a sink's), added into the
// gradient at the end in a fixed order, so results do not depend on thread timing.
template <class Score, class T, class Dev = sinklab::cpu>
struct RowParamGrads {
  static constexpr bool enabled = score::HasRowParamGrad<Score, T>;
  std::vector<double> per_bh;
  explicit RowParamGrads(int64_t bh) : per_bh(enabled ? static_cast<std::size_t>(bh) : 0, 0.0) {}
  void add(int64_t bh, double g) { per_bh[static_cast<std::size_t>(bh)] += g; }
  void scatter(const Score& score, score::params_t<Score, T, Dev>& grads, int64_t heads) const {
    if constexpr (enabled)
      for (std::size_t bh = 0; bh < per_bh.size(); ++bh)
        score.add_param_grad(grads, static_cast<int64_t>(bh) % heads, per_bh[bh]);
  }
};

inline int64_t kv_length(const AttentionOptions& opt, int64_t b, int64_t S) {
  return opt.kv_lengths.defined() ? opt.kv_lengths(b) : S;
}
inline double score_scale(const AttentionOptions& opt, int64_t d) {
  return opt.scale != 0.0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(d));
}

template <class T>
using batch = xsimd::batch<T>;

// An active edit must match the tensor it edits.
template <class T, class Dev>
void check_edit(const char* kernel, const Edit<T, Dev>& e, const Shape& shape) {
  if (!e.active()) return;
  SINKLAB_CHECK(e.scale.shape() == shape && e.shift.shape() == shape && e.scale.is_contiguous() &&
                    e.shift.is_contiguous(),
                kernel, ": an edit's scale ", e.scale.shape(), " and shift ",
                e.shift.defined() ? e.shift.shape() : Shape{}, " must be contiguous and of the edited shape ", shape);
}
// x[i] ← scale[offset + i]·x[i] + shift[offset + i] for i < n.
template <class T, class Dev>
void apply_edit(const Edit<T, Dev>& e, T* x, int64_t offset, int64_t n) {
  const T* s = e.scale.data() + offset;
  const T* b = e.shift.data() + offset;
  for (int64_t i = 0; i < n; ++i) x[i] = s[i] * x[i] + b[i];
}

}  // namespace detail
}  // namespace sinklab::kernels::cpu
