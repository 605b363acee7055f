// Paired starts: every variant of a seed begins from the same initial tensors, copied by name.
//
//   auto bank = experiment::TensorBank::of(reference_model);     // the seed's vanilla init
//   experiment::Pairing p = bank.apply(vga_model);              // copies every shared name
//   p.line()   // "init: 9/9 shared tensors identical to the reference; own: layers.0.attn.gate.weight"
//
// A tensor the variant has and the reference lacks (a gate's W_g, a sink logit) keeps the
// variant's own initialisation; a shared name with another shape is an error. After copying,
// every shared tensor is compared with the reference bit for bit, so the line is a check,
// not a claim. The same mechanism loads a trained checkpoint into a larger model (retrofit):
// TensorBank::load(file).apply(model).
#pragma once
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"
#include "sinklab/core/tensor.hpp"
#include "sinklab/io/safetensors.hpp"

namespace sinklab::experiment {

struct Pairing {
  int64_t shared = 0, identical = 0;
  std::vector<std::string> own;      // the variant's tensors the reference does not have
  std::vector<std::string> unused;   // the reference's tensors the variant does not have
  bool ok() const { return identical == shared; }
  std::string line() const {
    std::string s = "init: " + std::to_string(identical) + "/" + std::to_string(shared) +
                    " shared tensors identical to the reference";
    if (!own.empty()) {
      s += "; own:";
      for (const auto& n : own) s += " " + n;
    }
    if (!unused.empty()) s += "; not in this variant: " + std::to_string(unused.size());
    return s;
  }
};

class TensorBank {
 public:
  // Copies of every parameter of a module (anything with parameters(f(p)) and p.name, p.value).
  template <class M>
  static TensorBank of(M& module) {
    TensorBank b;
    module.parameters([&](auto& p) { b.tensors_.emplace(p.name, to_float(p.value)); });
    return b;
  }
  // The tensors of a safetensors file (a final checkpoint), as float.
  static TensorBank load(const std::filesystem::path& file) {
    TensorBank b;
    const io::SafetensorsFile f = io::SafetensorsFile::read(file);
    for (const auto& e : f.entries()) b.tensors_.emplace(e.name, f.get<float>(e.name));
    return b;
  }

  template <class M>
  Pairing apply(M& module) const {
    Pairing r;
    std::vector<std::string> seen;
    module.parameters([&](auto& p) {
      auto it = tensors_.find(p.name);
      if (it == tensors_.end()) {
        r.own.push_back(p.name);
        return;
      }
      seen.push_back(p.name);
      SINKLAB_CHECK(it->second.shape() == p.value.shape(), "experiment::TensorBank: tensor '", p.name, "' has shape ",
                    p.value.shape(), " in this model but ", it->second.shape(), " in the reference");
      using T = typename std::decay_t<decltype(p.value)>::value_type;
      SINKLAB_CHECK(p.value.is_contiguous(), "experiment::TensorBank: parameter '", p.name, "' is not contiguous");
      const float* src = it->second.data();
      T* dst = p.value.data();
      for (int64_t i = 0; i < p.value.numel(); ++i) dst[i] = static_cast<T>(src[i]);
      ++r.shared;
      bool same = true;
      for (int64_t i = 0; i < p.value.numel() && same; ++i) same = static_cast<float>(dst[i]) == src[i];
      r.identical += same;
    });
    std::sort(seen.begin(), seen.end());
    for (const auto& [name, t] : tensors_)
      if (!std::binary_search(seen.begin(), seen.end(), name)) r.unused.push_back(name);
    return r;
  }

  std::size_t size() const { return tensors_.size(); }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const Tensor<float>& at(const std::string& name) const {
    auto it = tensors_.find(name);
    SINKLAB_CHECK(it != tensors_.end(), "experiment::TensorBank: no tensor '", name, "'");
    return it->second;
  }

 private:
  template <class T>
  static Tensor<float> to_float(const Tensor<T>& t) {
    const Tensor<T> c = t.contiguous();
    Tensor<float> out = Tensor<float>::empty(c.shape());
    for (int64_t i = 0; i < c.numel(); ++i) out.data()[i] = static_cast<float>(c.data()[i]);
    return out;
  }
  std::map<std::string, Tensor<float>> tensors_;
};

}  // namespace sinklab::experiment
