// Whole models from policies:
//
//   using VGA   = attn::Attention<score::Softmax, gate::FromValue<gate::per_head, gate::on_values>>;
//   using Model = nn::Transformer<nn::PreNorm<norm::RMS>, VGA, ffn::SwiGLU>;   // RoPE by default
//   Model::Module<float> model("", cfg, rng);
//   auto loss = model.loss(tape, ids, targets);
//
// nn::Layer is one pre-norm block, h ← h + attn(norm(h)); h ← h + ffn(norm(h)); nn::Transformer
// is embeddings → (positions) → (sink/register tokens) → layers → final norm → LM head. The
// attention's mask decides decoder or encoder. A ModelProbe records every layer's attention,
// residual stream and branch outputs, and, on request, their gradients.
#pragma once
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/nn/attention.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/ffn.hpp"
#include "sinklab/nn/mix.hpp"
#include "sinklab/nn/norm.hpp"
#include "sinklab/nn/pos.hpp"
#include "sinklab/autodiff/ops/clip.hpp"
#include "sinklab/nn/tokens.hpp"

namespace sinklab::nn {

using autodiff::Tape;
using autodiff::Var;

// The block layout policy: normalise each branch's input (pre-norm), with this norm.
template <class Norm>
struct PreNorm {
  static_assert(norm::is_policy_v<Norm>, "nn::PreNorm<Norm>: Norm must be a sinklab::norm policy");
  using norm_policy = Norm;
};

struct ModelConfig {
  int64_t vocab = 256;
  int64_t d_model = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 0;    // 0: heads
  int64_t head_dim = 0;    // 0: d_model / heads
  int64_t ffn_hidden = 0;  // 0: the FFN policy's default
  int64_t max_len = 1024;  // pos::Learned table size
  bool qk_norm = false;
  double rope_theta = 10000.0;
  bool tie_embeddings = false;
  double z_loss = 0.0;         // adds z_loss · mean(logsumexp²) to the loss (PaLM)
  double residual_clip = 0.0;  // > 0: clip the residual stream at ±residual_clip after each branch
  bool zero_init_output = false;  // W_O and the FFN output projections start at 0
  nn::Init init = nn::Init::normal(0.02);  // nn::Init::pytorch(): PyTorch's module defaults (nn/init.hpp)
  norm::Options norm{};
  tokens::Options tokens{};
};

// What a probe saw in one layer. Activations are [B, T, D] (tokens included); gradients are
// filled after backward() when ModelProbe::gradients is set.
template <class T>
struct LayerRecord {
  autodiff::AttentionRecorder<T> attn;
  Tensor<T> input;       // h, the residual stream entering the layer
  Tensor<T> attn_in;     // h̃ = norm(h), the attention's input
  Tensor<T> attn_out;    // the attention branch's output (its update to the stream)
  Tensor<T> mid;         // h + attn_out (after clipping, if any)
  Tensor<T> ffn_in;      // norm(mid)
  Tensor<T> ffn_out;     // the FFN branch's output
  Tensor<T> output;      // the residual stream leaving the layer
  Tensor<T> grad_input, grad_attn_in, grad_attn_out, grad_mid, grad_ffn_in, grad_ffn_out, grad_output;
};

template <class T>
struct ModelProbe {
  bool attention = true;   // record attention maps (takes the materialised T×T path)
  bool gradients = false;  // record gradients of the residual stream and branches
  Tensor<T> embeddings;    // [B, T, D] input of the first layer (after positions and tokens)
  Tensor<T> final_hidden;  // [B, T, D] after the final norm
  std::vector<LayerRecord<T>> layers;
};

template <class Block, class Attn, class FFN>
struct Layer {
  using norm_policy = typename Block::norm_policy;
  template <class T>
  struct Module {
    typename norm_policy::template Module<T> attn_norm, ffn_norm;
    typename Attn::template Module<T> attn;
    typename FFN::template Module<T> ffn;
    double residual_clip = 0.0;
    std::string after_attn, after_ffn;  // names of the residual-stream points (nn::stream_point)

    Module() = default;
    Module(const std::string& prefix, const ::sinklab::attn::Config& acfg, const ModelConfig& cfg, Rng& rng,
           const typename Attn::Policies& pol)
        : attn_norm(join_name(prefix, "attn_norm"), cfg.d_model, rng, cfg.norm),
          ffn_norm(join_name(prefix, "ffn_norm"), cfg.d_model, rng, cfg.norm),
          attn(join_name(prefix, "attn"), acfg, rng, pol),
          ffn(join_name(prefix, "ffn"), cfg.d_model, rng,
              ffn::Options{.hidden = cfg.ffn_hidden, .zero_init_output = cfg.zero_init_output, .init = cfg.init}),
          residual_clip(cfg.residual_clip),
          after_attn(join_name(prefix, "residual.attn")),
          after_ffn(join_name(prefix, "residual.ffn")) {}

