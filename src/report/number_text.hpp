// How numbers read in every rendering: NaN (not measured, not comparable) prints as "-".
#pragma once
#include <fmt/format.h>

#include <algorithm>
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
// Decimals that keep three significant digits of `v` (at least none, at most three): an interval is printed
// with the decimals of its central value at both ends, so "97.8 [67.2, 133.0]", never "97.764 [67.2, 133]".
inline int decimals_for(double v) {
  const double a = std::fabs(v);
  return a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
}
// "142.3 [97.8, 193.7]" when the interval is known (one precision, one decimal more than decimals_for, for ms),
// else ms_text alone.
inline std::string ms_interval_text(double ms, double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return ms_text(ms);
  const int d = std::min(3, decimals_for(ms) + 1);
  return fmt::format("{:.{}f} [{:.{}f}, {:.{}f}]", ms, d, low, d, high, d);
}
// Tokens per second in thousands or millions, three significant digits, the same unit and decimals at both ends
// of an interval: "54.6k [40.1k, 79.5k]", "1.35M [0.99M, 1.96M]".
inline std::string rate_text(double v, double low = NAN, double high = NAN) {
  if (!std::isfinite(v)) return "-";
  const double unit = std::fabs(v) >= 1e6 ? 1e6 : std::fabs(v) >= 1e3 ? 1e3 : 1;
  const char* suffix = unit == 1e6 ? "M" : unit == 1e3 ? "k" : "";
  const int d = decimals_for(v / unit);
  if (!std::isfinite(low) || !std::isfinite(high)) return fmt::format("{:.{}f}{}", v / unit, d, suffix);
  return fmt::format("{:.{}f}{} [{:.{}f}{}, {:.{}f}{}]", v / unit, d, suffix, low / unit, d, suffix, high / unit, d,
                     suffix);
}
inline std::string tokens_interval_text(double t, double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return tokens_text(t);
  return fmt::format("{} [{}, {}]", tokens_text(t), tokens_text(low), tokens_text(high));
}
// "1.90x [0.97, 3.73]": two decimals everywhere.
inline std::string speedup_interval_text(double s, double low, double high) {
  if (!std::isfinite(s) || !std::isfinite(low) || !std::isfinite(high)) return speedup_text(s);
  return fmt::format("{:.2f}x [{:.2f}, {:.2f}]", s, low, high);
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
