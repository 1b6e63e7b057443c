// TensorQuantizer for mxfp4 and nvfp4 (placeholder until the FP4 kernels land).
#include <stdexcept>

#include "tensor_quantizer.hpp"

namespace nibble::engine {

std::unique_ptr<TensorQuantizer> make_fp4_tensor_quantizer(const std::string& recipe, TensorRole, const uint16_t*,
                                                           int64_t, int64_t, const QuantizerSettings&, cudaStream_t) {
  throw std::invalid_argument("recipe '" + recipe +
                              "' is not available in the GPU engine (valid: bf16, fp8-delayed, fp8-current, "
                              "fp8-block, mxfp8, nvfp4, mxfp4, quartet)");
}

}  // namespace nibble::engine
