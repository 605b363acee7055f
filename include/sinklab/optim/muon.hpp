// Muon: momentum SGD whose update for a weight matrix is orthogonalised by a quintic
// Newton–Schulz iteration (Keller Jordan's Muon, as used by modded-nanogpt and ExoFormer):
//
//   buf ← β·buf + (1−β)·g                                   (β = 0.95)
//   u   ← nesterov ? (1−β)·g + β·buf : buf
//   O   ← NS5(u):  X = u / (‖u‖_F + 1e-7), transposed so rows ≤ cols; five times
//                  A = X·Xᵀ,  X ← a·X + (b·A + c·A·A)·X,   (a, b, c) = (3.4445, −4.7750, 2.0315)
//   p   ← p·(1 − lr·wd) − lr · √max(1, fan_out / fan_in) · O
//
// The scale is the public implementation's max(1, rows/cols)^0.5 for torch's [out, in]
// weights; sinklab stores Linear weights [in, out], so it reads √max(1, cols/rows) here (we did
// not take the "match AdamW RMS" 0.2·√max(dim) variant: with it Muon's lr would follow AdamW's,
// without it the usual Muon lr 0.02 applies). NS5 does not converge to the exact polar factor:
// its singular values land in roughly [0.7, 1.2], which is what the coefficients trade for speed.
//
// MuonAdamW routes a parameter list: 2-D weight matrices to Muon, everything else (vectors,
// scalars, embeddings, the LM / classifier head, positions, register and sink tokens) to
// optim::AdamW (optim/adamw.hpp), as the Muon authors recommend. The routing rule is
// default_muon_route below and can be replaced.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sinklab/autodiff/parameter.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/core/extern_template.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/kernels/cpu/backend.hpp"
#include "sinklab/optim/adamw.hpp"
#include "sinklab/optim/clip.hpp"
#include "sinklab/optim/param_group.hpp"
#include "sinklab/policy/elementwise.hpp"
#include "sinklab/policy/update.hpp"

namespace sinklab::optim {

struct MuonOptions {
  double lr = 0.02;
  double momentum = 0.95;
  bool nesterov = true;
  int ns_steps = 5;
  double weight_decay = 0.0;  // decoupled, p ← p·(1 − lr·wd)
};

inline constexpr double kNewtonSchulzA = 3.4445, kNewtonSchulzB = -4.7750, kNewtonSchulzC = 2.0315;

// The quintic Newton–Schulz iteration on a matrix G [rows, cols]; returns a matrix of the same
// shape with singular values near 1 (within about [0.7, 1.2]) and G's singular vectors. Runs on
// G's device through its backend's GEMM and elementwise kernels.
template <class T, class Device = cpu>
Tensor<T, Device> newton_schulz5(const Tensor<T, Device>& G, int steps = 5) {
  using K = kernels::backend<Device>;
  using kernels::Trans;
  SINKLAB_CHECK(G.defined() && G.rank() == 2, "newton_schulz5: expected a matrix, got shape ",
                G.defined() ? G.shape() : Shape{});
  SINKLAB_CHECK(steps >= 0, "newton_schulz5: steps must be >= 0, got ", steps);
  const Tensor<T, Device> g = G.contiguous();
  const bool tall = g.shape()[0] > g.shape()[1];
  const int64_t r = tall ? g.shape()[1] : g.shape()[0];
  const int64_t c = tall ? g.shape()[0] : g.shape()[1];
  Tensor<T, Device> X = tall ? g.transpose(0, 1).contiguous() : g.clone();
  const double norm = K::sum_of_squares(X.data(), X.numel());
  K::apply_update(X.numel(), policy::Scale<T>{static_cast<T>(1.0 / (std::sqrt(norm) + 1e-7))}, X.data());
  Tensor<T, Device> A = Tensor<T, Device>::empty({r, r}), B = Tensor<T, Device>::empty({r, r}),
                    Y = Tensor<T, Device>::empty({r, c});
  const T a = static_cast<T>(kNewtonSchulzA), b = static_cast<T>(kNewtonSchulzB), cc = static_cast<T>(kNewtonSchulzC);
  for (int s = 0; s < steps; ++s) {
    K::gemm(Trans::N, Trans::T, r, r, c, T(1), X.data(), c, X.data(), c, T(0), A.data(), r);  // A = X·Xᵀ
    K::binary_scalar(A.data(), b, B.data(), r * r, elem::Mul{});
    K::gemm(Trans::N, Trans::N, r, r, r, cc, A.data(), r, A.data(), r, T(1), B.data(), r);  // B = b·A + c·A·A
    K::binary_scalar(X.data(), a, Y.data(), r * c, elem::Mul{});
    K::gemm(Trans::N, Trans::N, r, c, r, T(1), B.data(), r, X.data(), c, T(1), Y.data(), c);  // Y = a·X + B·X
    std::swap(X, Y);
  }
  return tall ? X.transpose(0, 1).contiguous() : X;
}

template <class T, class Device = cpu>
struct MuonState {
  Tensor<T, Device> momentum;  // the momentum buffer, shape of the parameter
  int64_t step = 0;

