// Hugging Face Llama checkpoints into nn::Transformer (interop/llama.hpp), without PyTorch: a
// sinklab Llama is written out in the Hugging Face layout by hand (transposes and splits done
// here, independently of the importer), read back, and must give the same logits bit for bit;
// what the importer refuses is refused with the reason. The comparison with PyTorch on the same
// weights is tests/scripts/torch_parity.sh llama.
#include <doctest/doctest.h>

#include "temp_dir.hpp"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sinklab/interop/llama.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {

using sinklab_test::TempDir;

nlohmann::json config() {
  return {{"model_type", "llama"}, {"vocab_size", 19},      {"hidden_size", 24},       {"intermediate_size", 40},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-5},   {"rope_theta", 250000.0}, {"tie_word_embeddings", false}};
}

// [in, out] columns [c0, c1) as a Hugging Face [out, in] weight.
Tensor<float> hf(const Tensor<float>& w, int64_t c0, int64_t c1) { return w.slice(1, c0, c1).transpose(0, 1).contiguous(); }

// The model's weights under Hugging Face names and layouts.
std::map<std::string, Tensor<float>> hf_tensors(interop::Llama::Module<float>& m) {
  std::map<std::string, Tensor<float>> t;
  t["model.embed_tokens.weight"] = m.embed.weight.value;
  t["model.norm.weight"] = m.final_norm.weight.value;
  t["lm_head.weight"] = m.lm_head.weight.value.transpose(0, 1).contiguous();
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int64_t q = l.attn.H * l.attn.dh, kv = l.attn.Hkv * l.attn.dh, h = l.ffn.hidden;
    t[p + "input_layernorm.weight"] = l.attn_norm.weight.value;
    t[p + "post_attention_layernorm.weight"] = l.ffn_norm.weight.value;
    t[p + "self_attn.q_proj.weight"] = hf(l.attn.w_qkv.value, 0, q);
    t[p + "self_attn.k_proj.weight"] = hf(l.attn.w_qkv.value, q, q + kv);
    t[p + "self_attn.v_proj.weight"] = hf(l.attn.w_qkv.value, q + kv, q + 2 * kv);
    t[p + "self_attn.o_proj.weight"] = l.attn.w_o.value.transpose(0, 1).contiguous();
    t[p + "mlp.gate_proj.weight"] = hf(l.ffn.gate_up.weight.value, 0, h);
    t[p + "mlp.up_proj.weight"] = hf(l.ffn.gate_up.weight.value, h, 2 * h);
    t[p + "mlp.down_proj.weight"] = l.ffn.down.weight.value.transpose(0, 1).contiguous();
  }
  return t;
}

void write_config(const fs::path& dir, const nlohmann::json& c) { std::ofstream(dir / "config.json") << c.dump(2); }

std::vector<float> logits(interop::Llama::Module<float>& m) {
  autodiff::Tape<float> tape;
  return m.logits(tape, Tensor<int32_t>::from({1, 6}, {3, 1, 4, 1, 5, 9})).value().to_vector();
}

}  // namespace

