// The scaling-law layer: precision-aware loss law, fit to training runs, compute-normalized planner,
// optimality map, and the reader of speedups measured by `nibble bench`.
#pragma once
#include "nibble/law/bench_speedups.hpp"
#include "nibble/law/fit.hpp"
#include "nibble/law/planner.hpp"
#include "nibble/law/reach.hpp"
#include "nibble/law/scaling_law.hpp"
