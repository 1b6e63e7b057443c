// A stand-in for a GPU test binary, built without CUDA: the skip rules of gpu_skip.hpp and the gpu main
// (gpu_test_main.cpp) on a cudaGetDeviceCount answer given by NIBBLE_TEST_CUDA_ERROR (and
// NIBBLE_TEST_CUDA_DRIVER). tests/reliability/check_ctest_outcomes.py runs it under ctest, with the properties
// of the real gpu entries, and checks which outcomes ctest reports as Skipped, Failed or Passed.
// NIBBLE_STANDIN_HOST_FAILS=1 makes its host-only test fail.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../gpu_skip.hpp"

namespace {

using namespace nibble::testing;

TEST(GpuSkipStandin, HostOnly) {
  const char* fail = std::getenv("NIBBLE_STANDIN_HOST_FAILS");
  EXPECT_FALSE(fail != nullptr && std::string(fail) == "1") << "host-only test failing on purpose";
}

TEST(GpuSkipStandin, NeedsAGpu) {
  ASSERT_NE(std::getenv("NIBBLE_TEST_CUDA_ERROR"), nullptr)
      << "the stand-in needs NIBBLE_TEST_CUDA_ERROR: the cudaGetDeviceCount error it plays";
  NIBBLE_REQUIRE_GPU_CHECK(judge_device_count(with_injection({})));
  SUCCEED() << "a GPU is present: the GPU part would run";
}

}  // namespace
