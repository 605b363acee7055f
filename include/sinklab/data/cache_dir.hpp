// Where sinklab keeps downloaded data sets: ${SINKLAB_DATA:-$HOME/.cache/sinklab}
// (scripts/fetch-data.sh fills it).
#pragma once
#include <cstdlib>
#include <filesystem>

namespace sinklab::data {

inline std::filesystem::path data_cache_dir() {
  if (const char* d = std::getenv("SINKLAB_DATA"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : ".") / ".cache" / "sinklab";
}

}  // namespace sinklab::data
