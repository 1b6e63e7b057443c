// Exact MXFP8 -> BF16 decode of one element, host + device (the GEMM emulation path of docs/spec.md §4).
// Not in nibble::quant's headers (its decode_to_bf16_unscaled works on whole QuantizedTensors), so it
// lives here; the CPU side of the tests calls this same function.
//   bf16 = BF16(decode_e4m3(code) * 2^(scale - 127)); the product of a 4-significant-bit E4M3 value and
//   a power of two is exact in BF16 unless it leaves BF16's normal range (|k| near 127).
//   NaN code or NaN scale (0xFF) -> the canonical quiet NaN 0x7FC0 (spelled out, so the sign of a
//   NaN product, which differs between CPUs and GPUs, never shows).
#pragma once
#include "nibble/format/bf16.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"

namespace nibble::cuda {

inline constexpr uint16_t kBf16CanonicalNan = 0x7FC0;

NIBBLE_HD constexpr uint16_t mxfp8_decode_bf16(uint8_t code, uint8_t scale) {
  if (scale == fmt::kE8M0Nan || (code & 0x7F) == 0x7F) return kBf16CanonicalNan;
  return fmt::encode_bf16(fmt::decode_e4m3(code) * fmt::decode_e8m0(scale));
}

static_assert(mxfp8_decode_bf16(0x38, 127) == 0x3F80, "E4M3 1.0 at scale 2^0 is BF16 1.0");
static_assert(mxfp8_decode_bf16(0x7E, 128) == 0x4460, "448 * 2 = 896");

}  // namespace nibble::cuda
