// When a gpu-labelled test may skip, and when it must fail. No CUDA header here: the rules are plain
// code, so a CPU-built stand-in (tests/reliability/gpu_skip_standin.cpp) runs them with an
// injected error code and tests/reliability/check_ctest_outcomes.py checks what ctest makes of each outcome.
//
// Only "there is no GPU" skips: cudaGetDeviceCount returning cudaErrorNoDevice (a driver without a
// device), or cudaErrorInsufficientDriver when no NVIDIA driver library (libcuda.so.1) is installed
// at all (what the CUDA runtime answers on a machine without a driver, such as CI). Every other error,
// cudaErrorInsufficientDriver with a driver present included (a driver older than the runtime), fails
// the test: a broken CUDA install must not read as "no GPU".
//
// A binary in which a test skipped for want of a GPU and none failed exits with
// NIBBLE_GPU_SKIP_EXIT_CODE (default 77); ctest's SKIP_RETURN_CODE 77 reports it Skipped, while a crash
// or a failed test (another exit code) stays Failed.
// Injection, for the stand-in and for checking a real GPU binary: NIBBLE_TEST_CUDA_ERROR=<code> replaces
// cudaGetDeviceCount's answer, NIBBLE_TEST_CUDA_DRIVER=present|absent whether libcuda.so.1 loads.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace nibble::testing {

// The cudaError_t values the rules name (driver_types.h; gpu_test_support.hpp checks them against it).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;
inline constexpr int kGpuSkipExitCode = 77;

// What cudaGetDeviceCount answered, and whether the driver library loads.
struct DeviceCountAnswer {
  int error = kCudaSuccess;
  std::string error_name;  // cudaGetErrorName's, or "injected"
  int count = 0;
  bool driver_library_present = true;
};

enum class GpuVerdict { run, skip, fail };

struct GpuCheck {
  GpuVerdict verdict;
  std::string why;
};

inline GpuCheck judge_device_count(const DeviceCountAnswer& a) {
  const std::string what = "cudaGetDeviceCount returned " + a.error_name + " (" + std::to_string(a.error) + ")";
  if (a.error == kCudaSuccess) {
    if (a.count > 0) return {GpuVerdict::run, ""};
    return {GpuVerdict::skip, "no CUDA device (cudaGetDeviceCount found 0)"};
  }
  if (a.error == kCudaErrorNoDevice) return {GpuVerdict::skip, "no CUDA device (" + what + ")"};
  if (a.error == kCudaErrorInsufficientDriver && !a.driver_library_present) {
    return {GpuVerdict::skip, "no CUDA device (no NVIDIA driver: libcuda.so.1 does not load)"};
  }
  return {GpuVerdict::fail, "CUDA is broken: " + what +
                                (a.error == kCudaErrorInsufficientDriver
                                     ? "; libcuda.so.1 loads, so the driver is older than the CUDA runtime"
                                     : "") +
                                "; only a machine without a GPU may skip the GPU tests"};
}

// The answer with NIBBLE_TEST_CUDA_ERROR / NIBBLE_TEST_CUDA_DRIVER applied, if set.
inline DeviceCountAnswer with_injection(DeviceCountAnswer a) {
  if (const char* e = std::getenv("NIBBLE_TEST_CUDA_ERROR"); e != nullptr && *e != '\0') {
    a.error = std::atoi(e);
    a.error_name = "injected";
    a.count = a.error == kCudaSuccess ? 1 : 0;
  }
  if (const char* d = std::getenv("NIBBLE_TEST_CUDA_DRIVER"); d != nullptr && *d != '\0') {
    a.driver_library_present = std::string(d) != "absent";
  }
  return a;
}

// Set when a test skipped for want of a GPU; read by gpu_test_exit_code.
inline bool& skipped_for_no_gpu() {
  static bool skipped = false;
  return skipped;
}

// main's exit code: gtest's when a test failed, the skip code when a test skipped for want of a GPU.
inline int gpu_test_exit_code(int gtest_rc) {
  if (gtest_rc != 0 || !skipped_for_no_gpu()) return gtest_rc;
  int code = kGpuSkipExitCode;
  if (const char* c = std::getenv("NIBBLE_GPU_SKIP_EXIT_CODE"); c != nullptr && *c != '\0') code = std::atoi(c);
  std::printf("no CUDA device: the GPU tests skipped; exit code %d\n", code);
  return code;
}

}  // namespace nibble::testing

// At the top of every GPU test body, with the probe's GpuCheck: run, skip (saying why) or fail.
#define NIBBLE_REQUIRE_GPU_CHECK(check_expr)                                                   \
  do {                                                                                         \
    const ::nibble::testing::GpuCheck nibble_gpu_check_ = (check_expr);                        \
    if (nibble_gpu_check_.verdict == ::nibble::testing::GpuVerdict::fail) {                    \
      GTEST_FAIL() << nibble_gpu_check_.why;                                                   \
    }                                                                                          \
    if (nibble_gpu_check_.verdict == ::nibble::testing::GpuVerdict::skip) {                    \
      ::nibble::testing::skipped_for_no_gpu() = true;                                          \
      std::printf("%s: skipping %s\n", nibble_gpu_check_.why.c_str(),                         \
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());            \
      GTEST_SKIP() << nibble_gpu_check_.why;                                                   \
    }                                                                                          \
  } while (0)
