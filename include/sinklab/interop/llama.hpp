// Llama-family checkpoints in the Hugging Face layout (config.json plus model.safetensors, or
// shards listed by model.safetensors.index.json) loaded into nn::Transformer, so pretrained
// models can be probed:
//
//   const nn::ModelConfig cfg = interop::llama_config(dir);
//   Rng rng(0);
//   interop::Llama::Module<float> model("", cfg, rng);
//   interop::load_llama(model, dir);               // every tensor converted and checked first
//
// What the conversion does: Hugging Face's nn.Linear weights are [out, in] and sinklab's are
// [in, out], so every projection is transposed; q_proj, k_proj and v_proj become the fused qkv
// (columns q, then k, then v), gate_proj and up_proj the fused gate_up (gate columns first);
// grouped-query attention keeps its num_key_value_heads; RoPE is rotate-half in both, with
// config.json's rope_theta; rms_norm_eps goes to the norms. BF16 and F16 files are converted
// on load. Each shard is read whole into memory.
//
// Refused with the reason: another model_type or activation, biases on the projections, RoPE
// scaling (Llama 3.1's "llama3" or YaRN), a sliding window, and any tensor the mapping does not
// use (except the rotary inv_freq buffers older exports carry).
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sinklab/io/safetensors.hpp"
#include "sinklab/nn/transformer.hpp"

namespace sinklab::interop {

// The Llama architecture as sinklab policies: pre-norm RMS, softmax attention with RoPE, SwiGLU.
using Llama = nn::Transformer<nn::PreNorm<norm::RMS>, attn::Attention<>, ffn::SwiGLU, pos::RoPE>;

namespace detail {

inline nlohmann::json read_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config.json";
  std::ifstream in(file);
  SINKLAB_CHECK(in.good(), "interop::llama: cannot open '", file.string(), "' (a Hugging Face model folder holds ",
                "config.json next to its safetensors)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    sinklab::detail::fail("interop::llama: '", file.string(), "' is not valid JSON (", e.what(), ")");
  }
}

template <class V>
V field(const nlohmann::json& j, const char* key, const std::filesystem::path& dir) {
  SINKLAB_CHECK(j.contains(key) && !j[key].is_null(), "interop::llama: '", (dir / "config.json").string(),
                "' has no '", key, "'");
  try {
    return j[key].get<V>();
  } catch (const nlohmann::json::exception&) {
    sinklab::detail::fail("interop::llama: '", (dir / "config.json").string(), "': '", key, "' is ", j[key].dump(),
                          ", not the expected type");
  }
}

// Which file holds each tensor: the index's weight_map, or every tensor of model.safetensors.
inline std::map<std::string, std::filesystem::path> weight_files(const std::filesystem::path& dir) {
  std::map<std::string, std::filesystem::path> where;
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      sinklab::detail::fail("interop::llama: '", index.string(), "' is not valid JSON (", e.what(), ")");
    }
    SINKLAB_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), "interop::llama: '", index.string(),
                  "' has no weight_map object");
    for (const auto& [name, file] : j["weight_map"].items()) where[name] = dir / file.get<std::string>();
    return where;
  }
  const std::filesystem::path single = dir / "model.safetensors";
  SINKLAB_CHECK(std::filesystem::exists(single), "interop::llama: '", dir.string(),
                "' holds neither model.safetensors nor model.safetensors.index.json");
  const io::SafetensorsFile file = io::SafetensorsFile::read(single);
  for (const io::TensorEntry& e : file.entries()) where[e.name] = single;
  return where;
}

}  // namespace detail

// The nn::ModelConfig of a Hugging Face Llama (or Mistral without sliding window) config.json.
inline nn::ModelConfig llama_config(const std::filesystem::path& dir) {
  using detail::field;
  const nlohmann::json j = detail::read_config(dir);
  const std::string file = (dir / "config.json").string();
  const std::string type = j.value("model_type", std::string("<absent>"));
  SINKLAB_CHECK(type == "llama" || type == "mistral", "interop::llama: '", file, "' has model_type '", type,
                "'; this importer reads llama and mistral");
  const std::string act = j.value("hidden_act", std::string("silu"));
  SINKLAB_CHECK(act == "silu", "interop::llama: '", file, "' has hidden_act '", act, "'; Llama's SwiGLU needs silu");
  for (const char* key : {"attention_bias", "mlp_bias"})
    SINKLAB_CHECK(!j.value(key, false), "interop::llama: '", file, "' sets ", key,
                  "; biases on the projections are not part of nn::Transformer's Llama");
  SINKLAB_CHECK(!j.contains("rope_scaling") || j["rope_scaling"].is_null(), "interop::llama: '", file,
                "' sets rope_scaling ", j.contains("rope_scaling") ? j["rope_scaling"].dump() : "",
                "; only plain RoPE (rope_theta) is supported");
  SINKLAB_CHECK(!j.contains("sliding_window") || j["sliding_window"].is_null(), "interop::llama: '", file,
                "' sets sliding_window ", j.contains("sliding_window") ? j["sliding_window"].dump() : "",
                "; sinklab's causal mask has no window");
  nn::ModelConfig c;
  c.vocab = field<int64_t>(j, "vocab_size", dir);
  c.d_model = field<int64_t>(j, "hidden_size", dir);
  c.layers = field<int64_t>(j, "num_hidden_layers", dir);
  c.heads = field<int64_t>(j, "num_attention_heads", dir);
  c.kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                   ? field<int64_t>(j, "num_key_value_heads", dir)
                   : c.heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) c.head_dim = field<int64_t>(j, "head_dim", dir);
  c.ffn_hidden = field<int64_t>(j, "intermediate_size", dir);
  c.rope_theta = j.contains("rope_theta") ? field<double>(j, "rope_theta", dir) : 10000.0;
  c.norm.eps = j.contains("rms_norm_eps") ? field<double>(j, "rms_norm_eps", dir) : 1e-6;
  c.tie_embeddings = j.value("tie_word_embeddings", false);
  c.max_len = j.value("max_position_embeddings", int64_t{4096});
  return c;
}

