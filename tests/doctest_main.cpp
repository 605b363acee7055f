// The main every tests/test_*.cpp links: doctest's, plus exit code 77 (CTest: skipped) when no
// case failed and one could not run here (see skip.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "skip.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  return rc == 0 && sinklab_test::skipped() ? 77 : rc;
}
