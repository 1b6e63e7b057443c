// What a benchmark's numbers mean, in words: the lines the terminal table and the HTML report both show
// under "what this means" (the fastest recipe and its training speedup, recipes slower than BF16 or far
// from their bandwidth bound, emulated formats, sequences off their parts, recipes closer than the run's timing variation, failed rows).
#pragma once
#include <string>
#include <vector>

#include "nibble/results/aggregate.hpp"

namespace nibble::report {

// variation: bench::run_variation of the result (default: unknown). When the fastest two recipes of the
// fastest mode differ by less than its timing spread, a line says one run cannot order them; when the
// clocks moved (bench::clocks_varied), a line says how.
std::vector<std::string> interpretation_lines(const std::vector<bench::RecipeSummary>& sums,
                                              const bench::RunVariation& variation = {});

}  // namespace nibble::report
