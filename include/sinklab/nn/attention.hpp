// attn::Attention<Score, Gate, Value, Mask>: one attention layer assembled from policies.
//
//   x ─W_qkv─▶ q, k, v ─(mix)─(QK-norm)─(RoPE)─┐
//   gate logits: X·W_g (FromInput), V·W_g (FromValue) or given (FromAnchor)
//   core (one tape node, hand-written backward):
//     v ─value transform─▶ v̂ ─gate on values─▶ ṽ ─fused attention─▶ o ─gate on output─▶ o'
//   o' ─merge heads─W_O─▶ y
//
// Without a probe the core streams key blocks and never holds the T×S matrix; with an
// AttentionRecorder it takes the materialised path and records what the diagnostics need.
// With nothing between projection and kernel (no mixing, QK-norm, gate, value transform or
// probe) the core reads q, k, v in place in the projection's output and writes o token-major:
// no split or merge copies (core_from_projection).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/kernels/cpu/attention.hpp"
#include "sinklab/nn/heads.hpp"
#include "sinklab/nn/init.hpp"
#include "sinklab/nn/module.hpp"
#include "sinklab/nn/projection.hpp"
#include "sinklab/policy/compose.hpp"
#include "sinklab/policy/norm.hpp"
#include "sinklab/policy/pos.hpp"

namespace sinklab::attn {

using autodiff::Parameter;
using autodiff::Tape;
using autodiff::Var;

struct Config {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t kv_heads = 0;  // 0: as many as heads; fewer gives grouped-query attention
  int64_t head_dim = 0;  // 0: d_model / heads
  bool qk_norm = false;  // RMS-normalise q and k per head (learnable gain), after mixing, before RoPE
  double qk_norm_eps = 1e-6;
  bool rope = false;
  double rope_theta = 10000.0;
  nn::Init init = nn::Init::normal(0.02);
  bool zero_init_output = false;  // W_O = 0 at init (ExoFormer, modded-nanoGPT)
};

// q, k, v [B, heads, T, d_head] and gate logits [B, gate heads, T, G] between projection and
// attention, where anchor mixing (mix::) rewrites them.
template <class T>
struct Projections {
  Var<T> q, k, v, gate;
};

template <class T>
struct Extras {
  probe::AttentionRecorder<T>* probe = nullptr;  // must outlive backward() to receive gradients
  const Tensor<int64_t>* kv_lengths = nullptr;   // [B] valid keys per sequence (padding at the end)
  Var<T> gate_logits;                            // gate::FromAnchor: [B, gate heads, T, G]
  // Anchor mixing: rewrites the projections; x is the layer's (normed) input, for dynamic
  // per-token coefficients.
  std::function<void(Tape<T>&, Var<T> x, Projections<T>&)> mix;
};

namespace detail {
template <class G, gate::Placement P>
constexpr bool gate_at() {
  if constexpr (G::enabled) return G::placement == P;
  else return false;
}
}  // namespace detail

template <class Score = score::Softmax, class Gate = gate::None, class Value = value::Identity,
          class Mask = mask::Causal>
struct Attention {
  static_assert(policy::check_attention_policies<Score, Gate, Value, Mask>());
  using score_type = Score;
  using gate_type = Gate;
  using value_type = Value;
  using mask_type = Mask;
  static constexpr bool gate_on_values = detail::gate_at<Gate, gate::Placement::OnValues>();
  static constexpr bool gate_on_output = detail::gate_at<Gate, gate::Placement::OnOutput>();

  // Run-time settings of the policies (ζ and γ of the clipped softmax, a gate's init, ...).
  struct Policies {
    Score score{};
    Gate gate{};
    Value value{};
    Mask mask{};
  };

  template <class T>
  struct Module {
    Config cfg;
    Policies pol;
    std::string name;
    int64_t H = 0, Hkv = 0, dh = 0, gate_heads = 0, gate_channels = 0;

