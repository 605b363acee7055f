// A fresh directory under the system's temporary folder for one test, removed with everything in
// it when the test ends.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace sinklab_test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "sinklab_test") {
    path = std::filesystem::temp_directory_path() /
           (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

}  // namespace sinklab_test
