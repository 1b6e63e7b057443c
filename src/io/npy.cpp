// .npy reader and writer. The header is a Python dict literal; we parse exactly the subset NumPy
// writes ({'descr': str, 'fortran_order': bool, 'shape': tuple of ints}) and reject anything else
// instead of guessing.
#include "nibble/io/tensor.hpp"

#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "nibble/io/binary_file.hpp"
#include "nibble/io/printable.hpp"

namespace nibble::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(std::string_view source, const std::string& msg) {
  throw std::invalid_argument(std::string(source) + ": " + msg);
}

struct NpyPreamble {
  int major = 0;
  uint64_t header_len = 0;
  uint64_t header_start = 0;  // offset of the dict text
};

// Magic, version and header length: the first 10 (v1) or 12 (v2, v3) bytes.
NpyPreamble parse_preamble(std::span<const uint8_t> b, uint64_t file_size, std::string_view source) {
  if (b.size() < kMagicLen + 2 || std::memcmp(b.data(), kMagic, kMagicLen) != 0) {
    fail(source, "not a .npy file (missing the \\x93NUMPY magic); save it with numpy.save");
  }
  NpyPreamble p;
  p.major = b[6];
  const int minor = b[7];
  if (p.major < 1 || p.major > 3 || minor != 0) {
    fail(source, "unsupported .npy version " + std::to_string(p.major) + "." + std::to_string(minor) +
                     "; nibble reads versions 1.0, 2.0 and 3.0");
  }
  const size_t len_bytes = p.major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes) fail(source, "truncated .npy preamble (file has " + std::to_string(file_size) + " bytes)");
  for (size_t i = 0; i < len_bytes; ++i) p.header_len |= static_cast<uint64_t>(b[8 + i]) << (8 * i);
  p.header_start = 8 + len_bytes;
  if (p.header_len > kNpyMaxHeaderBytes) {
    fail(source, "header claims " + std::to_string(p.header_len) + " bytes, above the " +
                     std::to_string(kNpyMaxHeaderBytes) + "-byte limit; the file is corrupt or not a tensor");
  }
  if (p.header_len > file_size - p.header_start) {
    fail(source, "truncated: header claims " + std::to_string(p.header_len) + " bytes but only " +
                     std::to_string(file_size - p.header_start) + " follow the preamble");
  }
  return p;
}

struct NpyHeader {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

// A cursor over the dict text with just enough Python-literal syntax for NumPy's headers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  NpyHeader parse() {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<int64_t>> shape;
    skip_ws();
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string("a dict key");
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (descr) bad("key 'descr' appears twice");
        if (peek() == '[') bad("structured dtypes (record arrays) are not supported; save a plain float32 array");
        descr = parse_string("the 'descr' value");
      } else if (key == "fortran_order") {
        if (fortran) bad("key 'fortran_order' appears twice");
        fortran = parse_bool();
      } else if (key == "shape") {
        if (shape) bad("key 'shape' appears twice");
        shape = parse_shape();
      } else {
        bad("unexpected key '" + printable(key) + "'; a .npy header has exactly 'descr', 'fortran_order' and 'shape'");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;  // '}'
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c != ' ' && c != '\n' && c != '\t' && c != '\r') bad("unexpected text after the header dict");
    }
    if (s_.empty() || s_.back() != '\n') bad("header does not end with a newline; the file is not a valid .npy");
    if (!descr) bad("header has no 'descr' (dtype)");
    if (!fortran) bad("header has no 'fortran_order'");
    if (!shape) bad("header has no 'shape'");
    if (*fortran) {
      fail(source_, "array is stored in Fortran (column-major) order; save it with "
                    "numpy.save(path, numpy.ascontiguousarray(a))");
    }
    return NpyHeader{dtype_from_descr(*descr), std::move(*shape)};
  }

 private:
  [[noreturn]] void bad(const std::string& msg) const {
    fail(source_, "malformed .npy header (" + msg + ") at character " + std::to_string(pos_));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string(const char* what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad(std::string("expected a quoted string for ") + what);
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') bad("escape sequences are not expected in a .npy header");
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) bad("unterminated string");
    ++pos_;
    return out;
  }
  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("'fortran_order' must be True or False");
  }
  std::vector<int64_t> parse_shape() {
    expect('(');
    std::vector<int64_t> dims;
    bool need_comma_for_single = true;
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("shape entries must be non-negative integers");
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const uint64_t digit = static_cast<uint64_t>(peek() - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
          bad("a shape dimension overflows 64 bits");
        }
        v = v * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal, written by old NumPy
      dims.push_back(static_cast<int64_t>(v));
      if (dims.size() > 64) bad("more than 64 dimensions (NumPy's own limit)");
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        need_comma_for_single = false;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in the shape tuple");
      // "(5)" is an int in Python, not a tuple; NumPy always writes "(5,)".
      if (dims.size() == 1 && need_comma_for_single) bad("a 1-D shape must be written '(n,)'");
    }
    ++pos_;
    return dims;
  }
  DType dtype_from_descr(const std::string& d) const {
    if (d == "<f4") return DType::f32;
    if (d == "<f2") return DType::f16;
    if (d == "<f8") return DType::f64;
    if (d == "|u1" || d == "<u1" || d == ">u1") return DType::u8;
    if (d == "|i1" || d == "<i1" || d == ">i1") return DType::i8;
    if (d == "|b1") return DType::boolean;
    if (!d.empty() && d[0] == '>') {
      fail(source_, "dtype '" + printable(d) + "' is big-endian; convert with a.astype('<" + printable(d.substr(1)) +
                        "') before saving");
    }
    fail(source_, "dtype '" + printable(d) + "' is not supported; nibble reads '<f4' (float32), '<f2', '<f8' and one-byte "
                  "'|u1', '|i1', '|b1': convert with a.astype(numpy.float32)");
  }

  std::string_view s_;
  std::string_view source_;
  size_t pos_ = 0;
};

