// A small vision transformer from the same policies as nn::Transformer:
//
//   using Enc = attn::Attention<score::Softmax, gate::None, value::Identity, mask::Bidirectional>;
//   using ViT = nn::ViT<nn::PreNorm<norm::LayerNorm>, Enc, ffn::GeluMLP, tokens::Registers>;
//   ViT::Module<float> vit("", nn::VitConfig{.image_h = 28, .image_w = 28, .patch = 7}, rng);
//   auto loss = vit.loss(tape, images, labels);   // images [B, H, W] or [B, C, H, W]
//
// images → non-overlapping P×P patches [B, N, C·P·P] (a copy; pixels need no gradient) →
// patch embedding (Linear with bias) → [CLS; patches] + learned positions → optional register
// tokens (no positions, discarded at the output) → nn::LayerStack → final norm → linear head
// on CLS. A ModelProbe sees every layer exactly as in nn::Transformer (CLS first, then patches,
// registers where Options::placement puts them).
#pragma once
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "sinklab/nn/architecture.hpp"
#include "sinklab/nn/layers.hpp"
#include "sinklab/nn/linear.hpp"
#include "sinklab/nn/tokens.hpp"

namespace sinklab::nn {

struct VitConfig {
  int64_t image_h = 28, image_w = 28, channels = 1;
  int64_t patch = 7;  // P: patches are P×P, image sides must be multiples of P
  int64_t classes = 10;
  int64_t d_model = 64;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 0;    // 0: heads
  int64_t head_dim = 0;    // 0: d_model / heads
  int64_t ffn_hidden = 0;  // 0: the FFN policy's default
  bool qk_norm = false;
  double residual_clip = 0.0;
  bool zero_init_output = false;
  nn::Init init = nn::Init::normal(0.02);  // pytorch(): Linear U(±1/√fan_in), cls/positions N(0, 1)
  norm::Options norm{};
  tokens::Options tokens{};  // registers (tokens::Registers): count and placement

  // The layer stack's settings (the one place this config's fields become a ModelConfig's).
  ModelConfig stack() const {
    return {.d_model = d_model,
            .layers = layers,
            .heads = heads,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .ffn_hidden = ffn_hidden,
            .qk_norm = qk_norm,
            .residual_clip = residual_clip,
            .zero_init_output = zero_init_output,
            .init = init,
            .norm = norm,
            .tokens = tokens};
  }
};

// images [B, H, W] (one channel) or [B, C, H, W] → [B, (H/P)·(W/P), C·P·P]; patches in raster
// order, each patch's features ordered (channel, row, column) like a stride-P convolution. On the
// host (a model on another device patchifies a host copy of its images).
template <class T>
Tensor<T> patchify(const Tensor<T>& images, int64_t P) {
  SINKLAB_CHECK(images.defined() && (images.rank() == 3 || images.rank() == 4) && P > 0,
                "nn::patchify: images must be [B, H, W] or [B, C, H, W] and the patch size positive, got ",
                images.defined() ? images.shape() : Shape{}, " and patch ", P);
  const Tensor<T> x = images.contiguous();
  const bool chw = x.rank() == 4;
  const int64_t B = x.size(0), C = chw ? x.size(1) : 1, H = x.size(chw ? 2 : 1), W = x.size(chw ? 3 : 2);
  SINKLAB_CHECK(H % P == 0 && W % P == 0, "nn::patchify: image of ", H, "×", W, " is not a whole number of ", P, "×", P,
                " patches");
  const int64_t ny = H / P, nx = W / P, F = C * P * P;
  Tensor<T> out = Tensor<T>::empty({B, ny * nx, F});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t py = 0; py < ny; ++py)
      for (int64_t px = 0; px < nx; ++px) {
        T* dst = out.data() + (b * ny * nx + py * nx + px) * F;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t y = 0; y < P; ++y)
            std::memcpy(dst + (c * P + y) * P, x.data() + ((b * C + c) * H + py * P + y) * W + px * P, sizeof(T) * P);
      }
  return out;
}

template <class Block, class Attn, class FFN, class Tokens = tokens::None, class Mix = mix::None>
struct ViT {
  static_assert(std::is_same_v<typename Attn::mask_type, mask::Bidirectional>,
                "nn::ViT: every patch attends to every other; the attention's Mask must be mask::Bidirectional");
  static_assert(std::is_same_v<Tokens, tokens::None> || std::is_same_v<Tokens, tokens::Registers>,
                "nn::ViT: Tokens must be tokens::None or tokens::Registers (the CLS token is built in)");
  using layer_type = Layer<Block, Attn, FFN>;
  using stack_type = LayerStack<Block, Attn, FFN, Mix>;

  // The stack is the base: vit.layers[i] and vit.mixer are the stack's.
  template <class T, class Device = cpu>
  struct Module : stack_type::template Module<T, Device> {
    using Stack = nn::module_t<stack_type, T, Device>;
    VitConfig cfg;
    std::string name;
    int64_t patches = 0;     // N
    Linear<T, Device> patch_embed;   // [C·P·P, d_model] with bias
    Parameter<T, Device> cls;        // [1, d_model]
    Parameter<T, Device> positions;  // [1 + N, d_model]
    nn::module_t<Tokens, T, Device> registers;
    nn::module_t<typename Block::norm_policy, T, Device> final_norm;
    Linear<T, Device> head;  // [d_model, classes] with bias

