// Layout of QuantizedTensor: element access, decode, and undoing rotations.

#include <stdexcept>
#include <string>

#include "nibble/format/bf16.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/quantizers.hpp"

namespace nibble::quant {

namespace {
int64_t code_bytes(int64_t rows, int64_t cols, ElementFormat f) {
  const int64_t n = rows * cols;
  return f == ElementFormat::bf16 ? 2 * n : f == ElementFormat::e2m1 ? (n + 1) / 2 : n;
}
}  // namespace

QuantizedTensor make_quantized_tensor(int64_t rows, int64_t cols, ElementFormat element,
                                      int64_t block_rows, int64_t block_cols, ScaleFormat scale_format,
                                      bool with_mask) {
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument("quantize: rows (" + std::to_string(rows) + ") and cols (" +
                                std::to_string(cols) + ") must both be positive");
  }
  QuantizedTensor q;
  q.rows = rows;
  q.cols = cols;
  q.element = element;
  q.codes.assign(static_cast<size_t>(code_bytes(rows, cols, element)), 0);
  q.block_rows = block_rows;
  q.block_cols = block_cols;
  q.scale_format = scale_format;
  const size_t nblocks = static_cast<size_t>((rows / block_rows) * (cols / block_cols));
  if (scale_format == ScaleFormat::fp32) q.scales_fp32.assign(nblocks, 1.0f);
  if (scale_format == ScaleFormat::e8m0 || scale_format == ScaleFormat::ue4m3) q.scale_codes.assign(nblocks, 0);
  if (with_mask) q.mask.assign(static_cast<size_t>((rows * cols + 7) / 8), 0);
  return q;
}

uint8_t QuantizedTensor::code_at(int64_t r, int64_t c) const {
  const int64_t i = r * cols + c;
  if (element == ElementFormat::e2m1) {
    const uint8_t byte = codes[static_cast<size_t>(i / 2)];
    return (i % 2 == 0) ? (byte & 0xF) : (byte >> 4);
  }
  return codes[static_cast<size_t>(i)];
}

void QuantizedTensor::set_code(int64_t r, int64_t c, uint8_t code) {
  const int64_t i = r * cols + c;
  if (element == ElementFormat::e2m1) {
    uint8_t& byte = codes[static_cast<size_t>(i / 2)];
    byte = (i % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0) | (code & 0xF))
                        : static_cast<uint8_t>((byte & 0x0F) | ((code & 0xF) << 4));
    return;
  }
  codes[static_cast<size_t>(i)] = code;
}

float QuantizedTensor::block_scale_at(int64_t r, int64_t c) const {
  if (scale_format == ScaleFormat::none) return 1.0f;
  const size_t b = static_cast<size_t>((r / block_rows) * block_grid_cols() + c / block_cols);
  switch (scale_format) {
    case ScaleFormat::fp32: return scales_fp32[b];
    case ScaleFormat::e8m0: return fmt::decode_e8m0(scale_codes[b]);
    case ScaleFormat::ue4m3: return fmt::decode_ue4m3(scale_codes[b]);
    case ScaleFormat::none: break;
  }
  return 1.0f;
}

bool QuantizedTensor::trusted(int64_t r, int64_t c) const {
  if (mask.empty()) return true;
  const int64_t i = r * cols + c;
  return (mask[static_cast<size_t>(i / 8)] >> (i % 8)) & 1;
}

float QuantizedTensor::value_at(int64_t r, int64_t c) const { return unscaled_value_at(r, c) * tensor_scale; }

float QuantizedTensor::unscaled_value_at(int64_t r, int64_t c) const {
  float v;
  if (element == ElementFormat::bf16) {
    const size_t i = static_cast<size_t>(2 * (r * cols + c));
    v = fmt::decode_bf16(static_cast<uint16_t>(codes[i] | (codes[i + 1] << 8)));
  } else {
    v = decode_element(element, code_at(r, c));
  }
  return v * block_scale_at(r, c);
}

std::vector<float> dequantize(const QuantizedTensor& q) {
  std::vector<float> out(static_cast<size_t>(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) out[static_cast<size_t>(r * q.cols + c)] = q.value_at(r, c);
  }
  return out;
}

std::vector<float> dequantize_original(const QuantizedTensor& q) {
  std::vector<float> out = dequantize(q);
  if (q.prescale != 1.0f) {
    for (float& v : out) v /= q.prescale;
  }
  if (q.rotation.size != 0) hadamard_transform(out.data(), q.rows, q.cols, q.rotation, /*inverse=*/true);
  return out;
}

std::vector<uint8_t> unpack_mask(const QuantizedTensor& q) {
  std::vector<uint8_t> out(static_cast<size_t>(q.rows * q.cols), 1);
  if (q.mask.empty()) return out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = (q.mask[i / 8] >> (i % 8)) & 1;
  return out;
}

const char* element_format_name(ElementFormat f) {
  switch (f) {
    case ElementFormat::bf16: return "bf16";
    case ElementFormat::e4m3: return "e4m3";
    case ElementFormat::e5m2: return "e5m2";
    case ElementFormat::e2m1: return "e2m1";
  }
  return "?";
}

const char* scale_format_name(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::none: return "none";
    case ScaleFormat::fp32: return "fp32";
    case ScaleFormat::e8m0: return "e8m0";
    case ScaleFormat::ue4m3: return "ue4m3";
  }
  return "?";
}

}  // namespace nibble::quant
