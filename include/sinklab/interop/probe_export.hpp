// A probed pass as files a notebook opens without sinklab:
//
//   interop::save_probe(probe, "probe/", {.ids = ids, .logits = logits, .report = &report,
//                                         .context = {{"step", step}}});
//
//   probe/probe.safetensors   every tensor the probe recorded (residual stream, branch outputs,
//                             attention weights and logits, keys, values, gates, their norms and,
//                             when recorded, gradients), plus the given ids, targets and logits
//   probe/index.json          one entry per tensor: name, layer, shape, axes, what it is; the
//                             probe's interventions and the caller's metadata
//   probe/report.jsonl        the probe::ModelReport as rows (probe/report_log.hpp), when given
//
// In Python: safetensors.numpy.load_file("probe/probe.safetensors") and
// pandas.read_json("probe/report.jsonl", lines=True) (docs/interop.md). Each file is written
// atomically; tensors keep the probe's element type; masked attention logits are −inf.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sinklab/io/files.hpp"
#include "sinklab/io/metrics_log.hpp"
#include "sinklab/io/safetensors.hpp"
#include "sinklab/nn/transformer.hpp"
#include "sinklab/probe/model_report.hpp"
#include "sinklab/probe/report_log.hpp"

namespace sinklab::interop {

// What to save beside the probe's own tensors (all optional).
template <class T>
struct ProbeExtras {
  Tensor<int32_t> ids, targets;              // [B, T] the probed batch
  Tensor<T> logits;                          // [B, T, vocab]
  const probe::ModelReport* report = nullptr;  // → report.jsonl
  io::LogRow context;                        // leads every report row (step, variant, seed, ...)
  io::Metadata metadata;                     // → probe.safetensors' metadata and index.json
};

namespace detail {

struct ProbeEntry {
  std::string name;
  int64_t layer;  // -1: not a layer's
  std::vector<std::string> axes;
  std::string what;
};

template <class T>
class ProbeWriter {
 public:
  template <class U>
  void add(const std::string& name, const Tensor<U>& t, int64_t layer, std::vector<std::string> axes, std::string what) {
    if (!t.defined()) return;
    SINKLAB_CHECK(static_cast<int64_t>(axes.size()) == t.rank(), "interop::save_probe: tensor '", name, "' of shape ",
                  t.shape(), " described with ", axes.size(), " axes");
    writer_.add(name, t);
    nlohmann::json e = {{"name", name},
                        {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                        {"dtype", io::dtype_name(io::dtype_of<U>())},
                        {"axes", axes},
                        {"what", what}};
    e["layer"] = layer < 0 ? nlohmann::json(nullptr) : nlohmann::json(layer);
    index_.push_back(std::move(e));
  }
  io::SafetensorsWriter& writer() { return writer_; }
  const nlohmann::json& index() const { return index_; }

 private:
  io::SafetensorsWriter writer_;
  nlohmann::json index_ = nlohmann::json::array();
};

}  // namespace detail

template <class T>
void save_probe(const nn::ModelProbe<T>& probe, const std::filesystem::path& dir, const ProbeExtras<T>& extra = {}) {
  SINKLAB_CHECK(!probe.layers.empty(), "interop::save_probe: the probe holds no layer (run a forward pass with it ",
                "before saving it to '", dir.string(), "')");
  std::filesystem::create_directories(dir);
  detail::ProbeWriter<T> w;
  const std::vector<std::string> btc{"batch", "token", "channel"};
  w.add("ids", extra.ids, -1, {"batch", "token"}, "token ids of the probed batch");
  w.add("targets", extra.targets, -1, {"batch", "token"}, "target ids (-100: ignored)");
  w.add("logits", extra.logits, -1, {"batch", "token", "vocab"}, "the model's output logits");
  w.add("embeddings", probe.embeddings, -1, btc, "residual stream entering layer 0 (embeddings, positions, tokens)");
  w.add("final_hidden", probe.final_hidden, -1, btc, "hidden states after the final norm");

  using R = nn::LayerRecord<T>;
  struct Stream {
    const char* name;
    Tensor<T> R::*value;
    Tensor<T> R::*grad;
    const char* what;
  };
  const Stream streams[] = {{"input", &R::input, &R::grad_input, "residual stream entering the layer"},
                            {"attn_in", &R::attn_in, &R::grad_attn_in, "the attention's input, norm(input)"},
                            {"attn_out", &R::attn_out, &R::grad_attn_out, "the attention branch's update"},
                            {"mid", &R::mid, &R::grad_mid, "residual stream after the attention branch"},
                            {"ffn_in", &R::ffn_in, &R::grad_ffn_in, "the FFN's input, norm(mid)"},
                            {"ffn_out", &R::ffn_out, &R::grad_ffn_out, "the FFN branch's update"},
                            {"output", &R::output, &R::grad_output, "residual stream leaving the layer"}};
  const std::vector<std::string> bhqk{"batch", "head", "query", "key"}, bkkc{"batch", "kv_head", "key", "channel"},
      bkk{"batch", "kv_head", "key"};
  for (std::size_t i = 0; i < probe.layers.size(); ++i) {
    const R& rec = probe.layers[i];
    const auto L = static_cast<int64_t>(i);
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const Stream& s : streams) {
      w.add(p + s.name, rec.*s.value, L, btc, s.what);
      w.add(p + "grad_" + s.name, rec.*s.grad, L, btc, std::string("gradient of the loss at: ") + s.what);
    }
    const auto& a = rec.attn;
    w.add(p + "attn.weights", a.weights, L, bhqk, "attention weights that multiply the values (0 at masked keys)");
    w.add(p + "attn.logits", a.logits, L, bhqk, "scaled logits q·k/√d before normalisation (−inf at masked keys)");
    w.add(p + "attn.lse", a.lse, L, {"batch", "head", "query"}, "row logsumexp of the softmax (sink included)");
    w.add(p + "attn.keys", a.keys, L, bkkc, "k as the scores see it (after QK-norm and RoPE)");
    w.add(p + "attn.key_norms", a.key_norms, L, bkk, "|k_j|");
    w.add(p + "attn.values", a.values, L, bkkc, "v before the value transform and gate");
    w.add(p + "attn.value_norms", a.value_norms, L, bkk, "|v_j|");
    w.add(p + "attn.transformed_value_norms", a.transformed_value_norms, L, bkk,
          "|v̂_j| after the value transform and value gate");
    w.add(p + "attn.gate_values", a.gate_values, L, {"batch", "gate_head", "token", "gate_channel"},
          "the gate's values σ(logits) (query heads on the output, key/value heads on the values)");
    w.add(p + "attn.output", a.output, L, btc, "the attention layer's output (after W_O)");
    w.add(p + "attn.grad_q", a.grad_q, L, {"batch", "head", "query", "channel"}, "gradient of the loss at q");
    w.add(p + "attn.grad_k", a.grad_k, L, bkkc, "gradient of the loss at k");
    w.add(p + "attn.grad_v", a.grad_v, L, bkkc, "gradient of the loss at v");
  }

  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : extra.metadata) meta[k] = v;
  nlohmann::json interventions = nlohmann::json::array();
  for (const nn::Intervention& iv : probe.interventions) interventions.push_back(iv.describe());
  nlohmann::json index = {{"format", "sinklab-probe"},
                          {"version", 1},
                          {"file", "probe.safetensors"},
                          {"layers", probe.layers.size()},
                          {"gradients", probe.gradients},
                          {"interventions", interventions},
                          {"metadata", meta},
                          {"tensors", w.index()}};
  w.writer().metadata(extra.metadata).write(dir / "probe.safetensors");
  const std::string index_text = index.dump(1) + "\n";
  io::write_file_atomically(dir / "index.json", std::string_view(index_text));
  if (extra.report) {
    const std::filesystem::path tmp = dir / "report.jsonl.tmp";
    {
      io::JsonlLog log(tmp);
      probe::write_report(log, *extra.report, extra.context);
    }
    std::filesystem::rename(tmp, dir / "report.jsonl");
  }
}

}  // namespace sinklab::interop