  template <class F>
  void tensors(F&& f) {
    f("momentum_buffer", momentum);
  }
};

namespace detail {
inline void check_muon_options(const MuonOptions& o, std::size_t group) {
  SINKLAB_CHECK(std::isfinite(o.lr) && o.lr >= 0, "Muon: group ", group, " has lr ", o.lr, ", expected >= 0");
  SINKLAB_CHECK(o.momentum >= 0 && o.momentum < 1, "Muon: group ", group, " has momentum ", o.momentum,
                ", expected in [0, 1)");
  SINKLAB_CHECK(o.ns_steps >= 1, "Muon: group ", group, " has ns_steps ", o.ns_steps, ", expected >= 1");
  SINKLAB_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "Muon: group ", group, " has weight_decay ",
                o.weight_decay, ", expected >= 0");
}
}  // namespace detail

template <class T, class Device = cpu>
class Muon : public OptimizerBase<T, MuonOptions, MuonState<T, Device>, Device> {
  using Base = OptimizerBase<T, MuonOptions, MuonState<T, Device>, Device>;

 public:
  using Options = MuonOptions;
  using Group = ParamGroup<T, MuonOptions, Device>;
  using State = MuonState<T, Device>;

  explicit Muon(std::vector<Group> groups) : Base("Muon") {
    for (auto& g : groups) add_param_group(std::move(g));
  }
  explicit Muon(std::vector<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : Muon(std::vector<Group>{Group{std::move(params), opts}}) {}
  explicit Muon(std::initializer_list<autodiff::Parameter<T, Device>*> params, Options opts = {})
      : Muon(std::vector<autodiff::Parameter<T, Device>*>(params), opts) {}

  void add_param_group(Group g) {
    detail::check_muon_options(g.opts, this->groups_.size());
    for (auto* p : g.params)
      SINKLAB_CHECK(p && p->value.rank() == 2, "Muon: parameter '", p ? p->name : std::string("?"), "' has shape ",
                    p ? p->shape() : Shape{},
                    "; Muon updates 2-D weight matrices only (route the rest to AdamW, e.g. with MuonAdamW)");
    this->append_group(std::move(g), [](const autodiff::Parameter<T, Device>& p) {
      return State{Tensor<T, Device>::zeros(p.shape()), 0};
    });
  }

  void step() {
    using K = kernels::backend<Device>;
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < this->groups_.size(); ++gi) {
      const Group& g = this->groups_[gi];
      detail::check_muon_options(g.opts, gi);
      const double lr = g.opts.lr * this->lr_scale_;
      const T beta = static_cast<T>(g.opts.momentum);
      for (auto* p : g.params) {
        State& st = this->states_[k++];
        if (!p->requires_grad) continue;
        detail::check_trainable("Muon::step", *p);
        SINKLAB_CHECK(st.momentum.shape() == p->shape(), "Muon::step: state of '", p->name, "' has shape ",
                      st.momentum.shape(), " but the parameter has shape ", p->shape());
        ++st.step;
        const int64_t n = p->numel();
        Tensor<T, Device> u = Tensor<T, Device>::empty(p->shape());
        K::apply_update(n, policy::MuonMomentum<T>{beta, g.opts.nesterov}, static_cast<const T*>(p->grad.data()),
                        st.momentum.data(), u.data());
        const Tensor<T, Device> O = newton_schulz5(u, g.opts.ns_steps);
        // Weights are [in, out]: fan_out / fan_in = cols / rows.
        const double scale = std::sqrt(std::max(1.0, static_cast<double>(p->shape()[1]) / p->shape()[0]));
        K::apply_update(
            n, policy::DecayedStep<T>{static_cast<T>(1.0 - lr * g.opts.weight_decay), static_cast<T>(lr * scale)},
            p->value.data(), O.data());
      }
    }
    ++this->step_count_;
  }
};

