// Text placed inside XML or HTML (SVG charts, the HTML report, the optimality map): the five characters
// that end text or an attribute value become entities, so any model, layer or recipe name is safe there.
#pragma once
#include <string>
#include <string_view>

namespace nibble::io {

inline std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace nibble::io
