// Typed reads of fields of nibble's JSON data files (GPU database, calibrations, fit JSON, ...): a field
// that is missing where required, or present with the wrong type, is refused with std::invalid_argument
// naming it ("<where>.<key>: must be a string, found number"), never passed on as nlohmann's
// type_error, whose message names no field. `where` locates the object ("calibration 'c.json'",
// "gpus.json: gpus[3]").
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

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