    Var<T> forward(Tape<T>& tape, Var<T> h, const ::sinklab::attn::Extras<T>& extras, LayerRecord<T>* rec, bool grads) {
      auto watch = [&](Var<T> v, Tensor<T> LayerRecord<T>::*value, Tensor<T> LayerRecord<T>::*grad) {
        if (!rec) return;
        (*rec).*value = v.value();
        if (grads && v.requires_grad()) v.register_hook([rec, grad](Tensor<T>& g) { (*rec).*grad = g.clone(); });
      };
      using autodiff::profile::Label;
      watch(h, &LayerRecord<T>::input, &LayerRecord<T>::grad_input);
      Var<T> a_in = (Label("attn_norm"), attn_norm(tape, h));
      watch(a_in, &LayerRecord<T>::attn_in, &LayerRecord<T>::grad_attn_in);
      Var<T> a = (Label("attn"), attn.forward(tape, a_in, extras));
      watch(a, &LayerRecord<T>::attn_out, &LayerRecord<T>::grad_attn_out);
      Var<T> mid = stream_point(tape, (Label("residual"), clip(h + a)), after_attn);
      watch(mid, &LayerRecord<T>::mid, &LayerRecord<T>::grad_mid);
      Var<T> f_in = (Label("ffn_norm"), ffn_norm(tape, mid));
      watch(f_in, &LayerRecord<T>::ffn_in, &LayerRecord<T>::grad_ffn_in);
      Var<T> f = (Label("ffn"), ffn(tape, f_in));
      watch(f, &LayerRecord<T>::ffn_out, &LayerRecord<T>::grad_ffn_out);
      Var<T> out = stream_point(tape, (Label("residual"), clip(mid + f)), after_ffn);
      watch(out, &LayerRecord<T>::output, &LayerRecord<T>::grad_output);
      return out;
    }

    template <class V>
    void parameters(V&& visit) {
      attn_norm.parameters(visit);
      attn.parameters(visit);
      ffn_norm.parameters(visit);
      ffn.parameters(visit);
    }

   private:
    Var<T> clip(Var<T> x) const { return residual_clip > 0 ? autodiff::clip(x, residual_clip) : x; }
  };
};

// A decoder (causal mask) or encoder (bidirectional) language model over token ids.
template <class Block, class Attn, class FFN, class Pos = pos::RoPE, class Tokens = tokens::None,
          class Mix = mix::None>
struct Transformer {
  static_assert(pos::is_policy_v<Pos>, "nn::Transformer: Pos must be pos::RoPE, pos::Learned or pos::None");
  static_assert(tokens::is_policy_v<Tokens>, "nn::Transformer: Tokens must be tokens::None, tokens::Sink or tokens::Registers");
  using layer_type = Layer<Block, Attn, FFN>;
  static constexpr bool causal = std::is_same_v<typename Attn::mask_type, mask::Causal>;

  template <class T>
  struct Module {
    ModelConfig cfg;
    std::string name;
    Embedding<T> embed;
    typename Pos::template Module<T> positions;  // pos::Learned adds a table; RoPE lives in attention
    typename Tokens::template Module<T> tokens;
    typename Mix::template Module<T> mixer;
    std::vector<typename layer_type::template Module<T>> layers;
    typename Block::norm_policy::template Module<T> final_norm;
    Linear<T> lm_head;  // [d_model, vocab]; unused when embeddings are tied
    std::string embeddings_point;  // the residual-stream point entering layer 0 (nn::stream_point)

