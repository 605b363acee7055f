// Model checkpoints on top of io/safetensors.hpp: one tensor per parameter, named by its
// dotted path (module.parameters order), plus free-form string metadata. Written against the
// interfaces modules and optimisers share (parameters(visit), for_each_state), not their types.
//
//   io::save_parameters(model, "model.safetensors", {{"arch", "exoformer"}});
//   io::load_parameters(other, "model.safetensors");        // strict
//   io::save_optimizer_state(opt, "opt.safetensors");        // any optimiser's state per parameter
//   io::load_optimizer_state(opt, "opt.safetensors");
//
// Loading is strict and all-or-nothing: every parameter must be present with its shape (dtype
// may differ and is converted), the file may hold nothing else unless allowed, and nothing is
// written into the model before every check has passed. Errors name the file and the
// parameters at fault.
//
// A module with `architecture()` (nn::Transformer, nn/architecture.hpp) is self-describing: its
// policies and settings go into the metadata as "sinklab.model.<key>", and a load compares them
// with the receiving module's, naming each key whose two sides differ. Files without those keys
// (other tools' files, older checkpoints) load on their shapes alone.
#pragma once
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sinklab/io/safetensors.hpp"

namespace sinklab::io {

namespace detail {

inline bool same_shape(const TensorEntry& e, const Shape& s) {
  return e.shape.size() == static_cast<std::size_t>(s.rank()) && std::equal(e.shape.begin(), e.shape.end(), s.begin());
}

// Collects problems and throws them as one message (the first few, with a count).
struct Problems {
  std::string who, file;
  std::vector<std::string> items;
  void add(std::string s) { items.push_back(std::move(s)); }
  void raise_if_any() const {
    if (items.empty()) return;
    std::string msg;
    for (std::size_t i = 0; i < items.size() && i < 8; ++i) msg += "\n  " + items[i];
    if (items.size() > 8) msg += "\n  ... and " + std::to_string(items.size() - 8) + " more";
    sinklab::detail::fail(who, ": '", file, "' does not match (", items.size(), " problem",
                          items.size() == 1 ? "" : "s", "):", msg);
  }
};

// Checks that `f` holds exactly the tensors named in `want` with their shapes.
inline void check_tensors(const SafetensorsFile& f, const std::vector<std::pair<std::string, Shape>>& want,
                          bool allow_extra, Problems& pr) {
  std::set<std::string> expected;
  for (const auto& [name, shape] : want) {
    if (!expected.insert(name).second) {
      pr.add("two destinations share the name '" + name + "'");
      continue;
    }
    if (!f.contains(name)) {
      pr.add("no tensor '" + name + "' (expected shape " + shape.str() + ")");
      continue;
    }
    const TensorEntry& e = f.entry(name);
    if (!same_shape(e, shape)) pr.add("tensor '" + name + "' has shape " + e.shape_str() + ", expected " + shape.str());
  }
  if (!allow_extra)
    for (const TensorEntry& e : f.entries())
      if (!expected.count(e.name)) pr.add("unexpected tensor '" + e.name + "' " + e.shape_str());
}

inline constexpr const char* kModelKeyPrefix = "sinklab.model.";

template <class M>
Metadata architecture_metadata(const M& module) {
  Metadata m;
  if constexpr (requires { module.architecture(); })
    for (const auto& [k, v] : module.architecture()) m[kModelKeyPrefix + k] = v;
  return m;
}

// Each key where the file and the module describe different models ("heads: file 4, model 2").
inline void check_architecture(const Metadata& file, const Metadata& model, Problems& pr) {
  const std::string prefix = kModelKeyPrefix;
  const auto described = [&](const Metadata& m) {
    return std::any_of(m.begin(), m.end(), [&](const auto& kv) { return kv.first.rfind(prefix, 0) == 0; });
  };
  if (!described(file) || !described(model)) return;
  std::set<std::string> keys;
  for (const Metadata* m : {&file, &model})
    for (const auto& [k, v] : *m)
      if (k.rfind(prefix, 0) == 0) keys.insert(k);
  for (const std::string& k : keys) {
    const auto f = file.find(k), m = model.find(k);
    const std::string fv = f == file.end() ? "<absent>" : "'" + f->second + "'";
    const std::string mv = m == model.end() ? "<absent>" : "'" + m->second + "'";
    if (fv != mv) pr.add("architecture " + k.substr(prefix.size()) + ": file " + fv + ", model " + mv);
  }
}

}  // namespace detail

// Writes every parameter's value (in the module's element type) and the metadata.
template <class M>
void save_parameters(M& module, const std::filesystem::path& path, const Metadata& metadata = {}) {
  SafetensorsWriter w;
  module.parameters([&](auto& p) {
    SINKLAB_CHECK(!p.name.empty(), "save_parameters: a parameter of shape ", p.shape(), " has no name (writing '",
                  path.string(), "')");
    w.add(p.name, p.value);
  });
  w.metadata(metadata).metadata(detail::architecture_metadata(module)).write(path);
}

struct CheckpointLoadOptions {
  bool allow_extra = false;         // tolerate tensors in the file that the module does not have
  bool check_architecture = true;   // compare the file's sinklab.model.* metadata with the module's
};

// Fills every parameter of `module` from `path`; returns the file's metadata.
template <class M>
Metadata load_parameters(M& module, const std::filesystem::path& path, const CheckpointLoadOptions& opt = {}) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  std::vector<std::pair<std::string, Shape>> want;
  module.parameters([&](auto& p) { want.emplace_back(p.name, p.shape()); });
  detail::Problems pr{"load_parameters", path.string(), {}};
  if (opt.check_architecture) detail::check_architecture(f.metadata(), detail::architecture_metadata(module), pr);
  detail::check_tensors(f, want, opt.allow_extra, pr);
  pr.raise_if_any();
  module.parameters([&](auto& p) { f.read_into(p.name, p.value); });
  return f.metadata();
}

