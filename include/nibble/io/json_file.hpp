// One reader for every JSON data file nibble opens (bench results, the GPU database, calibrations,
// presets, Hugging Face config.json, fit and bench JSON for the law): each failure names the file,
// what the file is and what to do, so no reader has to wrap nlohmann's exceptions itself; and the
// typed reads of the fields of those files (json_fields).
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nibble::io {

// The exception raised for a file that cannot be opened (missing, a folder, no permission). The io
// layer's own readers use std::runtime_error (binary_file.hpp), since the file system rather than the
// content is wrong; readers whose path is an option the user just typed report it as
// std::invalid_argument, like any other bad argument. The CLI prints both the same way.
enum class OpenError { runtime_error, invalid_argument };

// Reads and parses `path`. `what` says what the file is, in the words of a message ("GPU database",
// "Hugging Face config.json given to --hf-config"). Throws:
// - per `open_error`, when the file cannot be opened: "cannot open the <what> '<path>': <reason>; ...";
// - std::invalid_argument when the file is empty or only whitespace: "... is empty, not valid JSON";
// - std::invalid_argument on a syntax error: "<what> '<path>' is not valid JSON at line L, column C
//   (byte B): <nlohmann's detail>; ...", telling a file that ends early (truncated) from one that is
//   malformed;
// - std::invalid_argument for a number past double's range (nlohmann's out_of_range), naming the file.
nlohmann::json read_json_file(const std::string& path, std::string_view what,
                              OpenError open_error = OpenError::runtime_error);

// nlohmann's message without its "[json.exception.parse_error.101] " tag and, for a parse error, without
// its own "parse error at line L, column C: " (the caller states the position); the bytes it quotes
// from the input are escaped (printable.hpp).
std::string json_error_detail(const nlohmann::json::exception& e);

// Line and column (both from 1) of the byte at 0-based `offset` of `text`; an offset past the end
// gives the position just after the last character.
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};
TextPosition text_position(std::string_view text, size_t offset);

}  // namespace nibble::io

// Typed reads of fields of nibble's JSON data files (GPU database, calibrations, fit JSON, ...): a field
// that is missing where required, or present with the wrong type, is refused with std::invalid_argument
// naming it ("<where>.<key>: must be a string, found number"), never passed on as nlohmann's
// type_error, whose message names no field. `where` locates the object ("calibration 'c.json'",
// "gpus.json: gpus[3]").
namespace nibble::io::json_fields {

namespace detail {
[[noreturn]] inline void refuse(const std::string& where, const char* key, const std::string& problem) {
  throw std::invalid_argument(where + "." + key + ": " + problem);
}
}  // namespace detail

inline void require_object(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    throw std::invalid_argument(where + ": expected a JSON object, found " + std::string(j.type_name()));
}

// A required string.
inline std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) detail::refuse(where, key, "missing or not a string");
  return j[key].get<std::string>();
}

// An optional string: the fallback when absent.
inline std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback,
                           const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string())
    detail::refuse(where, key, "must be a string, found " + std::string(j[key].type_name()));
  return j[key].get<std::string>();
}

// A required number.
inline double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) detail::refuse(where, key, "missing or not a number");
  return j[key].get<double>();
}

// An optional number: the fallback when absent.
inline double number_or(const nlohmann::json& j, const char* key, double fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number())
    detail::refuse(where, key, "must be a number, found " + std::string(j[key].type_name()));
  return j[key].get<double>();
}

// An optional true/false: the fallback when absent.
inline bool flag_or(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_boolean())
    detail::refuse(where, key, "must be true or false, found " + j[key].dump());
  return j[key].get<bool>();
}

// A required whole number in [1, max] (SM count, compute capability, tile sizes): a cast of a larger
// or fractional double to int would be wrong or undefined.
inline int whole_number(const nlohmann::json& j, const char* key, int max, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) detail::refuse(where, key, "missing or not a number");
  const double v = j[key].get<double>();
  if (!(v >= 1 && v <= max && v == std::floor(v)))
    detail::refuse(where, key, j[key].dump() + " must be a whole number from 1 to " + std::to_string(max));
  return static_cast<int>(v);
}

// An optional count (calls of a GEMM shape): the fallback when absent, else whole_number.
inline int64_t count_or(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& where) {
  return j.contains(key) ? whole_number(j, key, std::numeric_limits<int>::max(), where) : fallback;
}

}  // namespace nibble::io::json_fields