    Parameter<T> w_qkv;  // [d_model, (H + 2·H_kv)·d_head]
    Parameter<T> w_o;    // [H·d_head, d_model]
    Parameter<T> q_norm, k_norm;  // [d_head] when qk_norm
    Parameter<T> w_gate, b_gate;  // FromInput: [d_model, gh·G]; FromValue: [H_kv·d_head, gh·G]
    std::vector<Parameter<T>> score_params, value_params;  // the policies' own (sink logit, θ)
    pos::RopeTable<T> rope_table;

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
      w_qkv = Parameter<T>(nn::join_name(name, "qkv.weight"), nn::make_tensor<T>({D, (H + 2 * Hkv) * dh}, cfg.init, rng));
      w_o = Parameter<T>(nn::join_name(name, "o.weight"),
                         nn::make_tensor<T>({H * dh, D}, cfg.zero_init_output ? nn::Init::zeros() : cfg.init, rng));
      if (cfg.qk_norm) {
        q_norm = Parameter<T>(nn::join_name(name, "q_norm.weight"), Tensor<T>::ones({dh}));
        k_norm = Parameter<T>(nn::join_name(name, "k_norm.weight"), Tensor<T>::ones({dh}));
      }
      if constexpr (Gate::enabled) {
        gate_heads = gate_on_output ? H : Hkv;
        gate_channels = Gate::channels(dh);
        if constexpr (Gate::source != gate::Source::FromAnchor) {
          const int64_t rows = Gate::source == gate::Source::FromInput ? D : Hkv * dh;
          Tensor<T> w = Tensor<T>::empty({rows, gate_heads * gate_channels});
          Tensor<T> b = Tensor<T>::empty({gate_heads * gate_channels});
          pol.gate.init.initialise(rng, w, pol.gate.init.has_bias() ? &b : nullptr);
          w_gate = Parameter<T>(nn::join_name(name, "gate.weight"), w);
          if (pol.gate.init.has_bias()) b_gate = Parameter<T>(nn::join_name(name, "gate.bias"), b);
        }
      }
      pol.score.template make_params<T>(H).parameters([&](const char* n, Tensor<T>& t) {
        score_params.emplace_back(nn::join_name(name, n), t);
      });
      pol.value.template make_params<T>(Hkv).parameters([&](const char* n, Tensor<T>& t) {
        value_params.emplace_back(nn::join_name(name, n), t);
      });
    }

    template <class V>
    void parameters(V&& visit) {
      visit(w_qkv);
      if (cfg.qk_norm) {
        visit(q_norm);
        visit(k_norm);
      }
      if (w_gate.value.defined()) visit(w_gate);
      if (b_gate.value.defined()) visit(b_gate);
      for (auto& p : score_params) visit(p);
      for (auto& p : value_params) visit(p);
      visit(w_o);
    }

    Var<T> operator()(Tape<T>& tape, Var<T> x) { return forward(tape, x, Extras<T>{}); }
    Var<T> operator()(Tape<T>& tape, Var<T> x, probe::AttentionRecorder<T>* probe) {
      Extras<T> ex;
      ex.probe = probe;
      return forward(tape, x, ex);
    }

    // x [B, T, d_model] → [B, T, d_model]
    Var<T> forward(Tape<T>& tape, Var<T> x, const Extras<T>& ex) {
      SINKLAB_CHECK(x.rank() == 3 && x.shape()[2] == cfg.d_model, "Attention '", name, "': input of shape ",
                    x.shape(), ", expected [B, T, ", cfg.d_model, "]");
      auto qkv = matmul(nn::projection_input(tape, x, w_qkv), tape.param(w_qkv));
      if (cfg.rope) rope_table.ensure(x.shape()[1], dh, cfg.rope_theta);
      // Nothing between the projection and the attention kernel, nor between it and W_O: q, k
      // and v are read in place and the output is written token-major (no split or merge).
      if constexpr (!Gate::enabled && Value::identity) {
        if (!cfg.qk_norm && !ex.mix && !ex.probe)
          return matmul(nn::projection_input(tape, core_from_projection(tape, qkv, ex), w_o), tape.param(w_o));
      }
      // With nothing between the split and RoPE (no mixing, no QK-norm), q and k are rotated
      // straight out of the projection, one pass each way instead of two.
      const bool rope_on_split = cfg.rope && !cfg.qk_norm && !ex.mix;
      auto heads = [&](int64_t col0, int64_t n) {
        return rope_on_split ? pos::rope_heads(qkv, col0, n, dh, rope_table) : nn::split_heads(qkv, col0, n, dh);
      };
      Projections<T> p{heads(0, H), heads(H * dh, Hkv), nn::split_heads(qkv, (H + Hkv) * dh, Hkv, dh), Var<T>{}};
      if constexpr (Gate::enabled) {
        if constexpr (Gate::source == gate::Source::FromAnchor) {
          p.gate = ex.gate_logits;
        } else {
          Var<T> src = Gate::source == gate::Source::FromInput ? x : slice(qkv, 2, (H + Hkv) * dh, (H + 2 * Hkv) * dh);
          Var<T> lg = matmul(nn::projection_input(tape, src, w_gate), tape.param(w_gate));
          if (b_gate.value.defined()) lg = lg + tape.param(b_gate);
          p.gate = nn::split_heads(lg, 0, gate_heads, gate_channels);
        }
      }
      if (ex.mix) ex.mix(tape, x, p);
      if constexpr (Gate::enabled) {
        SINKLAB_CHECK(p.gate.defined(), "Attention '", name,
                      "': gate::FromAnchor needs gate logits (Extras::gate_logits or a mix hook that sets them)");
        const Shape want{x.shape()[0], gate_heads, x.shape()[1], gate_channels};
        SINKLAB_CHECK(p.gate.shape() == want, "Attention '", name, "': gate logits of shape ", p.gate.shape(),
                      ", expected ", want);
      }
      if (cfg.qk_norm) {
        p.q = norm::rms_norm(p.q, tape.param(q_norm), cfg.qk_norm_eps);
        p.k = norm::rms_norm(p.k, tape.param(k_norm), cfg.qk_norm_eps);
      }
      if (cfg.rope && !rope_on_split) {
        p.q = pos::rope(p.q, rope_table, 0);
        p.k = pos::rope(p.k, rope_table, 0);
      }
      Var<T> o = core(tape, p, ex);
      Var<T> y = matmul(nn::projection_input(tape, nn::merge_heads(o), w_o), tape.param(w_o));
      if (ex.probe) ex.probe->output = y.value();
      return y;
    }

