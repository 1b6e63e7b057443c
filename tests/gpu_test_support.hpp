// Shared by every gpu-labelled test: skip cleanly (and say why) when no CUDA device is present.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

namespace nibble::testing {

inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace nibble::testing

// Use at the top of every GPU test body.
#define NIBBLE_REQUIRE_GPU()                                                   \
  do {                                                                         \
    if (!::nibble::testing::cuda_device_present()) {                           \
      std::printf("no CUDA device: skipping %s\n",                            \
                  ::testing::UnitTest::GetInstance()->current_test_info()->name()); \
      GTEST_SKIP() << "no CUDA device";                                        \
    }                                                                          \
  } while (0)
