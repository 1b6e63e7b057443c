// The kernels' A/B knobs: environment variables read once per process by the launchers (host code).
// Each call site keeps its value in a function-local static, so the environment is read once.
#pragma once
#include <cstdlib>
#include <cstring>

namespace nibble::cuda::knobs {

// Whether `var` is set to `value`; `fallback` when it is unset.
inline bool is(const char* var, const char* value, bool fallback) {
  const char* e = std::getenv(var);
  return e == nullptr ? fallback : std::strcmp(e, value) == 0;
}

// `var` as an integer (std::atoi: 0 for non-numbers); `fallback` when it is unset.
inline int integer(const char* var, int fallback) {
  const char* e = std::getenv(var);
  return e == nullptr ? fallback : std::atoi(e);
}

}  // namespace nibble::cuda::knobs
