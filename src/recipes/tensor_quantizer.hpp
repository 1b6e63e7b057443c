// One source tensor of a linear layer (X, W or dY, BF16 on the device) under one recipe: the
// quantization a training step runs on it, and the GEMM operands it yields. The row-wise operand is
// the tensor itself [rows, cols] (contiguous along cols); the column-wise operand is its transpose
// [cols, rows], the copy the backward GEMMs need because Hopper's FP8 GEMM is TN-only.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "nibble/kernels/gemm.hpp"

namespace nibble::recipes {

enum class TensorRole { x, w, dy };

struct QuantizerSettings {
  bool e4m3_only = false;  // Transformer Engine's benchmark settings: no E5M2 gradients
  uint64_t seed = 0x6e69626cu;
};

class TensorQuantizer {
 public:
  virtual ~TensorQuantizer() = default;
  // Runs the recipe's quantization, writing the requested copies. `step` drives delayed scaling.
  virtual void run(bool rowwise, bool colwise, int64_t step, cudaStream_t stream) = 0;
  virtual cuda::GemmOperand rowwise() const = 0;
  virtual cuda::GemmOperand colwise() const = 0;
  // How the operands relate to the recipe's format (native, or an exact emulation).
  virtual cuda::ExecutionPath operands_path() const = 0;
  // Whether run() does any work (BF16 does none). The bytes it moves are predict::tensor_quant_bytes
  // (the account a prediction uses too, include/nibble/predict/quant_traffic.hpp).
  virtual bool quantizes() const { return true; }
  // After a first run(true, true): settle data-dependent choices (e.g. the re-encoding granularity).
  virtual void settle(cudaStream_t) {}
  virtual std::string note() const { return {}; }
};

// bf16, fp8-current, fp8-delayed, fp8-block, mxfp8 (and the FP4 recipes once wired). Throws
// std::invalid_argument for recipes this engine cannot run, naming them.
std::unique_ptr<TensorQuantizer> make_tensor_quantizer(const std::string& recipe, TensorRole role,
                                                       const uint16_t* src, int64_t rows, int64_t cols,
                                                       const QuantizerSettings& settings, cudaStream_t stream);

// Physical transpose of a BF16 [rows, cols] tensor into [cols, rows] (setup work for the BF16
// baseline's backward operands; never timed).
void transpose_bf16(const uint16_t* in, int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream);

}  // namespace nibble::recipes
