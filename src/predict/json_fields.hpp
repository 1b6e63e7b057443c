// Typed reads of the predict layer's data files (GPU database, calibration): an optional field that
// is present with the wrong type is refused with std::invalid_argument naming it, never passed on as
// nlohmann's type_error (whose message names no field).
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace nibble::predict::json_fields {

inline void require_object(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    throw std::invalid_argument(fmt::format("{}: expected a JSON object, found {}", where, j.type_name()));
}

inline std::string text_or(const nlohmann::json& j, const char* key, const std::string& fallback,
                           const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string())
    throw std::invalid_argument(fmt::format("{}.{}: must be a string, found {}", where, key, j[key].type_name()));
  return j[key].get<std::string>();
}

inline double number_or(const nlohmann::json& j, const char* key, double fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number())
    throw std::invalid_argument(fmt::format("{}.{}: must be a number, found {}", where, key, j[key].type_name()));
  return j[key].get<double>();
}

// A required whole number in [1, max] (SM count, compute capability, tile sizes): a cast of a larger
// or fractional double to int would be wrong or undefined.
inline int whole_number(const nlohmann::json& j, const char* key, int max, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw std::invalid_argument(fmt::format("{}.{}: missing or not a number", where, key));
  const double v = j[key].get<double>();
  if (!(v >= 1 && v <= max && v == std::floor(v)))
    throw std::invalid_argument(fmt::format("{}.{}: {} must be a whole number from 1 to {}", where, key, j[key].dump(), max));
  return static_cast<int>(v);
}

// An optional count (calls of a GEMM shape): the fallback when absent, else whole_number.
inline int64_t count_or(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& where) {
  return j.contains(key) ? whole_number(j, key, std::numeric_limits<int>::max(), where) : fallback;
}

}  // namespace nibble::predict::json_fields
