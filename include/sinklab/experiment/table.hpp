// Tables for results pages and terminals, and the claims table every reproduction ends with.
//
//   experiment::Table t({"variant", "Attn_<s>", "‖v_<s>‖ ratio"});
//   t.row({"vanilla", "0.91 ± 0.01", "0.33 ± 0.02"});
//   t.markdown();   // GitHub markdown, cells escaped
//   t.text();       // aligned columns for a terminal
//
//   experiment::Claim{"vanilla forms a sink on <s>", "Attn_<s> → ~1 (Fig. 4)", "0.91 ± 0.01",
//                     experiment::verdict_at_least(0.91, 0.8, 0.5)};
//   experiment::claims_table(claims);  // markdown: claim | paper | ours | verdict
//
// A verdict is computed from the measured figure by the example (thresholds stated in its
// code and results page), never written by hand.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab::experiment {

// Display width of UTF-8 text (code points; the symbols used here are all one column wide).
inline std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

// A markdown cell: pipes and angle brackets escaped, newlines flattened.
inline std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {
    SINKLAB_CHECK(!header_.empty(), "experiment::Table: a table needs at least one column");
  }
  Table& row(std::vector<std::string> cells) {
    SINKLAB_CHECK(cells.size() == header_.size(), "experiment::Table: a row has ", cells.size(),
                  " cells but the table has ", header_.size(), " columns (", header_.front(), ", ...)");
    rows_.push_back(std::move(cells));
    return *this;
  }
  std::size_t size() const { return rows_.size(); }

  std::string markdown() const {
    std::string s = line_md(header_) + "|";
    for (std::size_t i = 0; i < header_.size(); ++i) s += i == 0 ? "---|" : "---:|";
    s += "\n";
    for (const auto& r : rows_) s += line_md(r);
    return s;
  }
  std::string text() const {
    std::vector<std::size_t> w(header_.size());
    for (std::size_t c = 0; c < w.size(); ++c) {
      w[c] = display_width(header_[c]);
      for (const auto& r : rows_) w[c] = std::max(w[c], display_width(r[c]));
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string s;
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const std::string pad(w[c] - display_width(cells[c]), ' ');
        s += (c ? "  " : "") + (c == 0 ? cells[c] + pad : pad + cells[c]);
      }
      return s + "\n";
    };
    std::string s = line(header_);
    for (const auto& r : rows_) s += line(r);
    return s;
  }

 private:
  static std::string line_md(const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const auto& c : cells) s += " " + md_escape(c) + " |";
    return s + "\n";
  }
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// A number for a table cell: fixed-point with `precision` decimals, "n/a" when not finite.
inline std::string fixed(double x, int precision = 3) {
  if (!std::isfinite(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, x);
  return buf;
}

// Untestable: the claim's precondition did not hold in our runs (say, "gating removes the sink"
// where the ungated model formed none), so the figure neither supports nor refutes it.
// Inconclusive: the difference the claim is about lies inside the seed spread
// (PairedDifference::clear() is false), so it neither holds nor fails.
enum class Verdict { Reproduced, Partly, Not, Untestable, Inconclusive };

inline const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Reproduced: return "reproduced";
    case Verdict::Partly: return "partly";
    case Verdict::Not: return "not reproduced";
    case Verdict::Untestable: return "untestable here";
    case Verdict::Inconclusive: return "inconclusive";
  }
  return "?";
}

// Verdict for a figure that should be large: ≥ full → reproduced, ≥ partial → partly.
inline Verdict verdict_at_least(double x, double full, double partial) {
  return x >= full ? Verdict::Reproduced : x >= partial ? Verdict::Partly : Verdict::Not;
}
// Verdict for a figure that should be small: ≤ full → reproduced, ≤ partial → partly.
inline Verdict verdict_at_most(double x, double full, double partial) {
  return x <= full ? Verdict::Reproduced : x <= partial ? Verdict::Partly : Verdict::Not;
}

struct Claim {
  std::string claim;  // what the paper says, in a phrase
  std::string paper;  // the paper's figure (with its table/figure number)
  std::string ours;   // our figure (mean ± sd over seeds)
  Verdict verdict = Verdict::Not;
  std::string criterion;  // how the verdict was decided
};

inline std::string claims_table(const std::vector<Claim>& claims) {
  Table t({"claim", "paper", "ours", "verdict", "criterion"});
  for (const auto& c : claims) t.row({c.claim, c.paper, c.ours, to_string(c.verdict), c.criterion});
  return t.markdown();
}

}  // namespace sinklab::experiment
