// attn::Attention<Score, Gate, Value, Mask, QKNorm>: one attention layer assembled from policies
// (QKNorm, norm::RMS by default, normalises q and k per head when Config::qk_norm is set).
//
//   project:  x ─W_qkv─▶ q, k, v; gate logits X·W_g (FromInput), V·W_g (FromValue) or given (FromAnchor)
//   (between them the layer stack's anchor mixing, mix::, may rewrite the projections)
//   attend:   (QK-norm) ─ (RoPE) ─┐
//   core (one tape node, hand-written backward):
//     v ─value transform─▶ v̂ ─gate on values─▶ ṽ ─fused attention─▶ o ─gate on output─▶ o'
//   o' ─merge heads─W_O─▶ y
//
// The core is autodiff::attention. Without a recorder it streams key blocks and never holds the
// T×S matrix; with an autodiff::AttentionRecorder (probe::AttentionRecorder) the layer asks for
// the materialised path, which records what the diagnostics need.
// How q, k and v reach the core is decided once per forward (attn::Path): in place in the
// projection's output when nothing sits between them, rotated straight out of it when RoPE is
// all that does, else split into heads and passed through each step in turn.
#pragma once
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/attention.hpp"
#include "sinklab/autodiff/ops/heads.hpp"
#include "sinklab/autodiff/ops/rope.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/intervention.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/nn/norm.hpp"
#include "sinklab/nn/projection.hpp"
#include "sinklab/policy/compose.hpp"

namespace sinklab::attn {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct Config {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t kv_heads = 0;  // 0: as many as heads; fewer gives grouped-query attention
  int64_t head_dim = 0;  // 0: d_model / heads
  bool qk_norm = false;  // normalise q and k per head with the QKNorm policy, after mixing, before RoPE
  double qk_norm_eps = 1e-6;  // the QK-norm's eps (norm::Options::eps)
  bool rope = false;
  double rope_theta = 10000.0;
  nn::Init init = nn::Init::normal(0.02);
  bool zero_init_output = false;  // W_O = 0 at init (ExoFormer, modded-nanoGPT)
};

// q, k, v [B, heads, T, d_head] and gate logits [B, gate heads, T, G] between projection and
// attention, where anchor mixing (mix::) rewrites them.
template <class T, class Device = cpu>
struct Projections {
  Var<T, Device> q, k, v, gate;
};

template <class T, class Device = cpu>
struct Extras {
  autodiff::AttentionRecorder<T, Device>* probe = nullptr;  // must outlive backward() to receive gradients
  const Tensor<int64_t>* kv_lengths = nullptr;   // [B] valid keys per sequence (padding at the end)
  Var<T, Device> gate_logits;                    // gate::FromAnchor: [B, gate heads, T, G]
  // This layer's interventions (nn/intervention.hpp); null or empty: none.
  const std::vector<nn::Intervention>* interventions = nullptr;
};

// How q, k and v go from the projection to the core.
enum class Path {
  InPlace,   // nothing between them: the core reads q, k, v in the projection's output and writes
             // o token-major (no split or merge copies)
  Rotated,   // RoPE only: q and k rotated straight out of the projection, one pass each way
  Composed,  // split into heads, then edits, gate, mixing, QK-norm and RoPE in turn
};

// The mixing between projection and attention when a layer has none (see nn::LayerStack).
struct NoMixing {
  static constexpr bool active() { return false; }
  template <class Tp, class X, class P>
  void operator()(Tp&, X, P&) const {}
};

template <class Score = score::Softmax, class Gate = gate::None, class Value = value::Identity,
          class Mask = mask::Causal, class QKNorm = norm::RMS>
struct Attention {
  static_assert(norm::is_policy_v<QKNorm>, "attn::Attention: QKNorm must be a sinklab::norm policy");
  using score_type = Score;
  using gate_type = Gate;
  using value_type = Value;
  using mask_type = Mask;
  using qk_norm_type = QKNorm;
  // The call checks the policies and says where the gate applies.
  template <class T, class Device>
  using Call = autodiff::AttentionCall<Score, Gate, Value, Mask, T, Device>;
  static constexpr bool gate_on_values = Call<float, cpu>::gate_on_values;
  static constexpr bool gate_on_output = Call<float, cpu>::gate_on_output;

  // Run-time settings of the policies (ζ and γ of the clipped softmax, a gate's init, ...).
  struct Policies {
    Score score{};
    Gate gate{};
    Value value{};
    Mask mask{};
  };

