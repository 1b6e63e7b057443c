// How numbers read in every rendering: NaN (not measured, not comparable) prints as "-".
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <string>

namespace nibble::report {

inline std::string ms_text(double ms) {
  if (!std::isfinite(ms)) return "-";
  return ms >= 100 ? fmt::format("{:.1f}", ms) : fmt::format("{:.3f}", ms);
}
inline std::string tflops_text(double t) { return std::isfinite(t) ? fmt::format("{:.0f}", t) : "-"; }
inline std::string speedup_text(double s) { return std::isfinite(s) ? fmt::format("{:.2f}x", s) : "-"; }
inline std::string pct_text(double p) { return std::isfinite(p) ? fmt::format("{:.0f}%", p) : "-"; }
inline std::string tokens_text(double t) { return std::isfinite(t) ? fmt::format("{:.0f}", t) : "-"; }
// "4.700 [3.900, 5.600]" when the interval is known, else the value alone.
inline std::string ms_interval_text(double ms, double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return ms_text(ms);
  return fmt::format("{} [{}, {}]", ms_text(ms), ms_text(low), ms_text(high));
}
inline std::string tokens_interval_text(double t, double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return tokens_text(t);
  return fmt::format("{} [{}, {}]", tokens_text(t), tokens_text(low), tokens_text(high));
}
inline std::string bytes_text(double b) {
  if (!std::isfinite(b)) return "-";
  const double a = std::fabs(b);
  if (a >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (a >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (a >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

}  // namespace nibble::report
