// TensorQuantizer for bf16 and the FP8 recipes (per-tensor current/delayed, 1x128 / 128x128 block,
// MXFP8 decoded to BF16 for the exact emulated GEMM).
#include <stdexcept>

#include "device_buffer.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/recipe.hpp"
#include "tensor_quantizer.hpp"

namespace nibble::recipes {
namespace {

using cuda::DType;
using cuda::ExecutionPath;
using cuda::GemmOperand;
using cuda::ScaleMode;

__global__ void transpose_bf16_kernel(const uint16_t* in, int64_t rows, int64_t cols, uint16_t* out) {
  __shared__ uint16_t tile[32][33];
  const int64_t c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][i];
  }
}

// BF16 baseline: no quantization. The transposed copy is made once at setup (a BF16 training step
// would use cuBLAS's NN/NT layouts instead of copying, at the same GEMM speed).
class Bf16Tensor final : public TensorQuantizer {
 public:
  Bf16Tensor(const uint16_t* src, int64_t rows, int64_t cols, cudaStream_t stream)
      : src_(src), rows_(rows), cols_(cols), t_(rows * cols * 2, "bf16 transposed copy") {
    transpose_bf16(src, rows, cols, t_.as<uint16_t>(), stream);
  }
  void run(bool, bool, int64_t, cudaStream_t) override {}
  GemmOperand rowwise() const override { return {src_, DType::bf16, rows_, cols_, ScaleMode::none, nullptr}; }
  GemmOperand colwise() const override { return {t_.get(), DType::bf16, cols_, rows_, ScaleMode::none, nullptr}; }
  ExecutionPath operands_path() const override { return ExecutionPath::native; }
  bool quantizes() const override { return false; }

 private:
  const uint16_t* src_;
  int64_t rows_, cols_;
  DeviceBuffer t_;
};

// Per-tensor FP8: current scaling (amax pass + cast pass) or delayed scaling (one pass with the
// history's scale, recording this step's amax, then the history update).
class PerTensorFp8 final : public TensorQuantizer {
 public:
  PerTensorFp8(bool delayed, quant::ElementFormat format, const uint16_t* src, int64_t rows, int64_t cols,
               cudaStream_t stream)
      : delayed_(delayed), format_(format), src_(src), rows_(rows), cols_(cols),
        row_(rows * cols, "fp8 row-wise copy"), col_(rows * cols, "fp8 column-wise copy"),
        scalars_(3 * kSlot * sizeof(float), "fp8 scale"), history_(kWindow * sizeof(float), "amax history") {
    NIBBLE_CUDA_CHECK(cudaMemsetAsync(history_.get(), 0, history_.bytes(), stream));
    float init[3 * kSlot] = {};
    init[kScale] = 1.0f;     // s_enc
    init[kScaleInv] = 1.0f;  // s_dec
    NIBBLE_CUDA_CHECK(cudaMemcpyAsync(scalars_.get(), init, sizeof(init), cudaMemcpyHostToDevice, stream));
  }
  void run(bool rowwise, bool colwise, int64_t step, cudaStream_t stream) override {
    cuda::Fp8Copies out{rowwise ? row_.as<uint8_t>() : nullptr, colwise ? col_.as<uint8_t>() : nullptr};
    float* s = scalars_.as<float>();
    if (delayed_) {
      const cuda::Fp8DelayedState state{history_.as<float>(), kWindow, s + kScale, s + kScaleInv};
      cuda::quantize_fp8_delayed(src_, rows_, cols_, format_, state, step, out, {}, stream);
      cuda::update_fp8_delayed_scale(state, step, format_, 0, stream);
    } else {
      cuda::quantize_fp8_current(src_, rows_, cols_, format_, {s + kAmax, s + kScale, s + kScaleInv}, out,
                                 cuda::Fp8CurrentPath::two_launch, {}, stream);
    }
  }
  GemmOperand rowwise() const override { return op(row_.get(), rows_, cols_); }
  GemmOperand colwise() const override { return op(col_.get(), cols_, rows_); }
  ExecutionPath operands_path() const override { return ExecutionPath::native; }