// Fills `model` from the checkpoint in `dir`. Every tensor is read, converted and checked
// against the model before any parameter changes; a problem names the Hugging Face tensor, its
// file and both shapes.
template <class T>
void load_llama(typename Llama::template Module<T>& model, const std::filesystem::path& dir) {
  const std::map<std::string, std::filesystem::path> where = detail::weight_files(dir);
  std::map<std::filesystem::path, io::SafetensorsFile> files;
  std::set<std::string> used;
  auto read = [&](const std::string& name, const Shape& want) -> Tensor<T> {
    const auto it = where.find(name);
    SINKLAB_CHECK(it != where.end(), "interop::load_llama: '", dir.string(), "' has no tensor '", name,
                  "' (expected shape ", want, ")");
    if (!files.count(it->second)) files.emplace(it->second, io::SafetensorsFile::read(it->second));
    Tensor<T> t = files.at(it->second).template get<T>(name);
    SINKLAB_CHECK(t.shape() == want, "interop::load_llama: tensor '", name, "' in '", it->second.string(),
                  "' has shape ", t.shape(), ", expected ", want, " for the model built from config.json");
    used.insert(name);
    return t;
  };
  auto transposed = [](const Tensor<T>& t) { return t.transpose(0, 1).contiguous(); };
  // [out_a, in], [out_b, in], ... → [in, out_a + out_b + ...]
  auto fused = [&](const std::vector<Tensor<T>>& parts) {
    int64_t cols = 0;
    for (const auto& p : parts) cols += p.shape()[0];
    Tensor<T> out = Tensor<T>::empty({parts[0].shape()[1], cols});
    int64_t c0 = 0;
    for (const auto& p : parts) {
      out.slice(1, c0, c0 + p.shape()[0]).copy_from(p.transpose(0, 1));
      c0 += p.shape()[0];
    }
    return out;
  };

  const nn::ModelConfig& cfg = model.cfg;
  const nn::ModelConfig want = llama_config(dir);
  const double eps = model.final_norm.eps;
  SINKLAB_CHECK(cfg.rope_theta == want.rope_theta && eps == want.norm.eps && cfg.tie_embeddings == want.tie_embeddings,
                "interop::load_llama: the model was not built from '", (dir / "config.json").string(),
                "': rope_theta ", cfg.rope_theta, " vs ", want.rope_theta, ", rms_norm_eps ", eps, " vs ",
                *want.norm.eps, ", tied embeddings ", cfg.tie_embeddings, " vs ", want.tie_embeddings,
                " (build it with interop::llama_config)");
  const int64_t D = cfg.d_model;
  std::vector<std::pair<autodiff::Parameter<T>*, Tensor<T>>> staged;
  staged.emplace_back(&model.embed.weight, read("model.embed_tokens.weight", {cfg.vocab, D}));
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    auto& layer = model.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int64_t H = layer.attn.H, Hkv = layer.attn.Hkv, dh = layer.attn.dh, hidden = layer.ffn.hidden;
    staged.emplace_back(&layer.attn_norm.weight, read(p + "input_layernorm.weight", {D}));
    staged.emplace_back(&layer.ffn_norm.weight, read(p + "post_attention_layernorm.weight", {D}));
    staged.emplace_back(&layer.attn.w_qkv, fused({read(p + "self_attn.q_proj.weight", {H * dh, D}),
                                                  read(p + "self_attn.k_proj.weight", {Hkv * dh, D}),
                                                  read(p + "self_attn.v_proj.weight", {Hkv * dh, D})}));
    staged.emplace_back(&layer.attn.w_o, transposed(read(p + "self_attn.o_proj.weight", {D, H * dh})));
    staged.emplace_back(&layer.ffn.gate_up.weight, fused({read(p + "mlp.gate_proj.weight", {hidden, D}),
                                                          read(p + "mlp.up_proj.weight", {hidden, D})}));
    staged.emplace_back(&layer.ffn.down.weight, transposed(read(p + "mlp.down_proj.weight", {D, hidden})));
  }
  staged.emplace_back(&model.final_norm.weight, read("model.norm.weight", {D}));
  if (!cfg.tie_embeddings) staged.emplace_back(&model.lm_head.weight, transposed(read("lm_head.weight", {cfg.vocab, D})));

  std::string extra;
  for (const auto& [name, file] : where)
    if (!used.count(name) && name.find("rotary_emb.inv_freq") == std::string::npos &&
        !(cfg.tie_embeddings && name == "lm_head.weight"))
      extra += (extra.empty() ? "'" : ", '") + name + "'";
  SINKLAB_CHECK(extra.empty(), "interop::load_llama: '", dir.string(), "' holds tensors the Llama mapping does not use: ",
                extra, " (another architecture?)");
  for (auto& [param, value] : staged) param->value.copy_from(value);
}

}  // namespace sinklab::interop
