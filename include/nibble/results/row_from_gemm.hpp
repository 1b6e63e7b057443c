// A benchmark row for one workload GEMM: the shape fields copied the same way by the engine and the
// predictor, so measured and predicted results line up row for row.
#pragma once
#include "nibble/results/result.hpp"
#include "nibble/workload/gemm_list.hpp"

namespace nibble::bench {

// Shape, count, per_model and per-call flops from `gemm`; recipe and mode as given; times zero.
Row row_from_gemm(const workload::Gemm& gemm, std::string recipe, Mode mode);

}  // namespace nibble::bench