TEST_CASE("a Llama in the Hugging Face layout imports to the same logits, from one file or from shards") {
  TempDir dir;
  const nn::ModelConfig cfg = [&] {
    write_config(dir.path, config());
    return interop::llama_config(dir.path);
  }();
  CHECK(cfg.kv_heads == 2);
  CHECK(cfg.ffn_hidden == 40);
  CHECK(cfg.rope_theta == 250000.0);
  CHECK(*cfg.norm.eps == 1e-5);
  Rng r1(1), r2(2), r3(3);
  interop::Llama::Module<float> a("", cfg, r1), b("", cfg, r2), c("", cfg, r3);
  a.parameters([&](autodiff::Parameter<float>& p) { p.value.copy_from(r1.normal<float>(p.shape(), 0.f, 0.3f)); });
  const auto tensors = hf_tensors(a);

  SUBCASE("one file") {
    io::save_safetensors<float>(dir.path / "model.safetensors", tensors);
    CHECK(logits(b) != logits(a));
    interop::load_llama(b, dir.path);
    CHECK(logits(b) == logits(a));
  }
  SUBCASE("shards listed by model.safetensors.index.json") {
    std::map<std::string, Tensor<float>> first, second;
    nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
    for (const auto& [name, t] : tensors) {
      const bool one = name.find("layers.1.") == std::string::npos;
      (one ? first : second)[name] = t;
      index["weight_map"][name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    io::save_safetensors<float>(dir.path / "model-00001-of-00002.safetensors", first);
    io::save_safetensors<float>(dir.path / "model-00002-of-00002.safetensors", second);
    std::ofstream(dir.path / "model.safetensors.index.json") << index.dump();
    interop::load_llama(c, dir.path);
    CHECK(logits(c) == logits(a));
  }
}

TEST_CASE("the Llama importer refuses what it cannot represent, and changes nothing") {
  TempDir dir;
  write_config(dir.path, config());
  const nn::ModelConfig cfg = interop::llama_config(dir.path);
  Rng r1(1), r2(2);
  interop::Llama::Module<float> a("", cfg, r1), b("", cfg, r2);
  auto tensors = hf_tensors(a);
  const auto before = logits(b);

  SUBCASE("a config it does not read") {
    for (auto [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"model_type", "gpt2"},
             {"hidden_act", "gelu"},
             {"attention_bias", true},
             {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}},
             {"sliding_window", 4096}}) {
      nlohmann::json c = config();
      c[key] = value;
      write_config(dir.path, c);
      CHECK_THROWS_WITH_AS(interop::llama_config(dir.path), doctest::Contains(key.c_str()), Error);
    }
    write_config(dir.path, {{"model_type", "llama"}});
    CHECK_THROWS_WITH_AS(interop::llama_config(dir.path), doctest::Contains("has no 'vocab_size'"), Error);
    fs::remove(dir.path / "config.json");
    CHECK_THROWS_WITH_AS(interop::llama_config(dir.path), doctest::Contains("cannot open"), Error);
  }
  SUBCASE("a missing tensor, a wrong shape, an unknown tensor") {
    auto missing = tensors;
    missing.erase("model.layers.1.mlp.up_proj.weight");
    io::save_safetensors<float>(dir.path / "model.safetensors", missing);
    CHECK_THROWS_WITH_AS(interop::load_llama(b, dir.path),
                         doctest::Contains("no tensor 'model.layers.1.mlp.up_proj.weight' (expected shape [40, 24])"),
                         Error);
    auto wrong = tensors;
    wrong["model.layers.0.self_attn.k_proj.weight"] = Tensor<float>::zeros({24, 24});
    io::save_safetensors<float>(dir.path / "model.safetensors", wrong);
    CHECK_THROWS_WITH_AS(interop::load_llama(b, dir.path),
                         doctest::Contains("'model.layers.0.self_attn.k_proj.weight' in"), Error);
    CHECK_THROWS_WITH_AS(interop::load_llama(b, dir.path), doctest::Contains("expected [12, 24]"), Error);
    auto extra = tensors;
    extra["model.layers.0.self_attn.q_proj.bias"] = Tensor<float>::zeros({24});
    extra["model.layers.0.self_attn.rotary_emb.inv_freq"] = Tensor<float>::zeros({3});  // tolerated
    io::save_safetensors<float>(dir.path / "model.safetensors", extra);
    CHECK_THROWS_WITH_AS(interop::load_llama(b, dir.path), doctest::Contains("'model.layers.0.self_attn.q_proj.bias'"),
                         Error);
    CHECK(logits(b) == before);
  }
  SUBCASE("a model not built from this config") {
    io::save_safetensors<float>(dir.path / "model.safetensors", tensors);
    nn::ModelConfig other = cfg;
    other.rope_theta = 10000;
    Rng r3(3);
    interop::Llama::Module<float> c("", other, r3);
    CHECK_THROWS_WITH_AS(interop::load_llama(c, dir.path), doctest::Contains("rope_theta 10000 vs 250000"), Error);
  }
}
