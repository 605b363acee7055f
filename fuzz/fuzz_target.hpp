// What every fuzz target shares. A target feeds arbitrary bytes to one reader; refusing them
// with sinklab::Error is the expected outcome, anything else (another exception, a crash, a
// sanitizer report, an assertion) is a finding. Built two ways (fuzz/CMakeLists.txt): with
// clang's libFuzzer for `make fuzz`, and with replay_main.cpp, which runs the seed corpus and
// every saved regression input through the same function in the ordinary test suite.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sinklab/core/error.hpp"

namespace sinklab_fuzz {

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs f, treating a sinklab::Error (a refused input) as success.
template <class F>
void refused_is_fine(F&& f) {
  try {
    f();
  } catch (const sinklab::Error&) {
  }
}

// An invariant of the reader itself (not of the input): abort so both drivers report it.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace sinklab_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);
