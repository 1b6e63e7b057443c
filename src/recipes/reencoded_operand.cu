#include <stdexcept>

#include "nibble/kernels/quartet_fused.hpp"

#include "reencoded_operand.hpp"

namespace nibble::recipes {

ReencodedOperand::ReencodedOperand(int64_t rows, int64_t cols, const std::string& what)
    : rows_(rows), cols_(cols), what_(what), e4m3_(rows * cols, what + " E4M3 re-encoding"),
      scales_(sizeof(float) * std::max(cuda::reencode_scale_count(cuda::ReencodeGranularity::row, rows, cols),
                                       cuda::reencode_scale_count(cuda::ReencodeGranularity::group128, rows, cols)),
              what + " re-encoding scales"),
      counters_(sizeof(cuda::ReencodeViolations), what + " violation counters") {}

void ReencodedOperand::run(cuda::Mxfp4ConstPlanes in, cudaStream_t stream) {
  cuda::reencode_mxfp4_e4m3(in, rows_, cols_, granularity_, e4m3_.as<uint8_t>(), scales_.as<float>(),
                            counters_.as<cuda::ReencodeViolations>(), stream);
}

void ReencodedOperand::run_quartet_forward(const void* x, const cuda::QuartetForwardOptions& options,
                                           cuda::Mxfp4Planes planes, cudaStream_t stream) {
  last_planes_ = {planes.codes, planes.scales, planes.mask, planes.scale_layout};
  fused_ = granularity_ == cuda::ReencodeGranularity::row;
  if (fused_) {
    auto* counts = counters_.as<cuda::ReencodeViolations>();
    cuda::quartet_forward_quantize_e4m3(x, cuda::Fp4DenseType::bf16, rows_, cols_, options, planes,
                                        {e4m3_.as<uint8_t>(), scales_.as<float>(), &counts->row_sets}, stream);
    return;
  }
  cuda::quartet_forward_quantize(x, cuda::Fp4DenseType::bf16, rows_, cols_, options, planes, stream);
  run(last_planes_, stream);
}

void ReencodedOperand::settle(cudaStream_t stream) {
  cuda::ReencodeViolations v;
  if (fused_) {
    // The fused kernel counts violating rows only; when there are any, the row re-encoding pass of
    // the same planes counts the 1x128 groups too, which decides whether VEC128 is exact.
    int rows_violating = 0;
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(&rows_violating, counters_.get(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (rows_violating > 0) run(last_planes_, stream);
  }
  NIBBLE_CUDA_CHECK(cudaMemcpyAsync(&v, counters_.get(), sizeof(v), cudaMemcpyDeviceToHost, stream));
  NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (granularity_ == cuda::ReencodeGranularity::row && v.row_sets > 0) {
    granularity_ = cuda::choose_reencode_granularity(v);  // throws if 1x128 groups are not exact either
    note_ = what_ + ": " + std::to_string(v.row_sets) +
            " rows spread over more than 14 binades; re-encoded per 1x128 group (VEC128, slower GEMM)";
  } else if (note_.empty()) {
    note_ = what_ + ": re-encoded per row (OUTER_VEC), exact";
  }
}

cuda::GemmOperand ReencodedOperand::operand() const {
  return {e4m3_.get(), cuda::DType::e4m3, rows_, cols_, cuda::reencode_scale_mode(granularity_), scales_.get()};
}

}  // namespace nibble::recipes
