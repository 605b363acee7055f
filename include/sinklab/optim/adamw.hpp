// AdamW with decoupled weight decay and PyTorch's update rule (torch.optim.AdamW, amsgrad off):
//   p ← p − lr·wd·p
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + eps)
// lr is the group's lr times a global scale set by a schedule. State (m, v, step) is kept per
// parameter and looked up by parameter name, so checkpoints can save and restore it.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/parallel.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/optim/param_group.hpp"

namespace sinklab::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

template <class T>
struct AdamWState {
  Tensor<T> m;  // first moment (exp_avg)
  Tensor<T> v;  // second moment (exp_avg_sq)
  int64_t step = 0;  // updates applied to this parameter; drives the bias correction

  // The state's tensors by name (checkpoints go through this; PyTorch's names).
  template <class F>
  void tensors(F&& f) {
    f("exp_avg", m);
    f("exp_avg_sq", v);
  }
};

namespace detail {

template <class T>
struct AdamWCoefs {
  T decay;  // 1 − lr·wd
  T beta1, one_minus_beta1, beta2, one_minus_beta2;
  T step_size;  // lr / (1 − β1ᵗ)
  T inv_bc2_sqrt;  // 1 / √(1 − β2ᵗ)
  T eps;
};

// One element or one SIMD batch; V is T or xsimd::batch<T>.
template <class V, class T>
inline void adamw_update(V& p, const V& g, V& m, V& v, const AdamWCoefs<T>& c) {
  using std::sqrt;
  p = p * V(c.decay);
  m = V(c.beta1) * m + V(c.one_minus_beta1) * g;
  v = V(c.beta2) * v + V(c.one_minus_beta2) * (g * g);
  const V denom = sqrt(v) * V(c.inv_bc2_sqrt) + V(c.eps);
  p = p - V(c.step_size) * m / denom;
}

// GCC 12 flags _mm512_undefined_ps() inside its own AVX-512 sqrt intrinsic as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class T>
void adamw_kernel(T* p, const T* g, T* m, T* v, int64_t n, const AdamWCoefs<T>& c) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B pb = B::load_unaligned(p + i), mb = B::load_unaligned(m + i), vb = B::load_unaligned(v + i);
    adamw_update(pb, B::load_unaligned(g + i), mb, vb, c);
    pb.store_unaligned(p + i);
    mb.store_unaligned(m + i);
    vb.store_unaligned(v + i);
  }
  for (; i < n; ++i) adamw_update(p[i], g[i], m[i], v[i], c);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline void check_adamw_options(const AdamWOptions& o, std::size_t group) {
  SINKLAB_CHECK(std::isfinite(o.lr) && o.lr >= 0, "AdamW: group ", group, " has lr ", o.lr, ", expected >= 0");
  SINKLAB_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "AdamW: group ", group, " has betas (",
                o.beta1, ", ", o.beta2, "), expected each in [0, 1)");
  SINKLAB_CHECK(std::isfinite(o.eps) && o.eps >= 0, "AdamW: group ", group, " has eps ", o.eps, ", expected >= 0");
  SINKLAB_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "AdamW: group ", group, " has weight_decay ",
                o.weight_decay, ", expected >= 0");
}

}  // namespace detail

template <class T>
class AdamW : public OptimizerBase<T, AdamWOptions, AdamWState<T>> {
  using Base = OptimizerBase<T, AdamWOptions, AdamWState<T>>;

 public:
  using Options = AdamWOptions;
  using Group = ParamGroup<T, AdamWOptions>;
  using State = AdamWState<T>;

  explicit AdamW(std::vector<Group> groups) : Base("AdamW") {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit AdamW(std::vector<autodiff::Parameter<T>*> params, Options opts = {})
      : AdamW(std::vector<Group>{Group{std::move(params), opts}}) {}
  // Lets AdamW<T>({&a, &b}) pick the single-group form (a two-pointer list would otherwise
  // also match vector<Group>'s iterator-pair constructor).
  explicit AdamW(std::initializer_list<autodiff::Parameter<T>*> params, Options opts = {})
      : AdamW(std::vector<autodiff::Parameter<T>*>(params), opts) {}

  // State tensors are created (zero, step 0) when a group is added, so a checkpoint can be
  // restored into them before the first step.
  void add_param_group(Group g) {
    detail::check_adamw_options(g.opts, this->groups_.size());
    this->append_group(std::move(g), [](const autodiff::Parameter<T>& p) { return State{Tensor<T>::zeros(p.shape()), Tensor<T>::zeros(p.shape()), 0}; });
  }

  void step() {
    std::size_t k = 0;  // this->states_ follows the order of this->groups_ and their params
    for (std::size_t gi = 0; gi < this->groups_.size(); ++gi) {
      const Group& g = this->groups_[gi];
      detail::check_adamw_options(g.opts, gi);
      const double lr = g.opts.lr * this->lr_scale_;
      for (auto* p : g.params) {
        State& st = this->states_[k++];
        if (!p->requires_grad) continue;
        detail::check_trainable("AdamW::step", *p);
        SINKLAB_CHECK(st.m.shape() == p->shape() && st.v.shape() == p->shape(), "AdamW::step: state of '", p->name,
                      "' has shapes m ", st.m.shape(), ", v ", st.v.shape(), " but the parameter has shape ",
                      p->shape());
        SINKLAB_CHECK(st.m.is_contiguous() && st.v.is_contiguous(), "AdamW::step: state of '", p->name,
                      "' must be contiguous");
        ++st.step;
        const double t = static_cast<double>(st.step);
        const double bc1 = 1.0 - std::pow(g.opts.beta1, t);
        const double bc2 = 1.0 - std::pow(g.opts.beta2, t);
        const detail::AdamWCoefs<T> c{static_cast<T>(1.0 - lr * g.opts.weight_decay),
                                      static_cast<T>(g.opts.beta1),
                                      static_cast<T>(1.0 - g.opts.beta1),
                                      static_cast<T>(g.opts.beta2),
                                      static_cast<T>(1.0 - g.opts.beta2),
                                      static_cast<T>(lr / bc1),
                                      static_cast<T>(1.0 / std::sqrt(bc2)),
                                      static_cast<T>(g.opts.eps)};
        T* pv = p->value.data();
        const T* gv = p->grad.data();
        T* mv = st.m.data();
        T* vv = st.v.data();
        parallel_for(0, p->numel(), kGrain, [&](int64_t lo, int64_t hi) {
          detail::adamw_kernel(pv + lo, gv + lo, mv + lo, vv + lo, hi - lo, c);
        });
      }
    }
    ++this->step_count_;
  }

 private:
  static constexpr int64_t kGrain = int64_t{1} << 15;
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class OptimizerBase<float, AdamWOptions, AdamWState<float>>)
SINKLAB_EXTERN_TEMPLATE(class AdamW<float>)

}  // namespace sinklab::optim
