// What a benchmark's numbers mean, in words: the lines the terminal table and the HTML report both show
// under "what this means" (the fastest recipe and its training speedup, recipes slower than BF16 or far
// from their bandwidth bound, emulated formats, sequences off their parts, failed rows).
#pragma once
#include <string>
#include <vector>

#include "nibble/bench/aggregate.hpp"

namespace nibble::report {

std::vector<std::string> interpretation_lines(const std::vector<bench::RecipeSummary>& sums);

}  // namespace nibble::report
