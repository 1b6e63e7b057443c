// Modelled memory of a recipe for one layer (predict_bench's MemoryUsage rows).
#pragma once
#include "nibble/bench/result.hpp"
#include "nibble/predict.hpp"

namespace nibble::predict {

// operand_bytes: the largest fprop's quantized operands (all copies) plus its bf16 output;
// saved_bytes: the quantized activation copies kept for wgrad over one layer; peak: their sum.
bench::MemoryUsage modelled_memory(const std::string& recipe, const std::vector<bench::Row>& rows,
                                   const GpuSpec& gpu);

}  // namespace nibble::predict