  template <class T, class Device = cpu>
  struct Module {
    Config cfg;
    Policies pol;
    std::string name;
    int64_t H = 0, Hkv = 0, dh = 0, gate_heads = 0, gate_channels = 0;

    Parameter<T, Device> w_qkv;                        // [d_model, (H + 2·H_kv)·d_head]
    Parameter<T, Device> w_o;                          // [H·d_head, d_model]
    norm::module_t<QKNorm, T, Device> q_norm, k_norm;  // over d_head, when qk_norm
    Parameter<T, Device> w_gate, b_gate;               // FromInput: [d_model, gh·G]; FromValue: [H_kv·d_head, gh·G]
    std::vector<Parameter<T, Device>> score_params, value_params;  // the policies' own (sink logit, θ)
    autodiff::RopeTable<T, Device> rope_table;

    Module() = default;
    Module(std::string prefix, const Config& c, Rng& rng, Policies p = {}) : cfg(c), pol(p), name(std::move(prefix)) {
      SINKLAB_CHECK(cfg.d_model > 0 && cfg.heads > 0, "Attention '", name, "': d_model ", cfg.d_model, " and heads ",
                    cfg.heads, " must be positive");
      H = cfg.heads;
      Hkv = cfg.kv_heads ? cfg.kv_heads : H;
      SINKLAB_CHECK(H % Hkv == 0, "Attention '", name, "': heads ", H, " must be a multiple of kv_heads ", Hkv);
      SINKLAB_CHECK(cfg.head_dim > 0 || cfg.d_model % H == 0, "Attention '", name, "': d_model ", cfg.d_model,
                    " is not divisible by heads ", H, " (set head_dim explicitly)");
      dh = cfg.head_dim ? cfg.head_dim : cfg.d_model / H;
      SINKLAB_CHECK(!cfg.rope || dh % 2 == 0, "Attention '", name, "': RoPE needs an even head_dim, got ", dh);
      pol.score.validate(name.c_str());
      const int64_t D = cfg.d_model;
      w_qkv = Parameter<T, Device>(nn::join_name(name, "qkv.weight"),
                                   nn::make_tensor<T, Device>({D, (H + 2 * Hkv) * dh}, cfg.init, rng));
      w_o = Parameter<T, Device>(
          nn::join_name(name, "o.weight"),
          nn::make_tensor<T, Device>({H * dh, D}, cfg.zero_init_output ? nn::Init::zeros() : cfg.init, rng));
      if (cfg.qk_norm) {
        const norm::Options qo{.eps = cfg.qk_norm_eps};
        q_norm = norm::module_t<QKNorm, T, Device>(nn::join_name(name, "q_norm"), dh, rng, qo);
        k_norm = norm::module_t<QKNorm, T, Device>(nn::join_name(name, "k_norm"), dh, rng, qo);
      }
      if constexpr (Gate::enabled) {
        gate_heads = gate_on_output ? H : Hkv;
        gate_channels = Gate::channels(dh);
        if constexpr (Gate::source != gate::Source::FromAnchor) {
          const int64_t rows = Gate::source == gate::Source::FromInput ? D : Hkv * dh;
          Tensor<T> w = Tensor<T>::empty({rows, gate_heads * gate_channels});  // drawn on the host
          Tensor<T> b = Tensor<T>::empty({gate_heads * gate_channels});
          pol.gate.init.initialise(rng, w, pol.gate.init.has_bias() ? &b : nullptr);
          w_gate = Parameter<T, Device>(nn::join_name(name, "gate.weight"), w.template to_device<Device>());
          if (pol.gate.init.has_bias())
            b_gate = Parameter<T, Device>(nn::join_name(name, "gate.bias"), b.template to_device<Device>());
        }
      }
      pol.score.template make_params<T>(H).parameters([&](const char* n, Tensor<T>& t) {
        score_params.emplace_back(nn::join_name(name, n), t.template to_device<Device>());
      });
      pol.value.template make_params<T>(Hkv).parameters([&](const char* n, Tensor<T>& t) {
        value_params.emplace_back(nn::join_name(name, n), t.template to_device<Device>());
      });
    }

    template <class V>
    void parameters(V&& visit) {
      visit(w_qkv);
      if (cfg.qk_norm) {
        q_norm.parameters(visit);
        k_norm.parameters(visit);
      }
      if (w_gate.value.defined()) visit(w_gate);
      if (b_gate.value.defined()) visit(b_gate);
      for (auto& p : score_params) visit(p);
      for (auto& p : value_params) visit(p);
      visit(w_o);
    }

    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x) { return forward(tape, x, Extras<T, Device>{}); }
    Var<T, Device> operator()(Tape<T, Device>& tape, Var<T, Device> x, autodiff::AttentionRecorder<T, Device>* probe) {
      Extras<T, Device> ex;
      ex.probe = probe;
      return forward(tape, x, ex);
    }

