// The one exception type of the library and a check macro that builds its message lazily.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace sinklab {

// Thrown for bad shapes, bad configurations and corrupt files. The message names the
// operation or layer, the shapes involved and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
// Cold and never inlined: a check site is a test and a call, and the formatting code of the
// library's many checks is compiled small, off the hot paths (it is a good part of what a
// model's constructor would otherwise inline).
template <class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace sinklab

// SINKLAB_CHECK(cond, "op: ", a.shape(), " vs ", b.shape()) — message parts are only
// formatted when the check fails.
#define SINKLAB_CHECK(cond, ...)                        \
  do {                                                  \
    if (!(cond)) [[unlikely]]                           \
      ::sinklab::detail::fail(__VA_ARGS__);             \
  } while (0)
