// The FP8-family launchers' own host-side check (the generic ones, shape, multiples, alignment and
// null pointers, are launch_checks.hpp's, which this includes).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "launch_checks.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::cuda::fp8_check {

inline void fp8_format(const char* fn, quant::ElementFormat f) {
  if (f != quant::ElementFormat::e4m3 && f != quant::ElementFormat::e5m2) {
    throw std::invalid_argument(std::string(fn) + ": format must be e4m3 or e5m2 (hybrid recipes: e4m3 for X and W, "
                                "e5m2 for dY)");
  }
}

}  // namespace nibble::cuda::fp8_check