// True for parameters Muon should update: 2-D matrices with both sides > 1 that are not an
// embedding, an output head, a position table or learnable tokens (by name component:
// anything containing "embed", or equal to lm_head, head, wte, wpe, pos, position, positions,
// registers, sink_token).
template <class T, class Device = cpu>
bool default_muon_route(const autodiff::Parameter<T, Device>& p) {
  if (p.value.rank() != 2 || p.shape()[0] < 2 || p.shape()[1] < 2) return false;
  static const char* const excluded[] = {"lm_head", "head", "wte", "wpe", "pos", "position", "positions",
                                         "registers", "sink_token"};
  std::size_t start = 0;
  const std::string& n = p.name;
  while (start <= n.size()) {
    std::size_t end = n.find('.', start);
    if (end == std::string::npos) end = n.size();
    const std::string part = n.substr(start, end - start);
    if (part.find("embed") != std::string::npos) return false;
    for (const char* e : excluded)
      if (part == e) return false;
    start = end + 1;
  }
  return true;
}

// Muon for the matrices, AdamW for the rest; one step()/zero_grad()/set_lr_scale() for both.
template <class T, class Device = cpu>
class MuonAdamW {
 public:
  using Route = std::function<bool(const autodiff::Parameter<T, Device>&)>;

  explicit MuonAdamW(const std::vector<autodiff::Parameter<T, Device>*>& params, MuonOptions muon = {},
                     AdamWOptions adamw = {}, Route route = default_muon_route<T, Device>)
      : muon_(split(params, route, true), muon), adamw_(split(params, route, false), adamw) {}

  void step() {
    muon_.step();
    adamw_.step();
  }
  void zero_grad() {
    muon_.zero_grad();
    adamw_.zero_grad();
  }
  // Scales both optimisers' lrs (a schedule's output).
  void set_lr_scale(double s) {
    muon_.set_lr_scale(s);
    adamw_.set_lr_scale(s);
  }
  // The generic optimiser interface that checkpoints use: both optimisers' states (their
  // parameters are disjoint) and one step count (they always step together).
  const char* name() const { return "MuonAdamW"; }
  int64_t step_count() const { return muon_.step_count(); }
  void set_step_count(int64_t n) {
    muon_.set_step_count(n);
    adamw_.set_step_count(n);
  }
  template <class F>
  void for_each_state(F&& f) {
    muon_.for_each_state(f);
    adamw_.for_each_state(f);
  }

  Muon<T, Device>& muon() { return muon_; }
  AdamW<T, Device>& adamw() { return adamw_; }
  const std::vector<autodiff::Parameter<T, Device>*>& muon_params() const { return muon_.groups().front().params; }
  const std::vector<autodiff::Parameter<T, Device>*>& adamw_params() const { return adamw_.groups().front().params; }

 private:
  static std::vector<autodiff::Parameter<T, Device>*> split(const std::vector<autodiff::Parameter<T, Device>*>& ps,
                                                            const Route& route, bool to_muon) {
    std::vector<autodiff::Parameter<T, Device>*> out;
    for (auto* p : ps) {
      SINKLAB_CHECK(p != nullptr, "MuonAdamW: null parameter pointer");
      const bool m = route(*p);
      SINKLAB_CHECK(!m || p->value.rank() == 2, "MuonAdamW: the route sent '", p->name, "' of shape ", p->shape(),
                    " to Muon, which needs a 2-D matrix");
      if (m == to_muon) out.push_back(p);
    }
    return out;
  }

  Muon<T, Device> muon_;
  AdamW<T, Device> adamw_;
};

// Compiled once in sinklab::precompiled (core/extern_template.hpp).
SINKLAB_EXTERN_TEMPLATE(class OptimizerBase<float, MuonOptions, MuonState<float>>)
SINKLAB_EXTERN_TEMPLATE(class Muon<float>)
SINKLAB_EXTERN_TEMPLATE(class MuonAdamW<float>)

}  // namespace sinklab::optim
