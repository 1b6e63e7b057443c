// The contract every fuzz target checks: a parser handed arbitrary bytes either returns a value or
// throws std::invalid_argument / std::runtime_error (the two exceptions the CLI turns into
// "nibble: error: ..."). Anything else (a crash, a sanitizer report, a leak, a hang, or an exception
// of another type such as nlohmann::json::type_error, whose message names no field) is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nibble::fuzz {

// Runs `parse`; swallows only the exceptions the contract allows, so libFuzzer sees every other one
// as an uncaught exception (a crash with a reproducer).
template <class F>
void expect_clean_rejection(F&& parse) {
  try {
    parse();
  } catch (const std::invalid_argument&) {
  } catch (const std::runtime_error&) {
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// JSON parsers are handed documents, not bytes: the JSON syntax itself is nlohmann's job, so inputs
// that are not JSON are discarded (returning a discarded value) and the fuzzer spends its time on
// valid JSON with hostile contents.
inline nlohmann::json parse_json_or_discard(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
}

}  // namespace nibble::fuzz
