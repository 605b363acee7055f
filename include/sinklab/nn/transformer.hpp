// Whole models from policies:
//
//   using VGA   = attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>>;
//   using Model = nn::Transformer<nn::PreNorm<norm::RMS>, VGA, ffn::SwiGLU>;   // RoPE by default
//   Model::Module<float> model("", cfg, rng);
//   auto loss = model.loss(tape, ids, targets);
//
// nn::Transformer is embeddings → (positions) → (sink/register tokens) → nn::LayerStack (the
// mixing and the pre-norm blocks of nn/layers.hpp) → final norm → LM head. The attention's mask
// decides decoder or encoder. A ModelProbe records every layer's attention, residual stream and
// branch outputs, and, on request, their gradients.
#pragma once
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/architecture.hpp"
#include "sinklab/nn/layers.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/pos.hpp"
#include "sinklab/nn/tokens.hpp"

namespace sinklab::nn {

using autodiff::Tape;
using autodiff::Var;

// A decoder (causal mask) or encoder (bidirectional) language model over token ids.
template <class Block, class Attn, class FFN, class Pos = pos::RoPE, class Tokens = tokens::None,
          class Mix = mix::None>
struct Transformer {
  static_assert(pos::is_policy_v<Pos>,
                "nn::Transformer: Pos must be a sinklab::pos policy (RoPE, Learned, None, or satisfying pos::Policy)");
  static_assert(tokens::is_policy_v<Tokens>, "nn::Transformer: Tokens must be a sinklab::tokens policy (None, Sink, "
                                             "Registers, or satisfying tokens::Policy)");
  static_assert(mix::is_policy_v<Mix>, "nn::Transformer: Mix must be a sinklab::mix policy");
  using layer_type = Layer<Block, Attn, FFN>;
  using stack_type = LayerStack<Block, Attn, FFN, Mix>;
  static constexpr bool causal = std::is_same_v<typename Attn::mask_type, mask::Causal>;

  // The stack is the base: model.layers[i] and model.mixer are the stack's.
  template <class T, class Device = cpu>
  struct Module : stack_type::template Module<T, Device> {
    using Stack = nn::module_t<stack_type, T, Device>;
    ModelConfig cfg;
    std::string name;
    Embedding<T, Device> embed;
    Parameter<T, Device> embed_scale;        // [1], only with ModelConfig::embed_scale > 0
    nn::module_t<Pos, T, Device> positions;  // pos::Learned adds a table; RoPE lives in attention
    nn::module_t<Tokens, T, Device> tokens;
    nn::module_t<typename Block::norm_policy, T, Device> final_norm;
    Linear<T, Device> lm_head;     // [d_model, vocab]; unused when embeddings are tied
    std::string embeddings_point;  // the residual-stream point entering layer 0 (nn::stream_point)

    Module() = default;
    Module(std::string prefix, const ModelConfig& c, Rng& rng, const typename Attn::Policies& pol = {},
           const typename Mix::Options& mix_opts = {})
        : cfg(c), name(std::move(prefix)), embeddings_point(join_name(name, "embeddings")) {
      SINKLAB_CHECK(cfg.vocab > 0 && cfg.d_model > 0 && cfg.layers > 0, "Transformer '", name,
                    "': vocab, d_model and layers must be positive, got ", cfg.vocab, ", ", cfg.d_model, ", ",
                    cfg.layers);
      embed = Embedding<T, Device>(join_name(name, "embed"), cfg.vocab, cfg.d_model, rng, cfg.init);
      SINKLAB_CHECK(std::isfinite(cfg.embed_scale) && cfg.embed_scale >= 0, "Transformer '", name,
                    "': embed_scale must be >= 0 (0: none), got ", cfg.embed_scale);
      if (cfg.embed_scale > 0)
        embed_scale = Parameter<T, Device>(join_name(name, "embed_scale"),
                                           Tensor<T, Device>::full({1}, static_cast<T>(cfg.embed_scale)));
      if constexpr (!pos::is_rotary_v<Pos>) {
        typename Pos::Options po{};
        if constexpr (requires { po.max_len; }) po.max_len = cfg.max_len;
        if constexpr (requires { po.init; }) po.init = cfg.init;
        positions = nn::module_t<Pos, T, Device>(join_name(name, "pos"), cfg.d_model, rng, po);
      }
      tokens = nn::module_t<Tokens, T, Device>(join_name(name, "tokens"), cfg.d_model, rng, cfg.tokens);
      static_cast<Stack&>(*this) =
          Stack(name, cfg, pos::is_rotary_v<Pos>, rng, pol, mix_opts);  // after the embeddings: rng order
      final_norm = nn::module_t<typename Block::norm_policy, T, Device>(join_name(name, "final_norm"), cfg.d_model, rng,
                                                                        cfg.norm);
      if (!cfg.tie_embeddings)
        lm_head = Linear<T, Device>(join_name(name, "lm_head"), cfg.d_model, cfg.vocab, rng, cfg.init);
    }

