// The pieces every model is built from: the block layout (nn::PreNorm, nn::PostNorm), one block
// (nn::Layer: pre-norm h ← h + attn(norm(h)); h ← h + ffn(norm(h)), or post-norm as the original
// Transformer and BERT, h ← norm(h + attn(h)); h ← norm(h + ffn(h))), the stack of blocks with the
// anchor mixing across them (nn::LayerStack), and what a ModelProbe records per layer.
// nn::Transformer and nn::ViT put embeddings before the stack and a head after it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sinklab/autodiff/autodiff.hpp"
#include "sinklab/autodiff/ops/clip.hpp"
#include "sinklab/autodiff/profile.hpp"
#include "sinklab/nn/attention.hpp"
#include "sinklab/nn/ffn.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/mix.hpp"
#include "sinklab/nn/norm.hpp"
#include "sinklab/nn/projection.hpp"
#include "sinklab/nn/tokens.hpp"

namespace sinklab::nn {

using autodiff::Tape;
using autodiff::Var;

// The block layout policies: normalise each branch's input (pre-norm, today's LLMs), or the
// residual sum after each branch (post-norm: Vaswani et al., BERT, the models of Bondarenko et
// al.'s outlier study). Every norm of a model is of the policy Norm; a post-norm model's stream
// is the norms' output, so its final norm (kept, as BERT's MLM head has one) sees normalised input.
template <class Norm, bool Post>
struct BlockLayout {
  static_assert(norm::is_policy_v<Norm>, "nn::PreNorm<Norm> / nn::PostNorm<Norm>: Norm must be a sinklab::norm policy");
  using norm_policy = Norm;
  static constexpr bool post_norm = Post;
  static constexpr const char* name = Post ? "post_norm" : "pre_norm";
};
template <class Norm>
using PreNorm = BlockLayout<Norm, false>;
template <class Norm>
using PostNorm = BlockLayout<Norm, true>;

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
  // > 0: the embeddings are multiplied by a learnable scalar that starts at this value (the DyT
  // authors' LLaMA recipe uses √d_model: with N(0, 0.02) embeddings and no normalisation, tanh
  // would otherwise see inputs too small to pass a signal).
  double embed_scale = 0.0;

  // Each layer's attention settings (rope: whether the model's positions are rotary); the one
  // place the model's fields become the attention's.
  ::sinklab::attn::Config attention(bool rope) const {
    return {.d_model = d_model,
            .heads = heads,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .qk_norm = qk_norm,
            .rope = rope,
            .rope_theta = rope_theta,
            .init = init,
            .zero_init_output = zero_init_output};
  }
};

// What a probe saw in one layer. Activations are [B, T, D] (tokens included); gradients are
// filled after backward() when ModelProbe::gradients is set.
template <class T, class Device = cpu>
struct LayerRecord {
  autodiff::AttentionRecorder<T, Device> attn;
  Tensor<T, Device> input;     // h, the residual stream entering the layer
  Tensor<T, Device> attn_in;   // h̃ = norm(h), the attention's input (post-norm: h)
  Tensor<T, Device> attn_out;  // the attention branch's output (its update to the stream)
  Tensor<T, Device> mid;       // h + attn_out (after clipping, if any; post-norm: norm of it)
  Tensor<T, Device> ffn_in;    // norm(mid) (post-norm: mid)
  Tensor<T, Device> ffn_out;   // the FFN branch's output
  Tensor<T, Device> output;    // the residual stream leaving the layer (post-norm: norm(mid + ffn_out))
  Tensor<T, Device> grad_input, grad_attn_in, grad_attn_out, grad_mid, grad_ffn_in, grad_ffn_out, grad_output;
};

