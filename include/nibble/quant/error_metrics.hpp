// How much a recipe changes a tensor: the numbers `nibble error` reports.
//
// Definitions (x = input, xq = the dequantized tensor in the ORIGINAL domain, rotations undone;
// y = x in the QUANTIZED domain, i.e. after the recipe's rotation along cols and its prescale,
// which is where scales and element codes act). Sums are accumulated in double.
//   rel_mse      = sum((x - xq)^2) / sum(x^2).  0 when exact; +inf when x is all zero but xq is not.
//   snr_db       = -10 log10(rel_mse); +inf when exact.
//   max_abs_err  = max |x - xq|.
//   clipped_frac = fraction of elements the quantizer saturated. With a trust mask (quartet
//                  forward) an element is clipped when its mask bit is 0 (|y / s| >= 6, docs/spec.md §3).
//                  Otherwise it is clipped when |y| >= (fmax + ulp(fmax)/2) * block_scale *
//                  tensor_scale: round-to-nearest without the format's range limit would have
//                  produced a magnitude above fmax (E4M3 464, E5M2 61440, E2M1 7 in scaled units),
//                  so saturation, not rounding, decided the code. bf16 never clips.
//   zero_frac    = (elements with y != 0 whose quantized value is 0) / (elements with y != 0):
//                  the non-zero inputs the recipe flushed to zero.
// Non-finite inputs (NaN, inf) are left out of every metric and counted in `nonfinite`. A finite
// input that comes back non-finite (a NaN block scale poisoned by a neighbour) counts as an
// infinite error, so it cannot hide, and is counted in `poisoned`.
#pragma once
#include <cstdint>
#include <string>

#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/recipe.hpp"

namespace nibble::quant {

struct ErrorMetrics {
  double rel_mse = 0.0;
  double snr_db = 0.0;
  double max_abs_err = 0.0;
  double clipped_frac = 0.0;
  double zero_frac = 0.0;
  int64_t elements = 0;
  int64_t nonfinite = 0;
  int64_t poisoned = 0;  // finite inputs whose dequantized value is not finite
  std::string produced_by;  // the quantizer that produced q (QuantizedTensor::produced_by)
};

// "" when every input was finite and came back finite; else what was left out and what came back
// non-finite, in words ("1 non-finite inputs left out; 31 finite inputs came back non-finite: ...").
std::string nonfinite_note(const ErrorMetrics& m);

// Metrics of an existing quantization `q` of x (rows x cols, row-major, the same x q was made from).
ErrorMetrics measure_quantization_error(const float* x, const QuantizedTensor& q);

// Quantizes x with `recipe` and measures it. Throws std::invalid_argument (from quantize) when the
// recipe's blocks do not divide the shape.
ErrorMetrics quantization_error(Recipe recipe, const float* x, int64_t rows, int64_t cols,
                                const QuantOptions& options = {});

// The largest scaled magnitude that still rounds to a finite code below saturation:
// fmax + ulp(fmax)/2 (E4M3 464, E5M2 61440, E2M1 7); +inf for bf16.
double saturation_threshold(ElementFormat f);

}  // namespace nibble::quant
