// The execution-path notes of one (recipe, layer): the engine builds a runner per mode and each runner says
// which kernels and GEMM path it used. Per-gemm mode's runner has Transformer Engine's settings, so its path
// can differ from the other modes'. Host-only.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "nibble/results/result.hpp"

namespace nibble::bench {

// Collects the path each mode's runner reported, then gives the lines for BenchResult::notes:
// "<recipe> <layer>: <path>" when every mode ran the same path, else one line per path naming its modes,
// "<recipe> <layer>: [step, per-gemm] <path>" (docs/bench-output.md). Empty paths are not recorded.
class PathNotes {
 public:
  void add(Mode mode, const std::string& path);
  std::vector<std::string> lines(const std::string& recipe, const std::string& layer) const;

 private:
  std::vector<std::pair<std::string, std::vector<Mode>>> paths_;  // a path, the modes that ran it (first-seen order)
};

}  // namespace nibble::bench