Tensor parse_with_size(std::span<const uint8_t> prefix, uint64_t file_size, std::string_view source,
                       uint64_t* data_offset, uint64_t* data_bytes, NpyHeader* header) {
  const NpyPreamble p = parse_preamble(prefix, file_size, source);
  if (prefix.size() < p.header_start + p.header_len) fail(source, "truncated header");
  const std::string_view text(reinterpret_cast<const char*>(prefix.data() + p.header_start), p.header_len);
  *header = HeaderParser(text, source).parse();
  *data_offset = p.header_start + p.header_len;
  const uint64_t available = file_size - *data_offset;
  const size_t esize = dtype_size(header->dtype);
  // Checked against the bytes present before anything is allocated.
  const int64_t n = checked_numel(header->shape, esize, std::numeric_limits<int64_t>::max(), source);
  *data_bytes = static_cast<uint64_t>(n) * esize;
  if (*data_bytes != available) {
    fail(source, "shape " + shape_string(header->shape) + " of " + std::string(dtype_name(header->dtype)) + " needs " +
                     std::to_string(*data_bytes) + " data bytes but the file has " + std::to_string(available) +
                     " after the header; the header lies or the file was modified");
  }
  Tensor t;
  t.dtype = header->dtype;
  t.shape = header->shape;
  return t;
}

std::string header_text(const Tensor& t, size_t preamble_len) {
  std::string descr;
  switch (t.dtype) {
    case DType::f32: descr = "<f4"; break;
    case DType::f16: descr = "<f2"; break;
    case DType::f64: descr = "<f8"; break;
    case DType::u8: descr = "|u1"; break;
    case DType::i8: descr = "|i1"; break;
    case DType::boolean: descr = "|b1"; break;
    case DType::bf16:
      throw std::invalid_argument("tensor '" + t.name + "': .npy has no bfloat16 dtype; write it as float32 "
                                  "(exact) or to a .safetensors file");
  }
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_string(t.shape) + ", }";
  // Pad with spaces so the data starts on a 64-byte boundary, as NumPy does; end with a newline.
  const size_t total = preamble_len + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  return h;
}

}  // namespace

Tensor parse_npy(std::span<const uint8_t> bytes, std::string_view source) {
  uint64_t offset = 0, count = 0;
  NpyHeader header;
  Tensor t = parse_with_size(bytes, bytes.size(), source, &offset, &count, &header);
  t.bytes.assign(bytes.begin() + static_cast<ptrdiff_t>(offset), bytes.begin() + static_cast<ptrdiff_t>(offset + count));
  return t;
}

namespace {
// Reads the preamble and header only; the data's claimed size is verified against the file.
Tensor read_header_only(const std::filesystem::path& path, uint64_t* offset, uint64_t* count) {
  const std::string source = path.string();
  const uint64_t size = file_size_of(path);
  const uint64_t pre = std::min<uint64_t>(size, 12);
  std::vector<uint8_t> prefix = read_file_range(path, 0, pre);
  const NpyPreamble p = parse_preamble(prefix, size, source);
  prefix = read_file_range(path, 0, p.header_start + p.header_len);
  NpyHeader header;
  return parse_with_size(prefix, size, source, offset, count, &header);
}
}  // namespace

Tensor read_npy_header(const std::filesystem::path& path) {
  uint64_t offset = 0, count = 0;
  return read_header_only(path, &offset, &count);
}

Tensor read_npy(const std::filesystem::path& path) {
  uint64_t offset = 0, count = 0;
  Tensor t = read_header_only(path, &offset, &count);
  t.bytes = read_file_range(path, offset, count);
  return t;
}

std::vector<uint8_t> encode_npy(const Tensor& t) {
  const int64_t n = checked_numel(t.shape, dtype_size(t.dtype), std::numeric_limits<int64_t>::max(), t.name);
  if (t.bytes.size() != static_cast<uint64_t>(n) * dtype_size(t.dtype)) {
    throw std::invalid_argument("tensor '" + t.name + "': byte count does not match shape " + shape_string(t.shape));
  }
  std::string h = header_text(t, 10);
  size_t preamble = 10;
  int major = 1;
  if (h.size() > 65535) {
    h = header_text(t, 12);
    preamble = 12;
    major = 2;
  }
  std::vector<uint8_t> out(preamble + h.size() + t.bytes.size());
  std::memcpy(out.data(), kMagic, kMagicLen);
  out[6] = static_cast<uint8_t>(major);
  out[7] = 0;
  const uint64_t len = h.size();
  for (size_t i = 0; i < preamble - 8; ++i) out[8 + i] = static_cast<uint8_t>(len >> (8 * i));
  std::memcpy(out.data() + preamble, h.data(), h.size());
  if (!t.bytes.empty()) std::memcpy(out.data() + preamble + h.size(), t.bytes.data(), t.bytes.size());
  return out;
}

void write_npy(const std::filesystem::path& path, const Tensor& t) { write_file_atomic(path, encode_npy(t)); }

}  // namespace nibble::io
