// .safetensors reader and writer. The header is validated the way the reference implementation
// validates it, so a file we accept is one the Hugging Face library accepts, and vice versa for the
// files we write.
#include "nibble/io/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "nibble/io/binary_file.hpp"
#include "nibble/io/json_file.hpp"
#include "nibble/io/printable.hpp"

namespace nibble::io {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view source, const std::string& msg) {
  throw std::invalid_argument(std::string(source) + ": " + msg);
}

struct TagInfo {
  std::string_view tag;
  size_t size;
  std::optional<DType> dtype;
};

// Every dtype the format defines, so sizes can be checked even for tensors we do not load.
constexpr TagInfo kTags[] = {
    {"F32", 4, DType::f32},  {"F16", 2, DType::f16},   {"BF16", 2, DType::bf16}, {"F64", 8, DType::f64},
    {"U8", 1, DType::u8},    {"I8", 1, DType::i8},     {"BOOL", 1, DType::boolean},
    {"I16", 2, std::nullopt}, {"U16", 2, std::nullopt}, {"I32", 4, std::nullopt}, {"U32", 4, std::nullopt},
    {"I64", 8, std::nullopt}, {"U64", 8, std::nullopt}, {"F8_E4M3", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt},
};

const TagInfo* find_tag(std::string_view tag) {
  for (const auto& t : kTags) {
    if (t.tag == tag) return &t;
  }
  return nullptr;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

uint64_t parse_header_length(std::span<const uint8_t> first8, uint64_t file_size, std::string_view source) {
  if (file_size < 8 || first8.size() < 8) {
    fail(source, "too short to be a .safetensors file (" + std::to_string(file_size) + " bytes; need at least 8)");
  }
  const uint64_t n = read_u64_le(first8.data());
  if (n > kSafetensorsMaxHeaderBytes) {
    fail(source, "header length " + std::to_string(n) + " exceeds the 100 MB limit; the file is corrupt or not a "
                 ".safetensors file");
  }
  if (n > file_size - 8) {
    fail(source, "truncated: header claims " + std::to_string(n) + " bytes but only " +
                     std::to_string(file_size - 8) + " follow the length field");
  }
  if (n < 2) fail(source, "header of " + std::to_string(n) + " bytes cannot hold a JSON object");
  return n;
}

uint64_t as_u64(const json& v, std::string_view source, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    fail(source, what + " must be a non-negative integer");
  }
  return v.get<uint64_t>();
}

}  // namespace

std::string_view safetensors_dtype_tag(DType d) {
  for (const auto& t : kTags) {
    if (t.dtype == d) return t.tag;
  }
  throw std::logic_error("safetensors_dtype_tag: unknown DType");
}

std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view text, uint64_t data_size,
                                                       std::string_view source) {
  if (text.empty() || text.front() != '{') fail(source, "header does not start with '{'; not a .safetensors file");
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past double
    fail(source, "header is not valid JSON (" + json_error_detail(e) + ")");
  }
  if (!header.is_object()) fail(source, "header is not a JSON object");
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(source, "'__metadata__' must be an object of strings");
      continue;  // free-form; nibble does not interpret it
    }
    const std::string where = "tensor '" + printable(name) + "'";
    if (!info.is_object()) fail(source, where + ": entry is not an object");
    for (const auto& [key, _] : info.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        fail(source, where + ": unexpected field '" + printable(key) + "' (allowed: dtype, shape, data_offsets)");
      }
    }
    if (!info.contains("dtype") || !info["dtype"].is_string()) fail(source, where + ": missing string 'dtype'");
    if (!info.contains("shape") || !info["shape"].is_array()) fail(source, where + ": missing array 'shape'");
    if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      fail(source, where + ": 'data_offsets' must be [begin, end]");
    }
    SafetensorsEntry e;
    e.name = name;
    e.dtype_tag = info["dtype"].get<std::string>();
    const TagInfo* tag = find_tag(e.dtype_tag);
    if (!tag) fail(source, where + ": unknown dtype '" + printable(e.dtype_tag) + "'");
    e.dtype = tag->dtype;
    for (const auto& d : info["shape"]) {
      const uint64_t v = as_u64(d, source, where + ": every shape entry");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(source, where + ": shape overflows");
      e.shape.push_back(static_cast<int64_t>(v));
    }
    e.begin = as_u64(info["data_offsets"][0], source, where + ": data_offsets[0]");
    e.end = as_u64(info["data_offsets"][1], source, where + ": data_offsets[1]");
    if (e.begin > e.end) fail(source, where + ": data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
    if (e.end > data_size) {
      fail(source, where + ": data_offsets end " + std::to_string(e.end) + " is beyond the " +
                       std::to_string(data_size) + "-byte data buffer; the file is truncated or the header lies");
    }
    const int64_t n = checked_numel(e.shape, tag->size, std::numeric_limits<int64_t>::max(), std::string(source) + ": " + where);
    if (static_cast<uint64_t>(n) * tag->size != e.end - e.begin) {
      fail(source, where + ": shape " + shape_string(e.shape) + " of " + e.dtype_tag + " needs " +
                       std::to_string(static_cast<uint64_t>(n) * tag->size) + " bytes but data_offsets span " +
                       std::to_string(e.end - e.begin));
    }
    entries.push_back(std::move(e));
  }
  // The buffer must be tiled exactly: no overlaps (one byte read as two tensors) and no holes
  // (hidden data), the same rule the reference implementation enforces.
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (const auto& e : entries) {
    if (e.begin < cursor) fail(source, "tensor '" + e.name + "' overlaps the tensor before it in the data buffer");
    if (e.begin > cursor) {
      fail(source, "data buffer has a hole of " + std::to_string(e.begin - cursor) + " bytes before tensor '" +
                       e.name + "'; the header does not describe the file");
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    fail(source, "data buffer has " + std::to_string(data_size - cursor) +
                     " bytes that no tensor describes; the header does not match the file");
  }
  return entries;
}

