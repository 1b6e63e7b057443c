// Hugging Face .safetensors: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer. Checked as the reference implementation checks it: offsets in range,
// non-overlapping and covering the buffer without holes, and end - begin == numel * dtype size.
// F32, F16, BF16, F64, U8, I8 and BOOL tensors load; other valid dtypes (I64, F8_E4M3, ...) are
// listed as skipped rather than failing the file, so a checkpoint with integer buffers still reads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/io/tensor.hpp"

namespace nibble::io {

// The reference implementation refuses headers above 100 MB; so do we.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype_tag;          // as written in the file, e.g. "BF16"
  std::optional<DType> dtype;     // empty when nibble does not load this dtype
  std::vector<int64_t> shape;
  uint64_t begin = 0;             // offsets relative to the start of the data buffer
  uint64_t end = 0;
};

struct SafetensorsIndex {
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  uint64_t data_start = 0;                // absolute file offset of the data buffer
};

// Validates a header against a data buffer of `data_size` bytes. `source` names the file in messages.
std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view json, uint64_t data_size,
                                                       std::string_view source);

// Reads only the header of a file (cheap for multi-gigabyte checkpoints).
SafetensorsIndex read_safetensors_index(const std::filesystem::path& path);
// Loads one entry of an index; throws std::invalid_argument for an entry whose dtype is not loaded.
Tensor read_safetensors_tensor(const std::filesystem::path& path, const SafetensorsIndex& index,
                               const SafetensorsEntry& entry);

struct SafetensorsContents {
  std::vector<Tensor> tensors;
  std::vector<std::string> skipped;  // "name (dtype I64 is not loaded)"
};
SafetensorsContents parse_safetensors(std::span<const uint8_t> bytes, std::string_view source);
SafetensorsContents read_safetensors(const std::filesystem::path& path);

// Writes tensors in the given order, data contiguous, header padded with spaces to 8 bytes.
// Tensor names must be unique, non-empty and not "__metadata__".
std::vector<uint8_t> encode_safetensors(std::span<const Tensor> tensors);
void write_safetensors(const std::filesystem::path& path, std::span<const Tensor> tensors);

// "F32" for DType::f32 and so on.
std::string_view safetensors_dtype_tag(DType d);

}  // namespace nibble::io
