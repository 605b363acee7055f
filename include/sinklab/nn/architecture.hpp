// What a model is, as flat text: its policies by name and every setting that changes the function
// it computes, e.g. {"attn.gate": "from_value", "attn.gate.placement": "on_values", "layers": "4"}.
// io::save_parameters writes it into a checkpoint's metadata (keys "sinklab.model.<key>") and
// io::load_parameters compares it with the model it loads into, so a checkpoint says what it
// holds (scripts/sinklab_torch.py builds the PyTorch module from it) and a mismatch is named
// key by key instead of surfacing as a shape error or, worse, as a silently different model.
//
// A model provides `Architecture architecture() const`; the helpers here describe the pieces.
// Initialisation settings (init scales, a sink's initial logit) are left out: they do not change
// what trained weights compute.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>

#include "sinklab/nn/attention.hpp"
#include "sinklab/nn/norm.hpp"

namespace sinklab::nn {

using Architecture = std::map<std::string, std::string>;

namespace detail {
// Shortest text that reads back as the same double.
inline std::string arch_text(double x) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}
inline std::string arch_text(bool b) { return b ? "true" : "false"; }
inline std::string arch_text(int64_t n) { return std::to_string(n); }
inline std::string arch_text(int n) { return std::to_string(n); }
inline std::string arch_text(const char* s) { return s; }
}  // namespace detail

// A norm policy's name; a GatedNorm adds its base and rank; the module's eps when it has one.
template <class Norm, class M>
void describe_norm(Architecture& a, const std::string& key, const M& module) {
  a[key] = Norm::name;
  if constexpr (requires { Norm::rank; typename Norm::base_policy; }) {
    a[key + ".base"] = Norm::base_policy::name;
    a[key + ".rank"] = detail::arch_text(Norm::rank);
    describe_norm<typename Norm::base_policy>(a, key + ".base", module.base);
  } else if constexpr (requires { module.eps; }) {
    a[key + ".eps"] = detail::arch_text(static_cast<double>(module.eps));
  }
}

// An attention layer's policies, their run-time settings and its head layout.
template <class Attn, class M>
void describe_attention(Architecture& a, const M& m) {
  using Score = typename Attn::score_type;
  using Gate = typename Attn::gate_type;
  using Value = typename Attn::value_type;
  const auto& pol = m.pol;
  a["attn.score"] = Score::name;
  if constexpr (requires { pol.score.zeta; pol.score.gamma; }) {
    a["attn.score.zeta"] = detail::arch_text(pol.score.zeta);
    a["attn.score.gamma"] = detail::arch_text(pol.score.gamma);
  }
  if constexpr (requires { pol.score.alpha; }) a["attn.score.alpha"] = detail::arch_text(pol.score.alpha);
  if constexpr (requires { pol.score.degree; }) a["attn.score.degree"] = detail::arch_text(pol.score.degree);
  if constexpr (requires { pol.score.fixed_bias; }) {
    if (pol.score.fixed_bias) a["attn.score.bias"] = detail::arch_text(pol.score.bias);
  }
  a["attn.gate"] = Gate::name;
  if constexpr (Gate::enabled) {
    a["attn.gate.placement"] = Gate::placement == gate::Placement::OnValues ? "on_values" : "on_output";
    a["attn.gate.granularity"] = Gate::granularity == gate::Granularity::PerHead ? "per_head" : "per_channel";
    a["attn.gate.bias"] = detail::arch_text(m.b_gate.value.defined());
  }
  a["attn.value"] = Value::name;
  if constexpr (requires { pol.value.c_scale; }) a["attn.value.c_scale"] = detail::arch_text(pol.value.c_scale);
  a["attn.mask"] = Attn::mask_type::name;
  a["heads"] = detail::arch_text(m.H);
  a["kv_heads"] = detail::arch_text(m.Hkv);
  a["head_dim"] = detail::arch_text(m.dh);
  if (m.cfg.qk_norm) {
    describe_norm<typename Attn::qk_norm_type>(a, "attn.qk_norm", m.q_norm);
  } else {
    a["attn.qk_norm"] = "none";
  }
}

// A block stack's pieces, read off its first layer (every layer has the same policies): the
// layout, the norm, the attention, the feed-forward and the mixing across layers. The layout is
// written only when it is not pre-norm, so checkpoints saved before post-norm existed still load.
template <class Block, class Attn, class FFN, class Mix, class Layer>
void describe_blocks(Architecture& a, const Layer& l0) {
  if constexpr (Block::post_norm) a["block"] = Block::name;
  describe_norm<typename Block::norm_policy>(a, "norm", l0.attn_norm);
  describe_attention<Attn>(a, l0.attn);
  a["ffn"] = FFN::name;
  if constexpr (requires { l0.ffn.hidden; }) a["ffn.hidden"] = detail::arch_text(l0.ffn.hidden);
  a["mix"] = Mix::name;
}

}  // namespace sinklab::nn