template <class T, class Device = cpu>
struct ModelProbe {
  bool attention = true;   // record attention maps (takes the materialised T×T path)
  bool gradients = false;  // record gradients of the residual stream and branches
  std::vector<Intervention> interventions;  // edits applied during the probed pass (nn/intervention.hpp)
  Tensor<T, Device> embeddings;             // [B, T, D] input of the first layer (after positions and tokens)
  Tensor<T, Device> final_hidden;           // [B, T, D] after the final norm
  std::vector<LayerRecord<T, Device>> layers;
};

template <class Block, class Attn, class FFN>
struct Layer {
  using norm_policy = typename Block::norm_policy;
  template <class T, class Device = cpu>
  struct Module {
    nn::module_t<norm_policy, T, Device> attn_norm, ffn_norm;
    nn::module_t<Attn, T, Device> attn;
    nn::module_t<FFN, T, Device> ffn;
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

    // `mixing` runs between the attention's projection and its core (attn::Attention::forward).
    // The residual-stream points (after_attn, after_ffn) are the stream itself: the sums in a
    // pre-norm block, the norms' outputs in a post-norm one.
    template <class Mixing = ::sinklab::attn::NoMixing>
    Var<T, Device> forward(Tape<T, Device>& tape, Var<T, Device> h, const ::sinklab::attn::Extras<T, Device>& extras,
                           LayerRecord<T, Device>* rec, bool grads, Mixing&& mixing = {}) {
      auto watch = [&](Var<T, Device> v, Tensor<T, Device> LayerRecord<T, Device>::*value,
                       Tensor<T, Device> LayerRecord<T, Device>::*grad) {
        if (!rec) return;
        (*rec).*value = v.value();
        if (grads && v.requires_grad())
          v.register_hook([rec, grad](Tensor<T, Device>& g) { (*rec).*grad = g.clone(); });
      };
      using autodiff::profile::Label;
      // The layout: a branch's input (pre-norm: normalised), and the stream after its residual
      // sum (post-norm: normalised), which is the named stream point.
      auto norm_in = [&](auto& norm, Var<T, Device> x, const char* label) {
        if constexpr (Block::post_norm) return x;
        else return (Label(label), norm(tape, x));
      };
      auto residual = [&](auto& norm, Var<T, Device> x, Var<T, Device> branch, const char* label,
                          const std::string& point) {
        if constexpr (Block::post_norm) {
          Var<T, Device> sum = (Label("residual"), clip(x + branch));
          return stream_point(tape, (Label(label), norm(tape, sum)), point);
        } else {
          return stream_point(tape, (Label("residual"), clip(x + branch)), point);
        }
      };
      watch(h, &LayerRecord<T, Device>::input, &LayerRecord<T, Device>::grad_input);
      Var<T, Device> a_in = norm_in(attn_norm, h, "attn_norm");
      watch(a_in, &LayerRecord<T, Device>::attn_in, &LayerRecord<T, Device>::grad_attn_in);
      Var<T, Device> a = (Label("attn"), attn.forward(tape, a_in, extras, mixing));
      watch(a, &LayerRecord<T, Device>::attn_out, &LayerRecord<T, Device>::grad_attn_out);
      Var<T, Device> mid = residual(attn_norm, h, a, "attn_norm", after_attn);
      watch(mid, &LayerRecord<T, Device>::mid, &LayerRecord<T, Device>::grad_mid);
      Var<T, Device> f_in = norm_in(ffn_norm, mid, "ffn_norm");
      watch(f_in, &LayerRecord<T, Device>::ffn_in, &LayerRecord<T, Device>::grad_ffn_in);
      Var<T, Device> f = (Label("ffn"), ffn(tape, f_in));
      watch(f, &LayerRecord<T, Device>::ffn_out, &LayerRecord<T, Device>::grad_ffn_out);
      Var<T, Device> out = residual(ffn_norm, mid, f, "ffn_norm", after_ffn);
      watch(out, &LayerRecord<T, Device>::output, &LayerRecord<T, Device>::grad_output);
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
    Var<T, Device> clip(Var<T, Device> x) const { return residual_clip > 0 ? autodiff::clip(x, residual_clip) : x; }
  };
};

// The layer stack every model shares: a mixing module (mix::) and the layers, run over the
// residual stream h [B, T, D] (inserted tokens included), recording into a ModelProbe when given.
template <class Block, class Attn, class FFN, class Mix = mix::None>
struct LayerStack {
  static_assert(mix::is_policy_v<Mix>, "nn::LayerStack: Mix must be a sinklab::mix policy");
  using layer_type = Layer<Block, Attn, FFN>;

