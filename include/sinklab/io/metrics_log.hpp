// Metric logs a training loop appends to, one row per call, flushed at once so a crashed
// run keeps everything it logged.
//
//   io::CsvLog csv("run/metrics.csv");
//   csv.log({{"step", step}, {"loss", loss}, {"variant", "vga"}});
//
// CSV: the header is written once, from the first row's names (or taken from an existing file
// when appending); later rows may omit columns (empty cells) but may not add new ones.
// JSONL: one JSON object per line; NaN and infinities become null (JSON has no such numbers).
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab::io {

// A logged value: a number (integer or floating) or a string.
class LogValue {
 public:
  enum class Kind { Integer, Real, Text };

  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogValue(T v) : kind_(Kind::Integer), i_(static_cast<int64_t>(v)) {}
  LogValue(bool v) : kind_(Kind::Integer), i_(v ? 1 : 0) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  LogValue(T v) : kind_(Kind::Real), d_(static_cast<double>(v)) {}
  LogValue(std::string s) : kind_(Kind::Text), s_(std::move(s)) {}
  LogValue(const char* s) : kind_(Kind::Text), s_(s) {}

  Kind kind() const { return kind_; }
  int64_t integer() const { return i_; }
  double real() const { return d_; }
  const std::string& text() const { return s_; }

  // Shortest text that reads back to the same value.
  std::string str() const {
    switch (kind_) {
      case Kind::Integer: return std::to_string(i_);
      case Kind::Text: return s_;
      case Kind::Real: {
        if (std::isnan(d_)) return "nan";
        if (std::isinf(d_)) return d_ > 0 ? "inf" : "-inf";
        char buf[64];
        auto r = std::to_chars(buf, buf + sizeof buf, d_);
        return std::string(buf, r.ptr);
      }
    }
    return {};
  }
  nlohmann::ordered_json json() const {
    switch (kind_) {
      case Kind::Integer: return i_;
      case Kind::Text: return s_;
      case Kind::Real: return std::isfinite(d_) ? nlohmann::ordered_json(d_) : nlohmann::ordered_json(nullptr);
    }
    return nullptr;
  }

 private:
  Kind kind_;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
};

using LogRow = std::vector<std::pair<std::string, LogValue>>;

// The value of `key` in a row as a number (integers converted); NaN when the row has no such
// number.
inline double number(const LogRow& row, std::string_view key) {
  for (const auto& [k, v] : row)
    if (k == key) {
      if (v.kind() == LogValue::Kind::Real) return v.real();
      if (v.kind() == LogValue::Kind::Integer) return static_cast<double>(v.integer());
      break;
    }
  return std::numeric_limits<double>::quiet_NaN();
}

// RFC 4180 quoting: fields holding a comma, quote or line break are quoted, quotes doubled.
inline std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

// Splits one CSV record (no embedded line breaks) into fields, undoing csv_escape.
inline std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

class CsvLog {
 public:
  // append = false truncates; append = true continues an existing file under its header.
  explicit CsvLog(const std::filesystem::path& path, bool append = false) : path_(path) {
    if (append && std::filesystem::exists(path) && std::filesystem::file_size(path) > 0) {
      std::ifstream in(path);
      std::string first;
      std::getline(in, first);
      if (!first.empty() && first.back() == '\r') first.pop_back();
      columns_ = csv_split(first);
    }
    out_.open(path, append ? std::ios::app : std::ios::trunc);
    SINKLAB_CHECK(out_.good(), "io::CsvLog: cannot open '", path.string(), "' for writing");
  }

  void log(const LogRow& row) {
    if (columns_.empty()) {
      SINKLAB_CHECK(!row.empty(), "io::CsvLog: the first row of '", path_.string(), "' has no columns");
      for (const auto& [name, v] : row) {
        for (const auto& c : columns_)
          SINKLAB_CHECK(c != name, "io::CsvLog: column '", name, "' appears twice in a row for '", path_.string(), "'");
        columns_.push_back(name);
      }
      write_line(columns_);
    }
    std::vector<std::string> cells(columns_.size());
    std::vector<bool> seen(columns_.size(), false);
    for (const auto& [name, v] : row) {
      std::size_t k = 0;
      while (k < columns_.size() && columns_[k] != name) ++k;
      SINKLAB_CHECK(k < columns_.size(), "io::CsvLog: column '", name, "' is not in the header of '", path_.string(),
                    "' (columns are fixed by the first row)");
      SINKLAB_CHECK(!seen[k], "io::CsvLog: column '", name, "' appears twice in a row for '", path_.string(), "'");
      seen[k] = true;
      cells[k] = v.str();
    }
    write_line(cells);
  }
  void log(std::initializer_list<std::pair<std::string, LogValue>> row) { log(LogRow(row)); }

  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void write_line(const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) out_ << (i ? "," : "") << csv_escape(cells[i]);
    out_ << '\n';
    out_.flush();
    SINKLAB_CHECK(out_.good(), "io::CsvLog: write to '", path_.string(), "' failed");
  }

  std::filesystem::path path_;
  std::ofstream out_;
  std::vector<std::string> columns_;
};

class JsonlLog {
 public:
  explicit JsonlLog(const std::filesystem::path& path, bool append = false) : path_(path) {
    out_.open(path, append ? std::ios::app : std::ios::trunc);
    SINKLAB_CHECK(out_.good(), "io::JsonlLog: cannot open '", path.string(), "' for writing");
  }

  void log(const LogRow& row) {
    // ordered_json keeps the caller's column order on the line.
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [name, v] : row) {
      SINKLAB_CHECK(!j.contains(name), "io::JsonlLog: key '", name, "' appears twice in a row for '", path_.string(),
                    "'");
      j[name] = v.json();
    }
    out_ << j.dump() << '\n';
    out_.flush();
    SINKLAB_CHECK(out_.good(), "io::JsonlLog: write to '", path_.string(), "' failed");
  }
  void log(std::initializer_list<std::pair<std::string, LogValue>> row) { log(LogRow(row)); }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace sinklab::io
