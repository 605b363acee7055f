// Shared pieces of the CPU attention kernels: counted outputs and scratch (attention_memory.hpp),
// strided head rows, edits, and the score policy's hooks they all call. The layout, the result
// types and the shape checks are every device's (kernels/attention_contract.hpp); they are
// named here too, so kernels::cpu's callers and loops read them unqualified. float or double.
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

#include "sinklab/core/error.hpp"
#include "sinklab/core/simd.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/core/xsimd.hpp"
#include "sinklab/kernels/attention_contract.hpp"
#include "sinklab/kernels/backend.hpp"
#include "sinklab/kernels/cpu/attention_memory.hpp"
#include "sinklab/policy/mask.hpp"
#include "sinklab/policy/score.hpp"

namespace sinklab::kernels::cpu {

using kernels::AttentionOptions;

using kernels::AttentionDims;
using kernels::AttentionForward;
using kernels::AttentionGrads;

namespace detail {

using contract::check_output_view;
using contract::check_saved;
using contract::check_score_params;
using contract::check_shapes;
using contract::kv_length;
using contract::score_scale;
using contract::shape_str_hint;

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