  template <class T, class Device = cpu>
  struct Module {
    nn::module_t<Mix, T, Device> mixer;
    std::vector<nn::module_t<layer_type, T, Device>> layers;

    Module() = default;
    // Layers "<model>.layers.<i>", then the mixer "<model>.mix" (it needs the layers' shapes).
    // rope: whether the model's positions are rotary (the attention applies them).
    Module(const std::string& model, const ModelConfig& cfg, bool rope, Rng& rng, const typename Attn::Policies& pol,
           const typename Mix::Options& mix_opts) {
      const ::sinklab::attn::Config acfg = cfg.attention(rope);
      layers.reserve(static_cast<std::size_t>(cfg.layers));  // parameters must not move after construction
      for (int64_t i = 0; i < cfg.layers; ++i)
        layers.emplace_back(join_name(model, "layers." + std::to_string(i)), acfg, cfg, rng, pol);
      const auto& a0 = layers[0].attn;
      mixer = nn::module_t<Mix, T, Device>(
          join_name(model, "mix"),
          mix::Dims{cfg.d_model, cfg.layers, a0.H, a0.Hkv, a0.dh, a0.gate_heads, a0.gate_channels}, rng, mix_opts);
    }

    // Layer i's anchor mixing, called by its attention between projection and core.
    struct LayerMixing {
      nn::module_t<Mix, T, Device>& mixer;
      int64_t layer;
      bool active() const { return mixer.mixes(layer); }
      void operator()(Tape<T, Device>& tape, Var<T, Device> x, ::sinklab::attn::Projections<T, Device>& p) const {
        mixer.mix(tape, layer, x, p);
      }
    };

    Var<T, Device> forward(Tape<T, Device>& tape, Var<T, Device> h, ModelProbe<T, Device>* probe = nullptr,
                           const Tensor<int64_t>* kv_lengths = nullptr) {
      using autodiff::profile::Label;
      {
        const Label section("mix");
        mixer.begin(tape, h);
      }
      if (probe) {
        probe->layers.resize(layers.size());
        probe->embeddings = h.value();
      }
      std::vector<std::vector<Intervention>> edits;  // the probe's, by layer (no allocation without any)
      if (probe && !probe->interventions.empty()) {
        edits.resize(layers.size());
        for (const Intervention& iv : probe->interventions) {
          SINKLAB_CHECK(iv.layer >= 0 && iv.layer < static_cast<int64_t>(layers.size()), "intervention ",
                        iv.describe(), ": the model has ", layers.size(), " layers");
          edits[static_cast<std::size_t>(iv.layer)].push_back(iv);
        }
      }
      for (std::size_t i = 0; i < layers.size(); ++i) {
        ::sinklab::attn::Extras<T, Device> ex;
        ex.kv_lengths = kv_lengths;
        if (!edits.empty()) ex.interventions = &edits[i];
        LayerRecord<T, Device>* rec = probe ? &probe->layers[i] : nullptr;
        if (rec && probe->attention) ex.probe = &rec->attn;
        const Label section("layers", static_cast<int64_t>(i));
        h = layers[i].forward(tape, h, ex, rec, probe && probe->gradients, LayerMixing{mixer, static_cast<int64_t>(i)});
      }
      return h;
    }

    template <class V>
    void parameters(V&& visit) {
      mixer.parameters(visit);
      for (auto& l : layers) l.parameters(visit);
    }
  };
};

}  // namespace sinklab::nn
