// main() of every gpu-labelled test binary: GoogleTest's, except that a run in which a test skipped for
// want of a GPU (and none failed) exits with the skip code ctest reports as Skipped (gpu_skip.hpp).
#include <gtest/gtest.h>

#include "gpu_skip.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ::nibble::testing::gpu_test_exit_code(RUN_ALL_TESTS());
}
