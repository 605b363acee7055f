// An optional per-op, per-section profile of what a Tape records and runs.
//
//   autodiff::profile::Profiler prof;
//   {
//     autodiff::profile::Session on(prof);   // this thread's tapes report to prof while alive
//     prof.mark();                            // start the forward clock
//     auto loss = model.loss(tape, ids, targets);
//     tape.backward(loss);
//   }
//   prof.print(stdout, steps);
//
// Forward time of a node is the wall time since the previous tape event on this thread (the
// previous record, or mark()), which is the time its operation spent computing the value it
// records. Backward time is the time of its backward function. Ops are named after the
// function whose lambda they record (the demangled type of the backward closure, e.g.
// "matmul", "attn::Attention::Module::core"), so no op needs annotating; sections come from
// Label scopes (nn::Transformer labels "embed", "layers.3/attn", "head", ...).
//
// Zero cost when off: the tape tests one thread-local pointer per node, and a Label without an
// active profiler does nothing.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

namespace sinklab::autodiff::profile {

inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// "sinklab::autodiff::matmul<float>(Var<float>, Var<float>)::{lambda(...)#1}" → "matmul":
// the enclosing function of a closure, without arguments, template arguments and the
// sinklab::/autodiff:: prefixes.
inline std::string op_name(const std::type_info& ti) {
  if (ti == typeid(void)) return "leaf";
  std::string s = ti.name();
#if defined(__GNUG__)
  int status = 0;
  char* d = abi::__cxa_demangle(ti.name(), nullptr, nullptr, &status);
  if (status == 0 && d) s = d;
  std::free(d);
#endif
  std::string out;
  int angle = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') {
      // "operator<" / "operator<<" are names, not template brackets.
      if (angle == 0 && out.size() >= 8 && out.compare(out.size() - 8, 8, "operator") == 0) {
        out += c;
        continue;
      }
      ++angle;
    } else if (c == '>' && angle > 0) {
      --angle;
    } else if (angle == 0) {
      if (c == '(' && !(out.size() >= 8 && out.compare(out.size() - 8, 8, "operator") == 0)) break;
      out += c;
    }
  }
  for (const char* prefix : {"sinklab::", "autodiff::"})
    if (out.rfind(prefix, 0) == 0) out.erase(0, std::char_traits<char>::length(prefix));
  // A shared helper (detail::unary<elem::Log, ...>) is named with its first template argument,
  // "detail::unary<Log>", so elementwise ops stay apart.
  if (out.rfind("detail::", 0) == 0) {
    const std::size_t open = s.find('<');
    if (open != std::string::npos) {
      std::size_t end = open + 1;
      for (int depth = 0; end < s.size(); ++end) {
        if (s[end] == '<') ++depth;
        else if (s[end] == '>' && depth-- == 0) break;
        else if (s[end] == ',' && depth == 0) break;
      }
      std::string arg = s.substr(open + 1, end - open - 1);
      const std::size_t colon = arg.rfind("::");
      if (colon != std::string::npos) arg.erase(0, colon + 2);
      if (!arg.empty()) out += "<" + arg + ">";
    }
  }
  return out;
}

class Profiler {
 public:
  struct Entry {
    std::string section;  // the Label path when the node was recorded ("" outside any)
    std::string op;
    double forward_s = 0, backward_s = 0;
    int64_t forward_calls = 0, backward_calls = 0;
  };

  // Restarts the forward clock (call before a forward pass, after work that is not the model's).
  void mark() { last_ = now_seconds(); }

  // Tape events.
  void recorded(int32_t node, const std::type_info& op) {
    const double t = now_seconds();
    const int32_t e = entry(op);
    entries_[e].forward_s += t - last_;
    ++entries_[e].forward_calls;
    if (node >= static_cast<int32_t>(node_entry_.size())) node_entry_.resize(static_cast<std::size_t>(node) + 1, -1);
    node_entry_[node] = e;
    last_ = t;
  }
  void backward_ran(int32_t node, double seconds) {
    if (node < 0 || node >= static_cast<int32_t>(node_entry_.size()) || node_entry_[node] < 0) return;
    Entry& en = entries_[node_entry_[node]];
    en.backward_s += seconds;
    ++en.backward_calls;
    last_ = now_seconds();
  }

