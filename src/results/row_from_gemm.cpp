#include "nibble/results/row_from_gemm.hpp"

namespace nibble::bench {

Row row_from_gemm(const workload::Gemm& gemm, std::string recipe, Mode mode) {
  Row r;
  r.layer = gemm.layer;
  r.pass = gemm.pass;
  r.m = gemm.m;
  r.k = gemm.k;
  r.n = gemm.n;
  r.count = gemm.count;
  r.flops = 2.0 * static_cast<double>(gemm.m) * static_cast<double>(gemm.k) * static_cast<double>(gemm.n);
  r.per_model = gemm.per_model;
  r.recipe = std::move(recipe);
  r.mode = mode;
  return r;
}

}  // namespace nibble::bench