    // x [B, T, d_model] → [B, T, d_model]. `mixing` (the layer stack's anchor mixing, a callable
    // (tape, x, Projections&) with active()) rewrites the projections before the attention.
    template <class Mixing = NoMixing>
    Var<T, Device> forward(Tape<T, Device>& tape, Var<T, Device> x, const Extras<T, Device>& ex, Mixing&& mixing = {}) {
      const Path route = path(ex, mixing.active());
      if constexpr (!Gate::enabled && Value::identity) {
        if (route == Path::InPlace) {
          prepare(x);
          return nn::project(tape, core_from_projection(tape, nn::project(tape, x, w_qkv), ex), w_o);
        }
      }
      Projections<T, Device> p = project(tape, x, ex, route);
      if (mixing.active()) mixing(tape, x, p);
      return attend(tape, x, p, ex, route);
    }

    // The path a forward with these extras takes (with or without mixing between the steps).
    Path path(const Extras<T, Device>& ex, bool mixed) const {
      const bool intervened = ex.interventions && !ex.interventions->empty();
      const bool plain = !cfg.qk_norm && !mixed;
      if (plain && !Gate::enabled && Value::identity && !ex.probe && !intervened) return Path::InPlace;
      return plain && cfg.rope ? Path::Rotated : Path::Composed;
    }

    // x → the heads and gate logits (route Rotated or Composed), value edits applied. A forward
    // split by hand is attend(tape, x, project(tape, x, ex, r), ex, r) with r = path(ex, mixed).
    Projections<T, Device> project(Tape<T, Device>& tape, Var<T, Device> x, const Extras<T, Device>& ex, Path route) {
      SINKLAB_CHECK(route != Path::InPlace, "Attention '", name, "': the in-place path has no separate projections");
      prepare(x);
      const Var<T, Device> qkv = nn::project(tape, x, w_qkv);
      auto heads = [&](int64_t col0, int64_t n) {
        return route == Path::Rotated ? autodiff::rope_heads(qkv, col0, n, dh, rope_table)
                                      : autodiff::split_heads(qkv, col0, n, dh);
      };
      Projections<T, Device> p{heads(0, H), heads(H * dh, Hkv), autodiff::split_heads(qkv, (H + Hkv) * dh, Hkv, dh),
                               Var<T, Device>{}};
      const Var<T, Device> edited_v = edited(tape, p.v, nn::Site::Value, "key/value heads", ex);
      const bool value_edited = edited_v.id != p.v.id;
      p.v = edited_v;  // what reads v sees the edit, VGA's gate included
      if constexpr (Gate::enabled) {
        if constexpr (Gate::source == gate::Source::FromAnchor) {
          p.gate = ex.gate_logits;
        } else {
          Var<T, Device> src = Gate::source == gate::Source::FromInput ? x
                               : value_edited ? autodiff::merge_heads(p.v)
                                              : slice(qkv, 2, (H + Hkv) * dh, (H + 2 * Hkv) * dh);
          Var<T, Device> lg = nn::project(tape, src, w_gate);
          if (b_gate.value.defined()) lg = lg + tape.param(b_gate);
          p.gate = autodiff::split_heads(lg, 0, gate_heads, gate_channels);
        }
      }
      return p;
    }

    // The projections (after any mixing) → the layer's output: QK-norm, RoPE where the route has
    // not rotated them yet, the core, head-output edits, W_O.
    Var<T, Device> attend(Tape<T, Device>& tape, Var<T, Device> x, Projections<T, Device> p,
                          const Extras<T, Device>& ex, Path route) {
      SINKLAB_CHECK(route != Path::InPlace, "Attention '", name, "': attend() takes the route project() was given");
      if constexpr (Gate::enabled) {
        SINKLAB_CHECK(p.gate.defined(), "Attention '", name,
                      "': gate::FromAnchor needs gate logits (Extras::gate_logits or anchor mixing that sets them)");
        const Shape want{x.shape()[0], gate_heads, x.shape()[1], gate_channels};
        SINKLAB_CHECK(p.gate.shape() == want, "Attention '", name, "': gate logits of shape ", p.gate.shape(),
                      ", expected ", want);
      }
      if (cfg.qk_norm) {
        p.q = q_norm(tape, p.q);
        p.k = k_norm(tape, p.k);
      }
      if (cfg.rope && route == Path::Composed) {
        p.q = autodiff::rope(p.q, rope_table, 0);
        p.k = autodiff::rope(p.k, rope_table, 0);
      }
      Var<T, Device> o = edited(tape, core(tape, p, ex), nn::Site::HeadOutput, "query heads", ex);
      Var<T, Device> y = nn::project(tape, autodiff::merge_heads(o), w_o);
      if (ex.probe) ex.probe->output = y.value();
      return y;
    }

