// printable(): bytes read from files, escaped for messages (printable.hpp).
#include "nibble/io/printable.hpp"

#include <cstdint>
#include <cstdio>

namespace nibble::io {
namespace {

// Length of the valid UTF-8 multi-byte character at the start of `s`, or 0 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
size_t utf8_length(std::string_view s) {
  const auto b = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = b(0);
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) n = 2;
  else if (lead == 0xE0) n = 3, lo = 0xA0;
  else if (lead == 0xED) n = 3, hi = 0x9F;
  else if (lead >= 0xE1 && lead <= 0xEF) n = 3;
  else if (lead == 0xF0) n = 4, lo = 0x90;
  else if (lead == 0xF4) n = 4, hi = 0x8F;
  else if (lead >= 0xF1 && lead <= 0xF3) n = 4;
  if (n == 0 || s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = c >= 0x80 ? utf8_length(text.substr(i)) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      ++i;
    }
  }
  return out;
}

}  // namespace nibble::io
