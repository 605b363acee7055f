#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sinklab/io/files.hpp"
#include "sinklab/io/metrics_log.hpp"

using namespace sinklab;
namespace fs = std::filesystem;

namespace {
fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("sinklab_log_" + std::to_string(::getpid()) + "_" + name);
}
std::vector<std::string> lines_of(const fs::path& p) {
  std::istringstream in(io::read_file_text(p));
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("metrics_log: CSV header once, escaping, missing cells, fixed columns, append") {
  const fs::path p = temp_file("m.csv");
  {
    io::CsvLog log(p);
    log.log({{"step", 1}, {"loss", 0.25}, {"variant", "vga, per-key"}});
    // Flushed per row: readable before the logger closes.
    CHECK(lines_of(p).size() == 2);
    log.log({{"step", 2u}, {"loss", 0.125f}});
    log.log({{"variant", "say \"hi\""}, {"step", int64_t{3}}, {"loss", std::nan("")}});
    CHECK_THROWS_WITH_AS(log.log({{"step", 4}, {"lr", 1e-3}}), doctest::Contains("column 'lr' is not in the header"),
                         Error);
  }
  auto l = lines_of(p);
  REQUIRE(l.size() == 4);
  CHECK(l[0] == "step,loss,variant");
  CHECK(l[1] == "1,0.25,\"vga, per-key\"");
  CHECK(l[2] == "2,0.125,");
  CHECK(l[3] == "3,nan,\"say \"\"hi\"\"\"");
  CHECK(io::csv_split(l[3]) == std::vector<std::string>{"3", "nan", "say \"hi\""});
  {
    io::CsvLog log(p, /*append=*/true);
    CHECK(log.columns() == std::vector<std::string>{"step", "loss", "variant"});
    log.log({{"loss", 1.0 / 3.0}, {"step", 5}});
  }
  l = lines_of(p);
  REQUIRE(l.size() == 5);
  CHECK(l[4] == "5,0.3333333333333333,");  // shortest round-trip form
  CHECK(std::stod(io::csv_split(l[4])[1]) == 1.0 / 3.0);
  fs::remove(p);
}

TEST_CASE("metrics_log: JSONL rows keep order; non-finite numbers become null") {
  const fs::path p = temp_file("m.jsonl");
  {
    io::JsonlLog log(p);
    log.log({{"step", 10}, {"loss", 1.5}, {"tag", "a\nb"}});
    log.log({{"step", 11}, {"loss", std::numeric_limits<double>::infinity()}});
    CHECK_THROWS_AS(log.log({{"x", 1}, {"x", 2}}), Error);
  }
  auto l = lines_of(p);
  REQUIRE(l.size() == 2);
  CHECK(l[0] == R"({"step":10,"loss":1.5,"tag":"a\nb"})");
  auto j = nlohmann::json::parse(l[1]);
  CHECK(j["step"] == 11);
  CHECK(j["loss"].is_null());
  fs::remove(p);
}

TEST_CASE("metrics_log: number reads a row's value by key; NaN for text or a missing key") {
  const sinklab::io::LogRow row{{"loss", 2.5}, {"step", int64_t{7}}, {"tag", std::string("a")}};
  CHECK(sinklab::io::number(row, "loss") == 2.5);
  CHECK(sinklab::io::number(row, "step") == 7.0);
  CHECK(std::isnan(sinklab::io::number(row, "tag")));
  CHECK(std::isnan(sinklab::io::number(row, "absent")));
}
