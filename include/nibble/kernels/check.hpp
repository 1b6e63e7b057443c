// Every CUDA runtime and cuBLASLt call is checked; a failure throws with the call, file and line,
// and an out-of-memory error says how much was asked for where the caller knows it.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace nibble::cuda {

struct CudaError : std::runtime_error {
  cudaError_t code;
  CudaError(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
};
struct CublasError : std::runtime_error {
  cublasStatus_t code;
  CublasError(cublasStatus_t c, const std::string& what) : std::runtime_error(what), code(c) {}
};

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e != cudaSuccess) {
    throw CudaError(e, std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                           ") in " + expr + " at " + file + ":" + std::to_string(line));
  }
}
inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw CublasError(s, std::string("cuBLASLt error ") + cublasLtGetStatusName(s) + " (" +
                             cublasLtGetStatusString(s) + ") in " + expr + " at " + file + ":" +
                             std::to_string(line));
  }
}

}  // namespace nibble::cuda

#define NIBBLE_CUDA_CHECK(expr) ::nibble::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define NIBBLE_CUBLAS_CHECK(expr) ::nibble::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations immediately.
#define NIBBLE_CHECK_LAUNCH() NIBBLE_CUDA_CHECK(cudaGetLastError())
