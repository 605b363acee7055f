// Test cases that cannot run on this machine (data not fetched, a tool or an ISA missing) say
// why and make their CTest entry report *skipped* instead of *passed*:
//
//   TEST_CASE("brown: the real corpus" * sinklab_test::optional()) {
//     if (!have_corpus) SINKLAB_SKIP("Brown corpus not present (run scripts/fetch-data.sh brown)");
//     ...
//   }
//
// optional() puts the case in the doctest suite "optional"; tests/CMakeLists.txt runs those
// cases as a CTest entry of their own (<test>.optional) so the other cases of the executable
// still report passed. The shared main returns 77 (CTest's SKIP_RETURN_CODE) when nothing failed
// and a case skipped.
#pragma once
#include <doctest/doctest.h>

namespace sinklab_test {

inline bool& skipped() {
  static bool s = false;
  return s;
}

inline doctest::test_suite optional() { return doctest::test_suite("optional"); }

}  // namespace sinklab_test

#define SINKLAB_SKIP(...)                    \
  do {                                       \
    MESSAGE("skipped: ", __VA_ARGS__);       \
    ::sinklab_test::skipped() = true;        \
    return;                                  \
  } while (0)