    Module() = default;
    Module(std::string prefix, const VitConfig& c, Rng& rng, const typename Attn::Policies& pol = {},
           const typename Mix::Options& mix_opts = {})
        : cfg(c), name(std::move(prefix)) {
      SINKLAB_CHECK(cfg.image_h > 0 && cfg.image_w > 0 && cfg.channels > 0 && cfg.patch > 0 &&
                        cfg.image_h % cfg.patch == 0 && cfg.image_w % cfg.patch == 0,
                    "ViT '", name, "': image ", cfg.image_h, "×", cfg.image_w, "×", cfg.channels,
                    " must be positive and a whole number of ", cfg.patch, "×", cfg.patch, " patches");
      SINKLAB_CHECK(cfg.classes > 0 && cfg.d_model > 0 && cfg.layers > 0, "ViT '", name,
                    "': classes, d_model and layers must be positive, got ", cfg.classes, ", ", cfg.d_model, ", ",
                    cfg.layers);
      patches = (cfg.image_h / cfg.patch) * (cfg.image_w / cfg.patch);
      const int64_t D = cfg.d_model;
      patch_embed = Linear<T, Device>(join_name(name, "patch_embed"), cfg.channels * cfg.patch * cfg.patch, D, rng,
                                      cfg.init, true);
      cls = Parameter<T, Device>(join_name(name, "cls"), make_tensor<T, Device>({1, D}, cfg.init.for_embedding(), rng));
      positions = Parameter<T, Device>(join_name(name, "pos"),
                                       make_tensor<T, Device>({1 + patches, D}, cfg.init.for_embedding(), rng));
      registers = nn::module_t<Tokens, T, Device>(join_name(name, "registers"), D, rng, cfg.tokens);
      static_cast<Stack&>(*this) = Stack(name, cfg.stack(), false, rng, pol, mix_opts);
      final_norm =
          nn::module_t<typename Block::norm_policy, T, Device>(join_name(name, "final_norm"), D, rng, cfg.norm);
      head = Linear<T, Device>(join_name(name, "head"), D, cfg.classes, rng, cfg.init, true);
    }

    // images → the CLS token's final hidden state [B, d_model].
    Var<T, Device> features(Tape<T, Device>& tape, const Tensor<T, Device>& images,
                            ModelProbe<T, Device>* probe = nullptr) {
      const bool chw = images.defined() && images.rank() == 4;
      const bool ok = images.defined() && (images.rank() == 3 || chw) && images.size(chw ? 2 : 1) == cfg.image_h &&
                      images.size(chw ? 3 : 2) == cfg.image_w && (chw ? images.size(1) : 1) == cfg.channels;
      SINKLAB_CHECK(ok, "ViT '", name, "': images of shape ", images.defined() ? images.shape() : Shape{},
                    ", expected [B, ", cfg.image_h, ", ", cfg.image_w, "] (one channel) or [B, ", cfg.channels, ", ",
                    cfg.image_h, ", ", cfg.image_w, "]");
      const int64_t B = images.size(0), D = cfg.d_model;
      const Tensor<T, Device> patches =
          patchify(images.template to_device<cpu>(), cfg.patch).template to_device<Device>();
      Var<T, Device> x = patch_embed(tape, tape.constant(patches));
      Var<T, Device> h =
          autodiff::concat<T, Device>({autodiff::repeat_batch(tape.param(cls), B), x}, 1) + tape.param(positions);
      h = Stack::forward(tape, registers.insert(tape, h), probe);
      h = final_norm(tape, registers.discard(tape, h));
      if (probe) probe->final_hidden = h.value();
      return reshape(slice(h, 1, 0, 1), {B, D});
    }

    // images → class logits [B, classes].
    Var<T, Device> logits(Tape<T, Device>& tape, const Tensor<T, Device>& images,
                          ModelProbe<T, Device>* probe = nullptr) {
      return head(tape, features(tape, images, probe));
    }

    // Mean cross-entropy against labels [B] in [0, classes).
    Var<T, Device> loss(Tape<T, Device>& tape, const Tensor<T, Device>& images, const Tensor<int32_t, Device>& labels,
                        ModelProbe<T, Device>* probe = nullptr) {
      SINKLAB_CHECK(labels.rank() == 1 && labels.size(0) == images.size(0), "ViT '", name, "': labels of shape ",
                    labels.shape(), ", expected [", images.size(0), "]");
      return cross_entropy(logits(tape, images, probe), labels);
    }

    // The policies and settings that fix what the weights compute (nn/architecture.hpp).
    Architecture architecture() const {
      using detail::arch_text;
      Architecture a;
      a["model"] = "vit";
      a["image"] = arch_text(cfg.image_h) + "x" + arch_text(cfg.image_w) + "x" + arch_text(cfg.channels);
      a["patch"] = arch_text(cfg.patch);
      a["classes"] = arch_text(cfg.classes);
      a["d_model"] = arch_text(cfg.d_model);
      a["layers"] = arch_text(cfg.layers);
      a["residual_clip"] = arch_text(cfg.residual_clip);
      a["tokens"] = Tokens::name;
      a["tokens.count"] = arch_text(registers.extra());
      a["tokens.offset"] = arch_text(registers.offset());
      describe_blocks<Block, Attn, FFN, Mix>(a, this->layers.front());
      return a;
    }

    template <class V>
    void parameters(V&& visit) {
      patch_embed.parameters(visit);
      visit(cls);
      visit(positions);
      registers.parameters(visit);
      Stack::parameters(visit);
      final_norm.parameters(visit);
      head.parameters(visit);
    }
  };
};

}  // namespace sinklab::nn