 private:
  static constexpr int kWindow = 1024;
  // amax, s_enc and s_dec each in their own 16-byte slot: cuBLASLt wants 16-byte aligned scales.
  static constexpr int kSlot = 4, kAmax = 0, kScale = kSlot, kScaleInv = 2 * kSlot;
  GemmOperand op(const void* data, int64_t r, int64_t k) const {
    return {data, format_ == quant::ElementFormat::e5m2 ? DType::e5m2 : DType::e4m3, r, k, ScaleMode::per_tensor,
            scalars_.as<float>() + kScaleInv};
  }
  bool delayed_;
  quant::ElementFormat format_;
  const uint16_t* src_;
  int64_t rows_, cols_;
  DeviceBuffer row_, col_, scalars_, history_;
};

// fp8-block: 1x128 blocks (X, dY; VEC128 scales) or 128x128 blocks (W; BLK128x128 scales).
class BlockFp8 final : public TensorQuantizer {
 public:
  BlockFp8(bool weight, const uint16_t* src, int64_t rows, int64_t cols)
      : weight_(weight), src_(src), rows_(rows), cols_(cols),
        mode_(weight ? ScaleMode::blk128x128 : ScaleMode::vec128),
        row_(rows * cols, "fp8-block row-wise copy"), col_(rows * cols, "fp8-block column-wise copy"),
        row_scale_(cuda::scale_layout::scale_bytes(mode_, rows, cols), "fp8-block row-wise scales"),
        col_scale_(cuda::scale_layout::scale_bytes(mode_, cols, rows), "fp8-block column-wise scales") {}
  void run(bool rowwise, bool colwise, int64_t, cudaStream_t stream) override {
    cuda::Fp8Copies out{rowwise ? row_.as<uint8_t>() : nullptr, colwise ? col_.as<uint8_t>() : nullptr};
    float* rs = rowwise ? row_scale_.as<float>() : nullptr;
    float* cs = colwise ? col_scale_.as<float>() : nullptr;
    if (weight_) {
      cuda::quantize_fp8_block_128x128(src_, rows_, cols_, out, rs, cs, cuda::BlockScaleLayout::cublaslt, {}, stream);
    } else {
      cuda::quantize_fp8_block_1x128(src_, rows_, cols_, out, rs, cs, cuda::BlockScaleLayout::cublaslt, {}, stream);
    }
  }
  GemmOperand rowwise() const override {
    return {row_.get(), DType::e4m3, rows_, cols_, mode_, row_scale_.get()};
  }
  GemmOperand colwise() const override {
    return {col_.get(), DType::e4m3, cols_, rows_, mode_, col_scale_.get()};
  }
  ExecutionPath operands_path() const override { return ExecutionPath::native; }

 private:
  bool weight_;
  const uint16_t* src_;
  int64_t rows_, cols_;
  ScaleMode mode_;
  DeviceBuffer row_, col_, row_scale_, col_scale_;
};

// MXFP8 on Hopper: quantize (E4M3 + E8M0 per 32), then decode exactly to BF16 for a BF16 GEMM
// (no MXFP8 tensor cores before sm_100). The decode is part of what emulation costs, so it is timed.
// The scales live only between the two kernels, so their layout is whichever makes the pair faster.
constexpr cuda::MxScaleLayout kMxfp8Scales = cuda::MxScaleLayout::tiled128x4;
constexpr int64_t mxfp8_scale_bytes(int64_t n_rows, int64_t k) {
  return kMxfp8Scales == cuda::MxScaleLayout::grid ? n_rows * (k / 32) : cuda::scale_layout::tiled_count(n_rows, k, 32);
}