    // ids [B, T] → final hidden states [B, T, d_model] (added tokens already discarded).
    Var<T, Device> hidden(Tape<T, Device>& tape, const Tensor<int32_t, Device>& ids,
                          ModelProbe<T, Device>* probe = nullptr, const Tensor<int64_t>* kv_lengths = nullptr) {
      SINKLAB_CHECK(ids.rank() == 2, "Transformer '", name, "': token ids must be [B, T], got ", ids.shape());
      using autodiff::profile::Label;
      std::optional<Label> section(std::in_place, "embed");
      Var<T, Device> h = embed(tape, ids);
      if (cfg.embed_scale > 0) h = h * tape.param(embed_scale);
      if constexpr (!pos::is_rotary_v<Pos>) h = positions(tape, h);
      h = stream_point(tape, tokens.insert(tape, h), embeddings_point);
      section.reset();
      h = Stack::forward(tape, h, probe, kv_lengths);
      section.emplace("head");
      h = final_norm(tape, tokens.discard(tape, h));
      if (probe) probe->final_hidden = h.value();
      return h;
    }

    // ids [B, T] → logits [B, T, vocab]
    Var<T, Device> logits(Tape<T, Device>& tape, const Tensor<int32_t, Device>& ids,
                          ModelProbe<T, Device>* probe = nullptr) {
      Var<T, Device> h = hidden(tape, ids, probe);
      const autodiff::profile::Label section("head");
      if (cfg.tie_embeddings) return project(tape, h, embed.weight, true);
      return lm_head(tape, h);
    }

    // Mean cross-entropy against targets [B, T] (ignore_index left out), plus the z-loss.
    Var<T, Device> loss(Tape<T, Device>& tape, const Tensor<int32_t, Device>& ids,
                        const Tensor<int32_t, Device>& targets, ModelProbe<T, Device>* probe = nullptr,
                        int32_t ignore_index = -100) {
      Var<T, Device> lg = logits(tape, ids, probe);
      const autodiff::profile::Label section("loss");
      Var<T, Device> ce = cross_entropy(lg, targets, ignore_index);
      if (cfg.z_loss <= 0) return ce;
      Var<T, Device> m = max(lg, -1, true);
      Var<T, Device> lse = sum(log(sum(exp(lg - m), -1, true)) + m, -1);  // [B, T], over every position
      return ce + mean(square(lse)) * cfg.z_loss;
    }

    // The policies and settings that fix what the weights compute (nn/architecture.hpp).
    Architecture architecture() const {
      using detail::arch_text;
      Architecture a;
      a["model"] = causal ? "decoder" : "encoder";
      a["vocab"] = arch_text(cfg.vocab);
      a["d_model"] = arch_text(cfg.d_model);
      a["layers"] = arch_text(cfg.layers);
      a["rope_theta"] = arch_text(cfg.rope_theta);
      a["tie_embeddings"] = arch_text(cfg.tie_embeddings);
      a["z_loss"] = arch_text(cfg.z_loss);
      a["residual_clip"] = arch_text(cfg.residual_clip);
      a["embed_scale"] = arch_text(cfg.embed_scale > 0);
      a["pos"] = Pos::name;
      if constexpr (!pos::is_rotary_v<Pos>) a["max_len"] = arch_text(cfg.max_len);
      a["tokens"] = Tokens::name;
      a["tokens.count"] = arch_text(tokens.extra());
      a["tokens.offset"] = arch_text(tokens.offset());
      describe_blocks<Block, Attn, FFN, Mix>(a, this->layers.front());
      return a;
    }

    template <class V>
    void parameters(V&& visit) {
      embed.parameters(visit);
      if (cfg.embed_scale > 0) visit(embed_scale);
      positions.parameters(visit);
      tokens.parameters(visit);
      Stack::parameters(visit);
      final_norm.parameters(visit);
      if (!cfg.tie_embeddings) lm_head.parameters(visit);
    }
  };
};

}  // namespace sinklab::nn
