// The output directory of an experiment and what it records about itself.
//
//   out/run.json                   experiment, settings, seeds, variants, library version, git
//                                  hash (when known), start time, command line
//   out/runs/<variant>/seed<s>/    one run: run.json, metrics.jsonl, metrics.csv,
//                                  checkpoint*.safetensors while training, final.safetensors and
//                                  result.json once finished (result.json marks a run done)
//
// An existing non-empty directory is never overwritten silently: without --resume or --force
// prepare_output() refuses. --force replaces only a directory that holds a previous run
// (its run.json), never an arbitrary folder; --resume requires the same experiment and
// settings as the interrupted matrix (flags that do not change results may differ).
#pragma once
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "sinklab/core/config.hpp"
#include "sinklab/core/error.hpp"
#include "sinklab/io/files.hpp"

namespace sinklab::experiment {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

inline std::string library_version() {
  return std::to_string(SINKLAB_VERSION_MAJOR) + "." + std::to_string(SINKLAB_VERSION_MINOR) + "." +
         std::to_string(SINKLAB_VERSION_PATCH);
}

// The source tree's commit, "+dirty" when it has uncommitted changes; empty when unknown
// (a build outside a git checkout, or no git). The examples' CMake passes SINKLAB_SOURCE_DIR.
inline std::string git_hash() {
#ifdef SINKLAB_SOURCE_DIR
  auto run = [](const std::string& cmd) {
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[256];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      if (::pclose(p) != 0) return std::string();
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  const std::string git = "git -C '" + std::string(SINKLAB_SOURCE_DIR) + "' ";
  std::string hash = run(git + "rev-parse HEAD 2>/dev/null");
  if (!hash.empty() && !run(git + "status --porcelain --untracked-files=no 2>/dev/null").empty()) hash += "+dirty";
  return hash;
#else
  return {};
#endif
}

inline std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline Json read_json(const fs::path& path) {
  try {
    return Json::parse(io::read_file_text(path));
  } catch (const nlohmann::json::exception& e) {
    sinklab::detail::fail("experiment: '", path.string(), "' is not valid JSON: ", e.what());
  }
}

inline void write_json(const fs::path& path, const Json& j) { io::write_file_atomically(path, j.dump(2) + "\n"); }

// Summarize: read what a matrix left in the folder, train nothing (the settings are checked as
// on Resume, and the folder must hold a matrix).
enum class OutputMode { Fresh, Resume, Force, Summarize };

// Makes `dir` ready for an experiment; on Resume returns the recorded run.json (empty when the
// directory holds none yet, i.e. a first run started with --resume).
inline Json prepare_output(const fs::path& dir, OutputMode mode, const std::string& experiment, const Json& settings,
                           const std::set<std::string>& free_settings = {}) {
  const bool exists = fs::exists(dir);
  SINKLAB_CHECK(!exists || fs::is_directory(dir), experiment, ": --out '", dir.string(),
                "' exists and is not a directory");
  const bool empty = !exists || fs::is_empty(dir);
  const fs::path meta = dir / "run.json";
  SINKLAB_CHECK(mode != OutputMode::Summarize || !empty, experiment, ": --summarize: --out '", dir.string(),
                "' holds no runs to summarize");
  if (!empty) {
    switch (mode) {
      case OutputMode::Fresh:
        sinklab::detail::fail(experiment, ": --out '", dir.string(),
                              "' is not empty; pass --resume to continue the run there, --force to replace it, "
                              "or choose another --out");
      case OutputMode::Force:
        SINKLAB_CHECK(fs::exists(meta), experiment, ": --force replaces only a previous run directory (one with ",
                      "run.json), but '", dir.string(), "' has none; choose another --out");
        for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
        break;
      case OutputMode::Resume:
      case OutputMode::Summarize: {
        const std::string flag = mode == OutputMode::Resume ? "--resume" : "--summarize";
        SINKLAB_CHECK(fs::exists(meta), experiment, ": ", flag, ": '", dir.string(), "' has no run.json, so it holds no ",
                      mode == OutputMode::Resume ? "run to continue" : "runs to summarize");
        Json old = read_json(meta);
        SINKLAB_CHECK(old.value("experiment", "") == experiment, experiment, ": ", flag, ": '", dir.string(),
                      "' holds a run of '", old.value("experiment", "?"), "'");
        std::string diff;
        const Json& was = old["settings"];
        for (const auto& [k, v] : settings.items())
          if (!free_settings.count(k) && (!was.contains(k) || was[k] != v))
            diff += "\n  " + k + ": was " + (was.contains(k) ? was[k].dump() : "unset") + ", now " + v.dump();
        for (const auto& [k, v] : was.items())
          if (!free_settings.count(k) && !settings.contains(k)) diff += "\n  " + k + ": was " + v.dump() + ", now unset";
        SINKLAB_CHECK(diff.empty(), experiment, ": ", flag, ": the settings differ from the run in '", dir.string(),
                      "':", diff,
                      mode == OutputMode::Resume ? "\n(use the same flags, or --force to start over)"
                                                 : "\n(use the flags the runs were trained with)");
        return old;
      }
    }
  }
  fs::create_directories(dir);
  return Json();
}

// The experiment-level run.json.
inline Json provenance(const std::string& experiment, const Json& settings, int argc = 0, char** argv = nullptr) {
  Json j;
  j["experiment"] = experiment;
  j["settings"] = settings;
  j["library_version"] = library_version();
  const std::string git = git_hash();
  j["git"] = git.empty() ? Json(nullptr) : Json(git);
  j["started"] = utc_now();
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  j["command"] = cmd;
  return j;
}

}  // namespace sinklab::experiment