   private:
    // Rebuilds a policy's Params<T> from the Parameters (which optimisers and checkpoint loads
    // may have replaced) and binds them on the tape in visiting order.
    template <class P>
    P bind(Tape<T>& tape, std::vector<Parameter<T>>& ps, std::vector<Var<T>>& vars, P params) {
      std::size_t i = 0;
      params.parameters([&](const char*, Tensor<T>& t) {
        t = ps[i].value;
        vars.push_back(tape.param(ps[i]));
        ++i;
      });
      return params;
    }

    Var<T> core(Tape<T>& tape, const Projections<T>& p, const Extras<T>& ex) {
      using namespace kernels::cpu;
      std::vector<Var<T>> svars, vvars;
      auto sparams = bind(tape, score_params, svars, pol.score.template make_params<T>(H));
      auto vparams = bind(tape, value_params, vvars, pol.value.template make_params<T>(Hkv));
      AttentionOptions opt;
      if (ex.kv_lengths) opt.kv_lengths = *ex.kv_lengths;
      probe::AttentionRecorder<T>* probe = ex.probe;

      const Tensor<T> q = p.q.value(), k = p.k.value(), v = p.v.value();
      const Tensor<T> g = Gate::enabled ? p.gate.value() : Tensor<T>{};
      const Tensor<T> vhat = value_transform_forward(pol.value, v, vparams);
      Tensor<T> vt = vhat;
      if constexpr (gate_on_values) vt = gate_forward(pol.gate, vhat, g);
      AttentionForward<T> fwd = attention_forward(pol.score, pol.mask, q, k, vt, sparams, opt, probe);
      Tensor<T> out = fwd.out;
      if constexpr (gate_on_output) out = gate_forward(pol.gate, fwd.out, g);
      if (probe) record(*probe, v, vt, g);

      std::vector<Var<T>> inputs{p.q, p.k, p.v};
      if constexpr (Gate::enabled) inputs.push_back(p.gate);
      inputs.insert(inputs.end(), svars.begin(), svars.end());
      inputs.insert(inputs.end(), vvars.begin(), vvars.end());
      const Policies pol_copy = pol;
      return tape.record(out, inputs, [=](Tape<T>& t, const Tensor<T>& dout) {
        Tensor<T> d_core = dout, dgate;
        if constexpr (gate_on_output) {
          GateGrads<T> gg = gate_backward(pol_copy.gate, fwd.out, g, dout);
          d_core = gg.dx;
          dgate = gg.dlogit;
        }
        auto grads = attention_backward(pol_copy.score, pol_copy.mask, q, k, vt, sparams, fwd, d_core, opt, probe);
        Tensor<T> dvhat = grads.dv;
        if constexpr (gate_on_values) {
          GateGrads<T> gg = gate_backward(pol_copy.gate, vhat, g, grads.dv);
          dvhat = gg.dx;
          dgate = gg.dlogit;
        }
        auto vg = value_transform_backward(pol_copy.value, v, vparams, dvhat);
        if (probe) {
          probe->grad_q = grads.dq;
          probe->grad_k = grads.dk;
          probe->grad_v = vg.dv;
        }
        t.accumulate(inputs[0], grads.dq);
        t.accumulate(inputs[1], grads.dk);
        t.accumulate(inputs[2], vg.dv);
        std::size_t i = 3;
        if constexpr (Gate::enabled) t.accumulate(inputs[i++], dgate);
        grads.dscore.parameters([&](const char*, Tensor<T>& d) { t.accumulate(inputs[i++], d); });
        vg.dparams.parameters([&](const char*, Tensor<T>& d) { t.accumulate(inputs[i++], d); });
      });
    }

