// An MXFP4 operand made GEMM-ready on Hopper: re-encoded exactly into E4M3 with one power-of-two
// scale per row (OUTER_VEC) or, when some row's block exponents spread over more than 14 binades,
// per 1x128 group (VEC128). The granularity is settled once from the device violation counters
// (never flushed silently); `note()` says which one ran and why.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "device_buffer.hpp"
#include "nibble/kernels/gemm.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/reencode.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace nibble::recipes {

class ReencodedOperand {
 public:
  ReencodedOperand(int64_t rows, int64_t cols, const std::string& what);
  // Re-encodes `in` [rows, cols] at the current granularity (counting violations).
  void run(cuda::Mxfp4ConstPlanes in, cudaStream_t stream);
  // Quartet forward quantization of x (BF16 [rows, cols]) into `planes` (MXFP4 codes, scales, mask:
  // the backward reads them) and this operand: fused with the row re-encoding in one pass
  // (quartet_fused.hpp) while the row granularity holds, else quantize + re-encode per 1x128 group.
  void run_quartet_forward(const void* x, const cuda::QuartetForwardOptions& options, cuda::Mxfp4Planes planes,
                           cudaStream_t stream);
  // Reads the counters of the last run (synchronizes) and moves to the coarsest exact granularity.
  // Throws std::runtime_error when even 1x128 groups are not exact.
  void settle(cudaStream_t stream);
  cuda::GemmOperand operand() const;
  // Whether the last run_quartet_forward wrote the E4M3 operand in the fused kernel (otherwise the
  // re-encoding read the MXFP4 planes once more: the 1x128 path), for the traffic account.
  bool forward_fused() const { return fused_; }
  std::string note() const { return note_; }

 private:
  int64_t rows_, cols_;
  std::string what_;
  cuda::ReencodeGranularity granularity_ = cuda::ReencodeGranularity::row;
  DeviceBuffer e4m3_, scales_, counters_;
  std::string note_;
  bool fused_ = false;                 // the last run was the fused forward (counts rows only)
  cuda::Mxfp4ConstPlanes last_planes_;  // its MXFP4 planes, re-encoded in settle() to count 1x128 groups
};

// The four device planes of one MXFP4 copy (codes, E8M0 scales, optional trust mask). The scale buffer
// holds either layout (the 128x4 tiles pad rows to 128 and scale columns to 4).
struct Mxfp4Buffers {
  DeviceBuffer codes, scales, mask;
  Mxfp4Buffers(int64_t rows, int64_t cols, bool with_mask, const std::string& what)
      : codes(rows * cols / 2, what + " codes"),
        scales(std::max(rows * cols / 32, cuda::scale_layout::tiled_count(rows, cols, 32)), what + " scales"),
        mask(with_mask ? rows * cols / 8 : 0, what + " mask") {}
  cuda::Mxfp4Planes planes(cuda::MxScaleLayout layout = cuda::MxScaleLayout::grid) const {
    return {codes.as<uint8_t>(), scales.as<uint8_t>(), mask.as<uint8_t>(), layout};
  }
  cuda::Mxfp4ConstPlanes const_planes(cuda::MxScaleLayout layout = cuda::MxScaleLayout::grid) const {
    return {codes.as<uint8_t>(), scales.as<uint8_t>(), mask.as<uint8_t>(), layout};
  }
};

}  // namespace nibble::recipes
