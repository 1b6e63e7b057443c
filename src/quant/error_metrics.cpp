// Quantization error metrics (definitions in error_metrics.hpp). Clipping and flushing are judged
// in the quantized domain, where the recipe's scales act; the error itself in the original domain,
// which is what a GEMM's caller sees.
#include "nibble/quant/error_metrics.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/quantizers.hpp"

namespace nibble::quant {

double saturation_threshold(ElementFormat f) {
  const int man_bits = f == ElementFormat::e4m3 ? 3 : f == ElementFormat::e5m2 ? 2 : f == ElementFormat::e2m1 ? 1 : -1;
  if (man_bits < 0) return std::numeric_limits<double>::infinity();
  const double fmax = element_max(f);
  const double ulp = std::ldexp(1.0, fmt::floor_log2(static_cast<float>(fmax)) - man_bits);
  return fmax + ulp / 2;
}

ErrorMetrics measure_quantization_error(const float* x, const QuantizedTensor& q) {
  if (x == nullptr && q.num_elements() > 0) {
    throw std::invalid_argument("quantization error: no input data; pass the tensor the quantization was made from");
  }
  const auto n = static_cast<size_t>(q.num_elements());
  const std::vector<float> xq = dequantize_original(q);

  // The quantized-domain input, rebuilt the way the quantizers build it: rotate, then prescale.
  std::vector<float> y(x, x + n);
  if (q.rotation.size != 0) hadamard_transform(y.data(), q.rows, q.cols, q.rotation, /*inverse=*/false);
  if (q.prescale != 1.0f) {
    for (float& v : y) v *= q.prescale;
  }

  ErrorMetrics m;
  m.elements = q.num_elements();
  m.produced_by = q.produced_by;
  const double threshold = saturation_threshold(q.element);
  const bool use_mask = q.has_mask();
  double err2 = 0.0, sig2 = 0.0, max_err = 0.0;
  int64_t finite = 0, clipped = 0, nonzero = 0, flushed = 0;
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) {
      const size_t i = static_cast<size_t>(r * q.cols + c);
      if (!std::isfinite(x[i])) {
        ++m.nonfinite;
        continue;
      }
      ++finite;
      const double xi = x[i];
      const double e = std::isfinite(xq[i]) ? std::fabs(xi - static_cast<double>(xq[i]))
                                            : std::numeric_limits<double>::infinity();
      if (!std::isfinite(xq[i])) ++m.poisoned;
      err2 += e * e;
      sig2 += xi * xi;
      if (e > max_err) max_err = e;

      // A rotation spreads one NaN over its whole block; such elements have no meaningful scale.
      if (!std::isfinite(y[i])) continue;
      const float unscaled = q.unscaled_value_at(r, c);
      if (y[i] != 0.0f) {
        ++nonzero;
        if (unscaled == 0.0f) ++flushed;
      }
      if (use_mask) {
        if (!q.trusted(r, c)) ++clipped;
      } else if (std::isfinite(threshold)) {
        const double scale = static_cast<double>(q.block_scale_at(r, c)) * q.tensor_scale;
        // A zero scale flushes the whole block (counted above), it does not saturate it.
        if (scale > 0.0 && std::fabs(static_cast<double>(y[i])) >= threshold * scale) ++clipped;
      }
    }
  }
  m.max_abs_err = max_err;
  if (err2 == 0.0) {
    m.rel_mse = 0.0;
    m.snr_db = std::numeric_limits<double>::infinity();
  } else {
    m.rel_mse = sig2 > 0.0 ? err2 / sig2 : std::numeric_limits<double>::infinity();
    m.snr_db = -10.0 * std::log10(m.rel_mse);
  }
  m.clipped_frac = finite ? static_cast<double>(clipped) / static_cast<double>(finite) : 0.0;
  m.zero_frac = nonzero ? static_cast<double>(flushed) / static_cast<double>(nonzero) : 0.0;
  return m;
}

ErrorMetrics quantization_error(Recipe recipe, const float* x, int64_t rows, int64_t cols,
                                const QuantOptions& options) {
  const QuantizedTensor q = quantize(recipe, x, rows, cols, options);
  return measure_quantization_error(x, q);
}

std::string nonfinite_note(const ErrorMetrics& m) {
  std::string out;
  if (m.nonfinite) out = std::to_string(m.nonfinite) + " non-finite inputs left out";
  if (m.poisoned)
    out += (out.empty() ? "" : "; ") + std::to_string(m.poisoned) +
           " finite inputs came back non-finite: a NaN or inf shared their block's scale";
  return out;
}

}  // namespace nibble::quant