    // The core for q, k, v straight out of the projection qkv [B, T, (H + 2·H_kv)·d_head] (q and k
    // rotated into head-major copies when RoPE is on, else read in place like v), its output
    // written as [B, T, H·d_head]: no split or merge copies forward, and backward one pass
    // that writes each element of qkv's gradient once.
    Var<T> core_from_projection(Tape<T>& tape, Var<T> qkv, const Extras<T>& ex) {
      using namespace kernels::cpu;
      std::vector<Var<T>> svars;
      auto sparams = bind(tape, score_params, svars, pol.score.template make_params<T>(H));
      AttentionOptions opt;
      if (ex.kv_lengths) opt.kv_lengths = *ex.kv_lengths;
      const Tensor<T> x = qkv.value().contiguous();
      const int64_t B = x.size(0), L = x.size(1), N = x.size(2), half = dh / 2;
      // Heads [h0, h0 + n) of a token-major [B, L, N] tensor as a [B, n, L, d_head] view.
      auto heads = [B, L, d = dh](const Tensor<T>& t, int64_t h0, int64_t n) {
        return t.view({B, L, t.size(2) / d, d}).slice(2, h0, h0 + n).transpose(1, 2);
      };
      const bool rope = cfg.rope;
      const Tensor<T> c = rope_table.cos, sn = rope_table.sin;
      auto rotated = [&](int64_t h0, int64_t n) {
        Tensor<T> y = Tensor<T>::empty({B, n, L, dh});
        pos::kernels::rope_gather(x.data(), B, L, N, h0 * dh, n, dh, c.data(), sn.data(), int64_t{0}, y.data());
        return y;
      };
      const Tensor<T> q = rope ? rotated(0, H) : heads(x, 0, H), k = rope ? rotated(H, Hkv) : heads(x, H, Hkv);
      const Tensor<T> v = heads(x, H + Hkv, Hkv);
      Tensor<T> y = Tensor<T>::empty({B, L, H * dh});
      const AttentionForward<T> fwd =
          attention_fused_forward(pol.score, pol.mask, q, k, v, sparams, opt, heads(y, 0, H));

      std::vector<Var<T>> inputs{qkv};
      inputs.insert(inputs.end(), svars.begin(), svars.end());
      const Policies pc = pol;
      const int64_t nh = H, nkv = Hkv, d = dh;
      return tape.record(y, inputs, [=](Tape<T>& t, const Tensor<T>& g) {
        auto grads =
            attention_fused_backward(pc.score, pc.mask, q, k, v, sparams, fwd, heads(g.contiguous(), 0, nh), opt);
        // One token-major pass writes every column of qkv's gradient: dq and dk rotated back
        // (or copied without RoPE), dv copied. Its rows are written in order, which streams.
        Tensor<T> gx = Tensor<T>::empty({B, L, N});
        const T *dq = grads.dq.data(), *dk = grads.dk.data(), *dv = grads.dv.data();
        parallel_for(0, B * L, std::max<int64_t>(1, 4096 / N), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t b = r / L, tt = r % L;
            T* dst = gx.data() + r * N;
            const T* cp = rope ? c.data() + tt * half : nullptr;
            const T* sp = rope ? sn.data() + tt * half : nullptr;
            auto put = [&](const T* src, int64_t n, int64_t h0, bool rotate) {
              for (int64_t h = 0; h < n; ++h) {
                const T* from = src + ((b * n + h) * L + tt) * d;
                if (rotate) pos::kernels::rope_row(from, dst + (h0 + h) * d, cp, sp, half, T(-1), false);
                else simd::copy(from, dst + (h0 + h) * d, d);
              }
            };
            put(dq, nh, 0, rope);
            put(dk, nkv, nh, rope);
            put(dv, nkv, nh + nkv, false);
          }
        });
        t.accumulate(inputs[0], std::move(gx));
        std::size_t i = 1;
        grads.dscore.parameters([&](const char*, Tensor<T>& ds) { t.accumulate(inputs[i++], ds); });
      });
    }

    // |v_j| and |ṽ_j| per (batch, kv head, key), and the gate values.
    static void record(probe::AttentionRecorder<T>& pr, const Tensor<T>& v, const Tensor<T>& vt, const Tensor<T>& g) {
      auto norms = [](const Tensor<T>& x) {
        const int64_t rows = x.numel() / x.size(3), d = x.size(3);
        Tensor<T> n = Tensor<T>::empty({x.size(0), x.size(1), x.size(2)});
        for (int64_t r = 0; r < rows; ++r) n.data()[r] = std::sqrt(simd::dot(x.data() + r * d, x.data() + r * d, d));
        return n;
      };
      pr.values = v;
      pr.value_norms = norms(v);
      pr.transformed_value_norms = norms(vt);
      if (g.defined()) {
        Tensor<T> s = Tensor<T>::empty(g.shape());
        kernels::cpu::unary<kernels::cpu::fn::Sigmoid>(g.data(), s.data(), g.numel());
        pr.gate_values = s;
      }
    }
  };
};

}  // namespace sinklab::attn
