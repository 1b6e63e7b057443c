// Repeated sweeps (`nibble bench --repeat N`): the whole benchmark run N times, the recipes in a
// rotated order each time, merged into one result. Why: on our power-capped H100 and H200 a row's time
// depends on the clocks the GPU has when the row runs, and the same GEMM timed in two rows of one sweep
// differs by 5-15% (docs/timing-noise.md); rotating the order moves every recipe through every
// position of the sweep, and the median over the sweeps takes the order effect out of each row.
#pragma once
#include <string>
#include <vector>

#include "nibble/results/result.hpp"

namespace nibble::bench {

// `recipes` rotated left by `sweep` places (sweep 0: unchanged), the order sweep `sweep` runs them in.
std::vector<std::string> sweep_order(const std::vector<std::string>& recipes, int sweep);

// One result from the sweeps of one benchmark (the same workload, recipes and modes; any recipe order).
// Each row: its GEMM median, p10 and p90 the median over the sweeps of theirs, min and max the extremes,
// n_runs the sum; quant_ms the median; a row that failed in any sweep carries that sweep's error. The
// sequences likewise; memory the most any sweep measured; copy bandwidth the median; the clock record
// pooled (sample counts summed, the SM clock's median the median of the sweeps' medians). The result is
// sweep 0's otherwise (its recipe order, its date), with `sweeps` and `sweep_summaries` (each sweep's
// per-layer time and speedup over BF16 per recipe and mode) filled and the bounds recomputed.
// One sweep: returned as it is. Throws std::invalid_argument when the sweeps do not hold the same rows.
BenchResult merge_sweeps(const std::vector<BenchResult>& sweeps);

}  // namespace nibble::bench
