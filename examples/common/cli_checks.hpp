// Flag checks for the examples' command lines. CLI11's PositiveNumber and NonNegativeNumber
// answer a bad value with the whole range, DBL_MAX written out in 300 digits; these say what
// was expected and what was given: "--steps: expected a positive number, got 'abc'".
#pragma once
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace examples {

namespace detail {
inline CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool parsed = !s.empty() && end && *end == '\0' && errno == 0 && std::isfinite(v);
        if (parsed && (allow_zero ? v >= 0 : v > 0)) return {};
        return std::string("expected a ") + (allow_zero ? "non-negative" : "positive") + " number, got '" + s + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
}  // namespace detail

inline const CLI::Validator Positive = detail::number_check(false);
inline const CLI::Validator NonNegative = detail::number_check(true);

}  // namespace examples