// An optimiser's state, for any optimiser with the generic interface (optim::AdamW, SGD, Muon,
// MuonAdamW): name(), step_count(), set_step_count(n) and for_each_state(f(parameter name,
// state)), each state listing its tensors through tensors(f(suffix, tensor)) and holding an
// int64 `step`. Tensors are "<parameter>.<suffix>" (AdamW: exp_avg, exp_avg_sq; SGD and Muon:
// momentum_buffer) in the parameter's type, plus "<parameter>.step" (I64 [1]); the optimiser's
// name and step count go into the metadata.
template <class Opt>
void save_optimizer_state(Opt& opt, const std::filesystem::path& path, const Metadata& metadata = {}) {
  SafetensorsWriter w;
  opt.for_each_state([&](const std::string& name, auto& st) {
    st.tensors([&](const char* suffix, auto& t) { w.add(name + "." + suffix, t); });
    w.add(name + ".step", Tensor<int64_t>::full({1}, st.step));
  });
  w.metadata(metadata);
  w.metadata("sinklab.optimizer", opt.name());
  w.metadata("sinklab.step_count", std::to_string(opt.step_count()));
  w.write(path);
}

// Restores every parameter's state (strict, all-or-nothing) and the step count; returns the
// remaining metadata.
template <class Opt>
Metadata load_optimizer_state(Opt& opt, const std::filesystem::path& path) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  Metadata meta = f.metadata();
  const std::string want_kind = opt.name();
  auto kind = meta.find("sinklab.optimizer");
  SINKLAB_CHECK(kind != meta.end() && kind->second == want_kind, "load_optimizer_state: '", path.string(),
                "' is not an ", want_kind, " state file (metadata sinklab.optimizer = '",
                kind == meta.end() ? std::string("<missing>") : kind->second, "')");
  auto count = meta.find("sinklab.step_count");
  int64_t step_count = -1;
  if (count != meta.end()) {
    try {
      std::size_t used = 0;
      step_count = std::stoll(count->second, &used);
      if (used != count->second.size()) step_count = -1;
    } catch (const std::exception&) {
      step_count = -1;
    }
  }
  SINKLAB_CHECK(step_count >= 0, "load_optimizer_state: '", path.string(),
                "' has no valid sinklab.step_count in its metadata");
  std::vector<std::pair<std::string, Shape>> want;
  opt.for_each_state([&](const std::string& name, auto& st) {
    st.tensors([&](const char* suffix, auto& t) { want.emplace_back(name + "." + suffix, t.shape()); });
    want.emplace_back(name + ".step", Shape{1});
  });
  detail::Problems pr{"load_optimizer_state", path.string(), {}};
  detail::check_tensors(f, want, false, pr);
  opt.for_each_state([&](const std::string& name, auto&) {
    if (!f.contains(name + ".step")) return;
    const Tensor<int64_t> s = f.get<int64_t>(name + ".step");
    if (s.numel() == 1 && s.data()[0] < 0)
      pr.add("tensor '" + name + ".step' holds " + std::to_string(s.data()[0]) + ", expected a step >= 0");
  });
  pr.raise_if_any();
  opt.for_each_state([&](const std::string& name, auto& st) {
    st.tensors([&](const char* suffix, auto& t) { f.read_into(name + "." + suffix, t); });
    st.step = f.get<int64_t>(name + ".step").data()[0];
  });
  opt.set_step_count(step_count);
  meta.erase("sinklab.optimizer");
  meta.erase("sinklab.step_count");
  return meta;
}

}  // namespace sinklab::io