   private:
    // Checks the input x [B, T, d_model] and readies the RoPE table for its T.
    void prepare(Var<T, Device> x) {
      SINKLAB_CHECK(x.rank() == 3 && x.shape()[2] == cfg.d_model, "Attention '", name, "': input of shape ",
                    x.shape(), ", expected [B, T, ", cfg.d_model, "]");
      if (cfg.rope) rope_table.ensure(x.shape()[1], dh, cfg.rope_theta);
    }

    // Rebuilds a policy's Params<T> from the Parameters (which optimisers and checkpoint loads
    // may have replaced) and binds them on the tape in visiting order.
    template <class P>
    P bind(Tape<T, Device>& tape, std::vector<Parameter<T, Device>>& ps, std::vector<Var<T, Device>>& vars, P params) {
      std::size_t i = 0;
      params.parameters([&](const char*, Tensor<T, Device>& t) {
        t = ps[i].value;
        vars.push_back(tape.param(ps[i]));
        ++i;
      });
      return params;
    }

    // The policies and their parameters bound on the tape for one forward.
    Call<T, Device> call(Tape<T, Device>& tape, const Extras<T, Device>& ex) {
      Call<T, Device> c;
      c.score = pol.score;
      c.gate = pol.gate;
      c.value = pol.value;
      c.mask = pol.mask;
      c.score_params = bind(tape, score_params, c.score_vars, score::params_t<Score, T, Device>{});
      c.value_params = bind(tape, value_params, c.value_vars, value::params_t<Value, T, Device>{});
      if (ex.kv_lengths) c.options.kv_lengths = *ex.kv_lengths;
      c.recorder = ex.probe;
      return c;
    }

    Var<T, Device> core(Tape<T, Device>& tape, const Projections<T, Device>& p, const Extras<T, Device>& ex) {
      Call<T, Device> c = call(tape, ex);
      if (ex.interventions && !ex.interventions->empty()) {
        const std::vector<nn::Intervention>& ivs = *ex.interventions;
        const int64_t B = p.q.shape()[0], T_ = p.q.shape()[2], S = p.k.shape()[2];
        c.weight_edit = nn::site_edit<T, Device>(ivs, nn::Site::AttentionRow, Shape{B, H, T_, S}, name, "query heads");
        if constexpr (Gate::enabled) {
          c.gate_edit = nn::site_edit<T, Device>(ivs, nn::Site::Gate, p.gate.shape(), name,
                                                 gate_on_values ? "key/value heads" : "query heads");
        } else {
          for (const nn::Intervention& iv : ivs)
            SINKLAB_CHECK(iv.site != nn::Site::Gate, name, ": intervention ", iv.describe(),
                          ": this attention has no gate (gate::None)");
        }
        SINKLAB_CHECK(ex.probe || (!c.weight_edit.active() && !c.gate_edit.active()), name,
                      ": interventions on attention rows and gates run on the materialised attention; probe it with "
                      "attention recorded (ModelProbe::attention = true)");
      }
      return autodiff::attention(c, p.q, p.k, p.v, p.gate);
    }

    // x with this layer's interventions at `site` applied (x itself when there are none).
    Var<T, Device> edited(Tape<T, Device>& tape, Var<T, Device> x, nn::Site site, const char* heads_kind,
                          const Extras<T, Device>& ex) {
      if (!ex.interventions || ex.interventions->empty()) return x;
      const autodiff::Edit<T, Device> e =
          nn::site_edit<T, Device>(*ex.interventions, site, x.shape(), name, heads_kind);
      if (!e.active()) return x;
      return x * tape.constant(e.scale) + tape.constant(e.shift);
    }

    Var<T, Device> core_from_projection(Tape<T, Device>& tape, Var<T, Device> qkv, const Extras<T, Device>& ex) {
      return autodiff::attention_from_projection(call(tape, ex), qkv, H, Hkv, dh, cfg.rope ? &rope_table : nullptr);
    }
  };
};

}  // namespace sinklab::attn
