// The median of a sample (the mean of the two middle values for an even count; NaN when empty), shared by
// the clock record and the merge of repeated sweeps.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

namespace nibble::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace nibble::bench
