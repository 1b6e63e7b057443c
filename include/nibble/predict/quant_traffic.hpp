// Bytes the quantization of a training step moves over HBM, per recipe, pass and mode: the one account
// that the measured `nibble bench` (the engine's rows, quant_bytes and the bandwidth bound next to each
// row) and the performance model (its quantization time and bound) both use. Host-only arithmetic.
//
// A linear layer has T tokens, I in_features and O out_features: X [T, I], W [O, I], dY [T, O]. A
// quantizer call reads its BF16 tensor (twice where the scale needs the whole tensor's amax first:
// fp8-current, nvfp4), writes each requested copy (row-wise, and column-wise = of the transpose) at
// its encoded width with its scales, and on Hopper also runs what makes the copies GEMM-ready: the
// exact BF16 decode of mxfp8 / nvfp4 (reads the copy, writes BF16) and the exact E4M3 re-encoding of
// mxfp4 (reads the copy, writes E4M3). Quartet moves its own tensors (Hadamard + QuEST forward with
// trust masks, backward quantizer, re-rotation of the saved forward codes, the epilogue); see
// docs/predict.md.
#pragma once
#include <cstdint>
#include <string_view>

#include "nibble/results/result.hpp"
#include "nibble/predict/operand_memory.hpp"

namespace nibble::predict {

struct TrafficOptions {
  // Hopper (the engine's only target): FP8 GEMMs are TN-only, so per-tensor FP8 writes a transposed
  // copy for the backward GEMMs; mxfp8 / nvfp4 are decoded to BF16, mxfp4 / Quartet re-encoded in
  // E4M3. Off: Blackwell, whose tensor cores read the formats natively and whose FP8 GEMMs take any
  // layout (one per-tensor FP8 copy serves all three GEMMs).
  bool hopper = true;
  // Transformer Engine's per-gemm attribution (the engine's default): under fp8-block the wgrad
  // call quantizes dY^T as that call's weight, in 128x128 blocks.
  bool te_forward_layouts = true;
  // Quartet's forward writes the E4M3 operand in the same kernel (fused); otherwise the re-encoding
  // reads the MXFP4 planes once more (the 1x128 fallback).
  bool quartet_forward_fused = true;
};

// One quantizer call on a rows x cols BF16 tensor of `role`, writing the requested copies.
double tensor_quant_bytes(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols, bool rowwise,
                          bool colwise, const TrafficOptions& options = {});

// All the quantization attributed to one pass ("fprop", "dgrad", "wgrad") of a linear layer in `mode`:
// step = what a training step does (fprop quantizes X and W with both copies, dgrad dY with both,
// wgrad reuses them); per-gemm = both operands of every GEMM re-quantized (Transformer Engine's
// benchmark); pre-quantized = 0. Throws std::invalid_argument for an unknown recipe or pass.
double pass_quant_bytes(std::string_view recipe, std::string_view pass, bench::Mode mode, const bench::LinearShape& l,
                        const TrafficOptions& options = {});

// The part of pass_quant_bytes that quantizes the weight W and depends on nothing else, so a training step
// with gradient accumulation runs it once per optimizer step (Transformer Engine caches its FP8 weights over
// the micro-batches): step mode's fprop, W with both copies (Quartet: W's forward quantizer). 0 for every
// other pass and mode. Same errors as pass_quant_bytes.
double pass_weight_quant_bytes(std::string_view recipe, std::string_view pass, bench::Mode mode,
                               const bench::LinearShape& l, const TrafficOptions& options = {});

}  // namespace nibble::predict