    Module() = default;
    Module(std::string prefix, const ModelConfig& c, Rng& rng, const typename Attn::Policies& pol = {},
           const typename Mix::Options& mix_opts = {})
        : cfg(c), name(std::move(prefix)), embeddings_point(join_name(name, "embeddings")) {
      SINKLAB_CHECK(cfg.vocab > 0 && cfg.d_model > 0 && cfg.layers > 0, "Transformer '", name,
                    "': vocab, d_model and layers must be positive, got ", cfg.vocab, ", ", cfg.d_model, ", ",
                    cfg.layers);
      embed = Embedding<T>(join_name(name, "embed"), cfg.vocab, cfg.d_model, rng, cfg.init);
      if constexpr (std::is_same_v<Pos, pos::Learned>)
        positions = typename Pos::template Module<T>(join_name(name, "pos"), cfg.d_model, rng,
                                                     pos::LearnedOptions{.max_len = cfg.max_len, .init = cfg.init});
      tokens = typename Tokens::template Module<T>(join_name(name, "tokens"), cfg.d_model, rng, cfg.tokens);
      const attn::Config acfg{.d_model = cfg.d_model,
                              .heads = cfg.heads,
                              .kv_heads = cfg.kv_heads,
                              .head_dim = cfg.head_dim,
                              .qk_norm = cfg.qk_norm,
                              .rope = std::is_same_v<Pos, pos::RoPE>,
                              .rope_theta = cfg.rope_theta,
                              .init = cfg.init,
                              .zero_init_output = cfg.zero_init_output};
      layers.reserve(static_cast<std::size_t>(cfg.layers));  // parameters must not move after construction
      for (int64_t i = 0; i < cfg.layers; ++i)
        layers.emplace_back(join_name(name, "layers." + std::to_string(i)), acfg, cfg, rng, pol);
      const auto& a0 = layers[0].attn;
      mixer = typename Mix::template Module<T>(
          join_name(name, "mix"),
          mix::Dims{cfg.d_model, cfg.layers, a0.H, a0.Hkv, a0.dh, a0.gate_heads, a0.gate_channels}, rng, mix_opts);
      final_norm = typename Block::norm_policy::template Module<T>(join_name(name, "final_norm"), cfg.d_model, rng, cfg.norm);
      if (!cfg.tie_embeddings) lm_head = Linear<T>(join_name(name, "lm_head"), cfg.d_model, cfg.vocab, rng, cfg.init);
    }

    // ids [B, T] → final hidden states [B, T, d_model] (added tokens already discarded).
    Var<T> hidden(Tape<T>& tape, const Tensor<int32_t>& ids, ModelProbe<T>* probe = nullptr,
                  const Tensor<int64_t>* kv_lengths = nullptr) {
      SINKLAB_CHECK(ids.rank() == 2, "Transformer '", name, "': token ids must be [B, T], got ", ids.shape());
      using autodiff::profile::Label;
      std::optional<Label> section(std::in_place, "embed");
      Var<T> h = embed(tape, ids);
      if constexpr (!std::is_same_v<Pos, pos::RoPE>) h = positions(tape, h);
      h = stream_point(tape, tokens.insert(tape, h), embeddings_point);
      mixer.begin(tape, h);
      if (probe) {
        probe->layers.resize(layers.size());
        probe->embeddings = h.value();
      }
      for (std::size_t i = 0; i < layers.size(); ++i) {
        attn::Extras<T> ex;
        ex.kv_lengths = kv_lengths;
        ex.mix = mixer.hook(static_cast<int64_t>(i));
        LayerRecord<T>* rec = probe ? &probe->layers[i] : nullptr;
        if (rec && probe->attention) ex.probe = &rec->attn;
        section.reset();
        section.emplace("layers", static_cast<int64_t>(i));
        h = layers[i].forward(tape, h, ex, rec, probe && probe->gradients);
      }
      section.reset();
      section.emplace("head");
      h = final_norm(tape, tokens.discard(tape, h));
      if (probe) probe->final_hidden = h.value();
      return h;
    }

    // ids [B, T] → logits [B, T, vocab]
    Var<T> logits(Tape<T>& tape, const Tensor<int32_t>& ids, ModelProbe<T>* probe = nullptr) {
      Var<T> h = hidden(tape, ids, probe);
      const autodiff::profile::Label section("head");
      if (cfg.tie_embeddings)
        return matmul(projection_input(tape, h, embed.weight, true), transpose(tape.param(embed.weight), 0, 1));
      return lm_head(tape, h);
    }

    // Mean cross-entropy against targets [B, T] (ignore_index left out), plus the z-loss.
    Var<T> loss(Tape<T>& tape, const Tensor<int32_t>& ids, const Tensor<int32_t>& targets,
                ModelProbe<T>* probe = nullptr, int32_t ignore_index = -100) {
      Var<T> lg = logits(tape, ids, probe);
      const autodiff::profile::Label section("loss");
      Var<T> ce = cross_entropy(lg, targets, ignore_index);
      if (cfg.z_loss <= 0) return ce;
      Var<T> m = max(lg, -1, true);
      Var<T> lse = sum(log(sum(exp(lg - m), -1, true)) + m, -1);  // [B, T], over every position
      return ce + mean(square(lse)) * cfg.z_loss;
    }

    template <class V>
    void parameters(V&& visit) {
      embed.parameters(visit);
      positions.parameters(visit);
      tokens.parameters(visit);
      mixer.parameters(visit);
      for (auto& l : layers) l.parameters(visit);
      final_norm.parameters(visit);
      if (!cfg.tie_embeddings) lm_head.parameters(visit);
    }
  };
};

}  // namespace sinklab::nn
