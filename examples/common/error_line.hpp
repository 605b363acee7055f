// The line a program prints when it stops on an error: "<program>: <message>". The library's
// checks in a study already name it ("exoformer: --variants: ..."), so the name is not repeated.
#pragma once
#include <cstdio>
#include <exception>
#include <string>

namespace examples {

inline void print_error(const char* program, const std::exception& e) {
  const std::string what = e.what(), prefix = std::string(program) + ":";
  std::fprintf(stderr, "%s%s\n", what.rfind(prefix, 0) == 0 ? "" : (prefix + " ").c_str(), what.c_str());
}

}  // namespace examples
