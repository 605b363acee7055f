// The one dispatch point between differentiable ops and a device's loops.
//
// Every op in autodiff/ops calls its kernels as kernels::backend<Device>::name(...), never a
// device's namespace directly, so a backend is added by defining one specialisation with the same
// names: kernels/cpu/backend.hpp for cpu, the CUDA backend for cuda, each expanding the one list
// of kernels/kernel_list.hpp. The argument types every backend shares (GEMM transposes, an axis
// seen as [outer, n, inner], attention options) live here.
#pragma once
#include <cstdint>

#include "sinklab/core/config.hpp"
#include "sinklab/core/device.hpp"
#include "sinklab/core/shape.hpp"
#include "sinklab/core/tensor.hpp"

namespace sinklab::kernels {

template <class Device>
struct backend {
  static_assert(sizeof(Device) == 0,
                "kernels::backend<Device>: no kernels for this device. Include its backend "
                "(sinklab/kernels/cpu/backend.hpp for cpu; the CUDA backend for cuda).");
};

// Whether a GEMM operand is read as stored (N) or transposed (T).
enum class Trans { N, T };

// The arithmetic of a float GEMM: fp32, or bf16 operands with fp32 accumulation (autocast's
// bf16). Other element types always multiply in their own type.
enum class Precision { fp32, bf16 };
inline const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

// One axis of a contiguous tensor, the tensor seen as [outer, n, inner].
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisView axis_view(const Shape& s, int axis) {
  axis = s.normalize(axis);
  AxisView v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  v.n = s[axis];
  for (int i = axis + 1; i < s.rank(); ++i) v.inner *= s[i];
  return v;
}

// The largest of x[k·stride] for k < n and the first k attaining it (a strict >: ties keep the
// first, a NaN at k = 0 stays): one line of max_axis, on every backend.
template <class T>
SINKLAB_HD T max_along(const T* x, int64_t n, int64_t stride, int64_t& arg) {
  T m = x[0];
  arg = 0;
  for (int64_t k = 1; k < n; ++k)
    if (x[k * stride] > m) {
      m = x[k * stride];
      arg = k;
    }
  return m;
}

struct AttentionOptions {
  double scale = 0.0;          // multiplies q·k before the score function; 0 means 1/√d_head
  Tensor<int64_t> kv_lengths;  // [B] keys per batch entry (padding at the end), on the host; undefined: all S
  // Blocks of the fused kernels (more query tasks to balance than 64 × 64, half the per-row
  // softmax passes; measured in docs/results/train-step.md, "What made the difference").
  int64_t block_q = 32;   // rows of a query block
  int64_t block_k = 128;  // keys of a key block
  // bf16: the fused CPU kernels' products (Q·Kᵀ, P·V and the backward's dO·Vᵀ, Pᵀ·dO, dS·K, dSᵀ·Q)
  // take bf16 operands with fp32 sums; the scores, the online normaliser and the gradients' sums
  // stay fp32. The autodiff node sets it from its tape. Other kernels and types ignore it.
  Precision precision = Precision::fp32;
};

// An elementwise edit y = scale ⊙ x + shift of a tensor a kernel forms on the way (the attention
// weights, a gate's values): what a probe's interventions (nn/intervention.hpp) ask of the
// materialised attention. Both tensors have the edited tensor's shape; undefined: no edit.
template <class T, class Device = sinklab::cpu>
struct Edit {
  Tensor<T, Device> scale, shift;
  bool active() const { return scale.defined(); }
};

template <class T>
struct MixPair {  // the anchor-mixing node's operands (autodiff/ops/mix.hpp)
  const T* a = nullptr;               // anchor [B, H, L, C]
  const T* s = nullptr;               // current projection, same shape; null: anchor term only
  const T* l1 = nullptr;              // coefficients of the anchor
  const T* l2 = nullptr;              // coefficients of s (unused without s)
  const T* gamma = nullptr;           // per-token scales [B, L, K]; null: 1
  int64_t K = 0, col1 = 0, col2 = 1;  // γ columns of the two terms
  int64_t B = 0, H = 0, L = 0, C = 0;
  int64_t head_stride = 0;            // 0 (one coefficient), 1 (per head) or C (per element)
  bool per_channel = false;           // head_stride == C: one coefficient per channel

  SINKLAB_HD int64_t coef_row(int64_t h) const { return h * head_stride; }
  SINKLAB_HD T scale(int64_t b, int64_t t, int64_t col) const { return gamma ? gamma[(b * L + t) * K + col] : T(1); }
};

}  // namespace sinklab::kernels