SafetensorsIndex read_safetensors_index(const std::filesystem::path& path) {
  const std::string source = path.string();
  const uint64_t size = file_size_of(path);
  const auto first = read_file_range(path, 0, std::min<uint64_t>(size, 8));
  const uint64_t n = parse_header_length(first, size, source);
  const auto text = read_file_range(path, 8, n);
  SafetensorsIndex index;
  index.data_start = 8 + n;
  index.entries = parse_safetensors_header(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                                           size - index.data_start, source);
  return index;
}

static Tensor entry_tensor(const SafetensorsEntry& e, std::string_view source) {
  if (!e.dtype) {
    fail(source, "tensor '" + e.name + "' has dtype " + e.dtype_tag +
                     ", which nibble does not load (F32, F16, BF16, F64, U8, I8, BOOL)");
  }
  Tensor t;
  t.name = e.name;
  t.dtype = *e.dtype;
  t.shape = e.shape;
  return t;
}

Tensor read_safetensors_tensor(const std::filesystem::path& path, const SafetensorsIndex& index,
                               const SafetensorsEntry& entry) {
  Tensor t = entry_tensor(entry, path.string());
  t.bytes = read_file_range(path, index.data_start + entry.begin, entry.end - entry.begin);
  return t;
}

SafetensorsContents parse_safetensors(std::span<const uint8_t> bytes, std::string_view source) {
  const uint64_t n = parse_header_length(bytes.first(std::min<size_t>(bytes.size(), 8)), bytes.size(), source);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  const uint64_t data_start = 8 + n;
  SafetensorsContents out;
  for (const auto& e : parse_safetensors_header(text, bytes.size() - data_start, source)) {
    if (!e.dtype) {
      out.skipped.push_back(e.name + " (dtype " + e.dtype_tag + " is not loaded)");
      continue;
    }
    Tensor t = entry_tensor(e, source);
    t.bytes.assign(bytes.begin() + static_cast<ptrdiff_t>(data_start + e.begin),
                   bytes.begin() + static_cast<ptrdiff_t>(data_start + e.end));
    out.tensors.push_back(std::move(t));
  }
  return out;
}

SafetensorsContents read_safetensors(const std::filesystem::path& path) {
  const SafetensorsIndex index = read_safetensors_index(path);
  SafetensorsContents out;
  for (const auto& e : index.entries) {
    if (!e.dtype) {
      out.skipped.push_back(e.name + " (dtype " + e.dtype_tag + " is not loaded)");
      continue;
    }
    out.tensors.push_back(read_safetensors_tensor(path, index, e));
  }
  return out;
}

std::vector<uint8_t> encode_safetensors(std::span<const Tensor> tensors) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      throw std::invalid_argument("safetensors: tensor name '" + t.name + "' is reserved or empty; rename it");
    }
    if (!names.insert(t.name).second) {
      throw std::invalid_argument("safetensors: tensor name '" + t.name + "' appears twice; names must be unique");
    }
    const int64_t n = checked_numel(t.shape, dtype_size(t.dtype), std::numeric_limits<int64_t>::max(), t.name);
    if (t.bytes.size() != static_cast<uint64_t>(n) * dtype_size(t.dtype)) {
      throw std::invalid_argument("tensor '" + t.name + "': byte count does not match shape " + shape_string(t.shape));
    }
    header[t.name] = {{"dtype", safetensors_dtype_tag(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data buffer 8-byte aligned
  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_safetensors(const std::filesystem::path& path, std::span<const Tensor> tensors) {
  write_file_atomic(path, encode_safetensors(tensors));
}

}  // namespace nibble::io
