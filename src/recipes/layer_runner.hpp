// One linear layer (T tokens, I in_features, O out_features) under one recipe: the quantization
// each pass of a training step runs, in each benchmark mode, and its three GEMMs.
//
//   fprop  Y[T,O]  = X[T,I]   . W[O,I]^T      (A = X row-wise,  B = W row-wise)
//   dgrad  dX[T,I] = dY[T,O]  . W^T[I,O]^T    (A = dY row-wise, B = W column-wise)
//   wgrad  dW^T[I,O] = X^T[I,T] . dY^T[O,T]^T (A = X column-wise, B = dY column-wise)
//
// Step-faithful attribution (mode step): fprop quantizes X and W with both copies, dgrad quantizes
// dY with both copies, wgrad reuses them. Transformer Engine's attribution (mode per-gemm): every
// GEMM quantizes the two copies it reads. Pre-quantized: everything once, outside the timing.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "nibble/results/result.hpp"
#include "nibble/kernels/gemm.hpp"

namespace nibble::recipes {

struct LayerShape {
  int64_t t = 0, i = 0, o = 0;
};

struct LayerSources {  // BF16 raw bits on the device, owned by the caller
  const uint16_t* x = nullptr;   // [T, I]
  const uint16_t* w = nullptr;   // [O, I]
  const uint16_t* dy = nullptr;  // [T, O]
};

struct RunnerSettings {
  bool e4m3_only = false;   // Transformer Engine's settings (per-gemm compatibility mode)
  bool fast_accumulation_everywhere = false;
  // Transformer Engine's benchmark times every GEMM as a forward-layer call: for fp8-block the wgrad
  // GEMM then reads dY^T in 128x128 blocks (the "weight" of that call) instead of the recipe's 1x128.
  bool te_forward_layouts = false;
  bool autotune = false;
  uint64_t seed = 0x6e69626cu;
};

class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual void prepare(cudaStream_t stream) = 0;  // all quantization, once
  virtual void quantize(cuda::Pass pass, bench::Mode mode, int64_t step, cudaStream_t stream) = 0;
  virtual cuda::ExecutionPath gemm(cuda::Pass pass, cudaStream_t stream) = 0;
  virtual double quant_bytes(cuda::Pass pass, bench::Mode mode) const = 0;
  // The weight's part of quantize(fprop, step): what a gradient-accumulation step runs once per optimizer step
  // (W and the copies backward needs). Timed apart so the bench can amortise it; its bytes are
  // predict::pass_weight_quant_bytes.
  virtual void quantize_weight(int64_t step, cudaStream_t stream) = 0;
  virtual double weight_quant_bytes(cuda::Pass pass, bench::Mode mode) const = 0;
  virtual std::string note() const { return {}; }  // e.g. which scaling granularity an exact path chose
};

// Throws std::invalid_argument (unknown recipe) or OutOfMemory.
std::unique_ptr<LayerRunner> make_layer_runner(const std::string& recipe, const LayerShape& shape,
                                               const LayerSources& sources, const RunnerSettings& settings,
                                               cudaStream_t stream);

}  // namespace nibble::recipes
