// "Readable by other tools": a file sinklab writes is read back by scripts/check_safetensors.py,
// an independent stdlib-only Python reader (skipped when python3 is not installed).
#include <doctest/doctest.h>

#include "skip.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "sinklab/io/safetensors.hpp"

using namespace sinklab;

TEST_CASE("safetensors: a sinklab file is read by an independent Python reader" * sinklab_test::optional()) {
  if (std::system("python3 -c 'import json, struct' > /dev/null 2>&1") != 0)
    SINKLAB_SKIP("python3 not found (apt-get install python3)");
  const auto script = std::filesystem::path(__FILE__).parent_path().parent_path() / "scripts" / "check_safetensors.py";
  REQUIRE(std::filesystem::exists(script));
  const auto dir = std::filesystem::temp_directory_path() / (std::string("sinklab_interop_").append(std::to_string(::getpid())));
  std::filesystem::create_directories(dir);
  const auto file = dir / "model.safetensors";
  io::save_safetensors<float>(file, {{"layers.0.w", Tensor<float>::from({2, 3}, {1.5f, -2.f, 0.25f, 4.f, 5.f, -6.f})},
                                     {"bias", Tensor<float>::from({2}, {0.5f, -0.5f})}});
  std::string cmd = "python3 '";
  cmd.append(script.string()).append("' '").append(file.string()).append("' 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = pclose(p);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("OK: 2 tensors") != std::string::npos);
  CHECK(out.find("layers.0.w: F32 [2, 3] [1.5, -2.0, 0.25, 4.0, 5.0, -6.0]") != std::string::npos);
  CHECK(out.find("bias: F32 [2] [0.5, -0.5]") != std::string::npos);
  std::filesystem::remove_all(dir);
}
