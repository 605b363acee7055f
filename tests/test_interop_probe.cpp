// Probe export (interop/probe_export.hpp): every recorded tensor comes back from probe.safetensors
// as it was, index.json describes each one, report.jsonl holds the model report, and an
// independent Python reader opens the file (skipped without python3).
#include <doctest/doctest.h>

#include "temp_dir.hpp"
#include <unistd.h>

#include "skip.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "sinklab/interop/probe_export.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {

using sinklab_test::TempDir;

using VGA = attn::Attention<score::SoftmaxSink, gate::FromValue<gate::per_head, gate::on_values>>;
using Model = nn::Transformer<nn::PreNorm<norm::RMS>, VGA, ffn::SwiGLU>;

nn::ModelConfig small() {
  nn::ModelConfig c;
  c.vocab = 11;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  return c;
}

// A probed forward and backward pass of a small gated model, exported to dir.
struct Exported {
  TempDir dir;
  Rng rng{1};
  Model::Module<float> model{"", small(), rng};
  nn::ModelProbe<float> probe;
  Tensor<int32_t> ids = Tensor<int32_t>::from({2, 5}, {1, 4, 9, 2, 0, 3, 3, 10, 7, 5});
  Tensor<int32_t> targets = Tensor<int32_t>::from({2, 5}, {4, 9, 2, 0, 3, 3, 10, 7, 5, 6});
  Tensor<float> logits;
  probe::ModelReport report;

  Exported() {
    probe.gradients = true;
    probe.interventions = {nn::Intervention::scaled(nn::Site::HeadOutput, 1, 0, 2, 0.5)};
    autodiff::Tape<float> tape;
    auto lg = model.logits(tape, ids, &probe);
    logits = lg.value().clone();
    tape.backward(autodiff::cross_entropy(lg, targets));
    report = probe::model_report(model, probe);
    interop::save_probe(probe, dir.path,
                        {.ids = ids, .targets = targets, .logits = logits, .report = &report,
                         .context = {{"step", int64_t{7}}}, .metadata = {{"variant", "vga"}}});
  }
};

}  // namespace

TEST_CASE("save_probe: the tensors come back as recorded and index.json describes each") {
  Exported e;
  const io::SafetensorsFile f = io::SafetensorsFile::read(e.dir.path / "probe.safetensors");
  CHECK(f.metadata().at("variant") == "vga");
  auto same = [&](const std::string& name, const Tensor<float>& t) {
    INFO(name);
    REQUIRE(f.contains(name));
    CHECK(f.get<float>(name).to_vector() == t.to_vector());
  };
  same("logits", e.logits);
  same("embeddings", e.probe.embeddings);
  same("final_hidden", e.probe.final_hidden);
  CHECK(f.get<int32_t>("ids").to_vector() == e.ids.to_vector());
  for (int i = 0; i < 2; ++i) {
    const auto& r = e.probe.layers[static_cast<std::size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    same(p + "output", r.output);
    same(p + "grad_attn_out", r.grad_attn_out);
    same(p + "attn.weights", r.attn.weights);
    same(p + "attn.logits", r.attn.logits);  // −inf at masked keys survives
    same(p + "attn.gate_values", r.attn.gate_values);
    same(p + "attn.grad_v", r.attn.grad_v);
  }

  std::ifstream in(e.dir.path / "index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  CHECK(index["format"] == "sinklab-probe");
  CHECK(index["layers"] == 2);
  CHECK(index["interventions"].size() == 1);
  std::set<std::string> listed;
  for (const auto& t : index["tensors"]) {
    const std::string name = t["name"];
    listed.insert(name);
    const io::TensorEntry& entry = f.entry(name);
    CHECK(t["shape"].get<std::vector<int64_t>>() == entry.shape);
    CHECK(t["axes"].size() == entry.shape.size());
  }
  CHECK(listed.size() == f.entries().size());
  const auto& w = *std::find_if(index["tensors"].begin(), index["tensors"].end(),
                                [](const auto& t) { return t["name"] == "layers.1.attn.weights"; });
  CHECK(w["layer"] == 1);
  CHECK(w["axes"] == nlohmann::json({"batch", "head", "query", "key"}));
  CHECK(w["shape"] == nlohmann::json({2, 4, 5, 5}));

  std::ifstream rep(e.dir.path / "report.jsonl");
  std::string line;
  int rows = 0;
  while (std::getline(rep, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    CHECK(j["step"] == 7);
    CHECK(j["row"] == (rows == 0 ? "model" : "layer"));
    ++rows;
  }
  CHECK(rows == 3);
}

TEST_CASE("save_probe refuses an empty probe, naming the folder") {
  nn::ModelProbe<float> empty;
  CHECK_THROWS_WITH_AS(interop::save_probe(empty, fs::temp_directory_path() / "never_written"),
                       doctest::Contains("the probe holds no layer"), Error);
}

TEST_CASE("save_probe: an independent Python reader opens probe.safetensors" * sinklab_test::optional()) {
  if (std::system("python3 -c 'import json, struct' > /dev/null 2>&1") != 0)
    SINKLAB_SKIP("python3 not found (apt-get install python3)");
  Exported e;
  const auto script = fs::path(__FILE__).parent_path().parent_path() / "scripts" / "check_safetensors.py";
  const std::string cmd = "python3 '" + script.string() + "' '" + (e.dir.path / "probe.safetensors").string() + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = pclose(p);
  INFO(out);
  CHECK(rc == 0);
  const std::size_t n = io::SafetensorsFile::read(e.dir.path / "probe.safetensors").entries().size();
  CHECK(out.find("OK: " + std::to_string(n) + " tensors") != std::string::npos);
}