  void push_label(std::string l) {
    labels_.push_back(labels_.empty() ? std::move(l) : labels_.back() + "/" + l);
  }
  void pop_label() {
    if (!labels_.empty()) labels_.pop_back();
  }

  const std::vector<Entry>& entries() const { return entries_; }
  void reset() {
    entries_.clear();
    index_.clear();
    node_entry_.clear();
  }

  // Three tables, times per step in ms: by op; by section with layer numbers folded
  // ("layers.*/attn"); by top-level section (each layer, embed, head).
  void print(std::FILE* f, int64_t steps = 1) const {
    const double per = 1e3 / static_cast<double>(std::max<int64_t>(steps, 1));
    double total = 0;
    for (const Entry& e : entries_) total += e.forward_s + e.backward_s;
    auto table = [&](const char* title, auto key_of) {
      std::map<std::string, std::pair<double, double>> agg;
      for (const Entry& e : entries_) {
        auto& a = agg[key_of(e)];
        a.first += e.forward_s;
        a.second += e.backward_s;
      }
      std::vector<std::pair<std::string, std::pair<double, double>>> rows(agg.begin(), agg.end());
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.second.first + a.second.second > b.second.first + b.second.second;
      });
      int w = 52;  // the name column fits the longest name
      for (const auto& row : rows) w = std::max(w, static_cast<int>(row.first.size()));
      std::fprintf(f, "\n%-*s %10s %10s %10s %6s\n", w, title, "fwd ms", "bwd ms", "total ms", "%");
      for (const auto& [k, v] : rows) {
        const double t = v.first + v.second;
        if (t * per < 0.005) continue;
        std::fprintf(f, "%-*s %10.2f %10.2f %10.2f %6.1f\n", w, k.c_str(), v.first * per, v.second * per, t * per,
                     total > 0 ? 100.0 * t / total : 0.0);
      }
    };
    table("op", [](const Entry& e) { return e.op; });
    table("section (layers folded) / op", [](const Entry& e) { return fold_layers(e.section) + "  " + e.op; });
    table("section", [](const Entry& e) { return e.section.substr(0, e.section.find('/')); });
    std::fprintf(f, "%-52s %32.2f\n", "recorded total (fwd + bwd) ms/step", total * per);
  }

 private:
  static std::string fold_layers(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
      if (s.compare(i, 7, "layers.") == 0) {
        out += "layers.*";
        i += 7;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      } else {
        out += s[i++];
      }
    }
    return out;
  }
  int32_t entry(const std::type_info& op) {
    auto n = names_.find(std::type_index(op));
    if (n == names_.end()) n = names_.emplace(std::type_index(op), op_name(op)).first;
    const std::string& section = labels_.empty() ? empty_ : labels_.back();
    std::string key = section + '\x1f' + n->second;
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    entries_.push_back(Entry{section, n->second});
    const int32_t e = static_cast<int32_t>(entries_.size() - 1);
    index_.emplace(std::move(key), e);
    return e;
  }

  double last_ = now_seconds();
  std::vector<Entry> entries_;
  std::unordered_map<std::string, int32_t> index_;
  std::unordered_map<std::type_index, std::string> names_;
  std::vector<int32_t> node_entry_;
  std::vector<std::string> labels_;
  std::string empty_;
};

// The profiler this thread's tapes report to (null: profiling off).
inline Profiler*& active() {
  thread_local Profiler* p = nullptr;
  return p;
}

// Makes `p` this thread's active profiler while alive.
class Session {
 public:
  explicit Session(Profiler& p) : prev_(active()) {
    active() = &p;
    p.mark();
  }
  ~Session() { active() = prev_; }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  Profiler* prev_;
};

// Names the nodes recorded while alive (nested labels join with '/'); nothing without a profiler.
class Label {
 public:
  explicit Label(const char* name) : p_(active()) {
    if (p_) p_->push_label(name);
  }
  Label(const char* name, int64_t index) : p_(active()) {
    if (p_) p_->push_label(std::string(name) + "." + std::to_string(index));
  }
  ~Label() {
    if (p_) p_->pop_label();
  }
  Label(const Label&) = delete;
  Label& operator=(const Label&) = delete;

 private:
  Profiler* p_;
};

}  // namespace sinklab::autodiff::profile
