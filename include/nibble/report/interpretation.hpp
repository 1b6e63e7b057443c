// What a benchmark's numbers mean, in words: the lines the terminal table and the HTML report both show
// under "what this means" (the fastest recipe and its training speedup, recipes slower than BF16 or far
// from their bandwidth bound, emulated formats, sequences off their parts, recipes closer than the run's timing variation, failed rows).
#pragma once
#include <string>
#include <vector>

#include "nibble/bench/aggregate.hpp"

namespace nibble::report {

// timing_spread: bench::bf16_twin_spread of the result (NaN: unknown). When the fastest two recipes of
// the fastest mode differ by less than it, a line says one run cannot order them.
std::vector<std::string> interpretation_lines(const std::vector<bench::RecipeSummary>& sums,
                                              double timing_spread = bench::kNaN);

}  // namespace nibble::report