class Mxfp8Emulated final : public TensorQuantizer {
 public:
  Mxfp8Emulated(const uint16_t* src, int64_t rows, int64_t cols)
      : src_(src), rows_(rows), cols_(cols), row_(rows * cols, "mxfp8 row-wise codes"),
        col_(rows * cols, "mxfp8 column-wise codes"), row_scale_(mxfp8_scale_bytes(rows, cols), "mxfp8 row-wise scales"),
        col_scale_(mxfp8_scale_bytes(cols, rows), "mxfp8 column-wise scales"),
        row_bf16_(rows * cols * 2, "mxfp8 decoded rows"), col_bf16_(rows * cols * 2, "mxfp8 decoded columns") {}
  void run(bool rowwise, bool colwise, int64_t, cudaStream_t stream) override {
    cuda::Fp8Copies out{rowwise ? row_.as<uint8_t>() : nullptr, colwise ? col_.as<uint8_t>() : nullptr};
    cuda::quantize_mxfp8(src_, rows_, cols_, quant::default_mx_scale_rule(quant::Recipe::mxfp8), out, rowwise ? row_scale_.as<uint8_t>() : nullptr,
                         colwise ? col_scale_.as<uint8_t>() : nullptr, kMxfp8Scales, {}, stream);
    if (rowwise) {
      cuda::decode_mxfp8_bf16(row_.as<uint8_t>(), row_scale_.as<uint8_t>(), rows_, cols_, row_bf16_.as<uint16_t>(),
                              false, kMxfp8Scales, stream);
    }
    if (colwise) {
      cuda::decode_mxfp8_bf16(col_.as<uint8_t>(), col_scale_.as<uint8_t>(), cols_, rows_, col_bf16_.as<uint16_t>(),
                              false, kMxfp8Scales, stream);
    }
  }
  GemmOperand rowwise() const override { return {row_bf16_.get(), DType::bf16, rows_, cols_, ScaleMode::none, nullptr}; }
  GemmOperand colwise() const override { return {col_bf16_.get(), DType::bf16, cols_, rows_, ScaleMode::none, nullptr}; }
  ExecutionPath operands_path() const override { return ExecutionPath::emulated_exact_bf16; }

 private:
  const uint16_t* src_;
  int64_t rows_, cols_;
  DeviceBuffer row_, col_, row_scale_, col_scale_, row_bf16_, col_bf16_;
};

}  // namespace

void transpose_bf16(const uint16_t* in, int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
  transpose_bf16_kernel<<<grid, dim3(32, 8), 0, stream>>>(in, rows, cols, out);
  NIBBLE_CHECK_LAUNCH();
}

std::unique_ptr<TensorQuantizer> make_fp4_tensor_quantizer(const std::string& recipe, TensorRole role,
                                                           const uint16_t* src, int64_t rows, int64_t cols,
                                                           const QuantizerSettings& settings, cudaStream_t stream);

std::unique_ptr<TensorQuantizer> make_tensor_quantizer(const std::string& recipe, TensorRole role,
                                                       const uint16_t* src, int64_t rows, int64_t cols,
                                                       const QuantizerSettings& settings, cudaStream_t stream) {
  const auto hybrid = (role == TensorRole::dy && !settings.e4m3_only) ? quant::ElementFormat::e5m2
                                                                       : quant::ElementFormat::e4m3;
  if (recipe == "bf16") return std::make_unique<Bf16Tensor>(src, rows, cols, stream);
  if (recipe == "fp8-current") return std::make_unique<PerTensorFp8>(false, hybrid, src, rows, cols, stream);
  if (recipe == "fp8-delayed") return std::make_unique<PerTensorFp8>(true, hybrid, src, rows, cols, stream);
  if (recipe == "fp8-block") return std::make_unique<BlockFp8>(role == TensorRole::w, src, rows, cols);
  if (recipe == "mxfp8") return std::make_unique<Mxfp8Emulated>(src, rows, cols);
  return make_fp4_tensor_quantizer(recipe, role, src, rows, cols, settings, stream);
}

}  // namespace nibble::recipes
