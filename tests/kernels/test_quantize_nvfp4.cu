// GPU == CPU reference, bit for bit, for the NVFP4 kernels: the quantizer (1x16 and 16x16 blocks,
// row-wise and column-wise copies, RHT-16 per copy, nearest and stochastic) against
// quant::quantize_nvfp4 of x and of x^T, and the exact BF16 decode against
// quant::decode_to_bf16_unscaled. Fresh random data each run (normals times 2^U(-12, 6) per row),
// with a tensor amax of exactly 6 * 448 (global scale 1) so exact E2M1 ties occur, all-zero groups,
// a group whose block scale rounds to zero (its non-zero elements get +-6 codes, as Transformer
// Engine writes them), signed zeros, BF16 subnormals, and separate NaN / inf tensors. Outputs
// poisoned with 0xA5.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quantize_nvfp4.hpp"
#include "nibble/format.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/reencode.hpp"
#include "test_seed.hpp"

namespace {

using namespace nibble;

using test::DeviceBuffer;

// inf_pair: +inf at rows r and r + 8 of one column group (r % 16 == 0), so the column rotation meets
// inf - inf (NaN) only in its last butterfly, where the kernels' amax shortcut |a| + |b| gives inf and
// must redo the stage; and +inf at two neighbouring columns of one row (inf - inf in the first stage).
enum class Special { none, nan, inf, inf_pair };

std::vector<uint16_t> make_input(int64_t rows, int64_t cols, std::mt19937_64& rng, Special special) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 6);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  auto at = [&](int64_t r, int64_t c) -> uint16_t& { return x[static_cast<size_t>(r * cols + c)]; };
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = fmt::pow2f(expo(rng));
    for (int64_t c = 0; c < cols; ++c) {
      float v = normal(rng) * mag;
      if (v == 0.0f) v = mag;
      at(r, c) = fmt::encode_bf16(v);
    }
  }
  at(0, 0) = fmt::encode_bf16(6.0f * 448.0f);  // tensor amax: global decode scale exactly 1 (unrotated copies)
  if (rows >= 8 && cols >= 32) {
    for (int c = 0; c < 16; ++c) at(1, 16 + c) = 0;                       // all-zero group
    for (int c = 0; c < 16; ++c) at(2, c) = (c & 1) ? 0x8000 : 0;         // signed zeros
    for (int c = 0; c < 16; ++c) at(3, c) = static_cast<uint16_t>(1 + c);  // BF16 subnormals
    // Block amax 1.6e-3: fl(amax / 6) < 2^-10 rounds to UE4M3 0, so the elements encode with FLT_MAX.
    for (int c = 0; c < 16; ++c) at(5, c) = fmt::encode_bf16((c & 1 ? -1e-4f : 1e-4f) * static_cast<float>(c + 1));
    // Block amax 12 -> block scale 2 (exact): 2 x the E2M1 ties 0.25 .. 5 land exactly on ties.
    const float ties[] = {12.0f, 0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f, -0.5f, -5.0f, -7.0f, -10.0f, 1.0f, -2.0f, 3.0f, 6.0f};
    for (int c = 0; c < 16; ++c) at(4, 16 + c) = fmt::encode_bf16(ties[c]);
  }
  if (special == Special::nan) at(rows - 1, cols - 3) = 0x7fc0;
  if (special == Special::inf) at(rows / 2, 5) = 0xff80;
  if (special == Special::inf_pair) {
    at(rows / 2, 5) = 0x7f80;  // callers use rows % 32 == 0: rows / 2 starts a 16-row group
    at(rows / 2 + 8, 5) = 0x7f80;
    at(rows / 2 + 2, 16) = 0x7f80;
    at(rows / 2 + 2, 17) = 0x7f80;
  }
  return x;
}

std::vector<float> to_float(const std::vector<uint16_t>& x) {
  std::vector<float> f(x.size());
  for (size_t i = 0; i < x.size(); ++i) f[i] = fmt::decode_bf16(x[i]);
  return f;
}
std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  return t;
}

template <class T>
void expect_same(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  ASSERT_GE(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << ": first mismatch at index " << i << " of " << want.size() << ": got 0x" << std::hex
                    << uint64_t(got[i]) << ", expected 0x" << uint64_t(want[i]);
      return;
    }
  }
}

// One device copy (codes, scales, global scale) and its comparison with a reference tensor.
struct DeviceCopy {
  DeviceBuffer<uint8_t> codes, scales;
  DeviceBuffer<float> global;
  DeviceCopy(int64_t rows, int64_t cols, int64_t block_rows)
      : codes(static_cast<size_t>(rows * cols / 2)), scales(static_cast<size_t>(rows / block_rows * cols / 16)), global(1) {}
  cuda::Nvfp4Planes planes() { return {codes.p, scales.p, global.p}; }
  void expect_equals(const std::string& what, const quant::QuantizedTensor& ref) const {
    expect_same((what + " codes").c_str(), codes.download(), ref.codes);
    expect_same((what + " scales").c_str(), scales.download(), ref.scale_codes);
    EXPECT_EQ(fmt::float_bits(global.download()[0]), fmt::float_bits(ref.tensor_scale))
        << what << " global scale: got " << global.download()[0] << ", expected " << ref.tensor_scale;
  }
};

struct Shape {
  int64_t rows, cols;
};
// Partial 128x128 CTA tiles and 64x64 warp tiles along both edges (48, 80, 208, 272 x 528: a 16-row
// group or an 8-column chunk past the edge), one large shape, one tall-thin.
const Shape kShapes[] = {{64, 64}, {48, 208}, {80, 80}, {272, 528}, {160, 4096}, {1024, 32}};

std::string check_config(const std::vector<uint16_t>& x, int64_t rows, int64_t cols, const cuda::Nvfp4Options& o,
                         int copies) {
  const auto xf = to_float(x);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  DeviceCopy row(rows, cols, o.block_rows), col(cols, rows, o.block_rows);
  const char* path = cuda::quantize_nvfp4(dx.p, cuda::Fp4DenseType::bf16, rows, cols, o,
                                          copies & 1 ? row.planes() : cuda::Nvfp4Planes{},
                                          copies & 2 ? col.planes() : cuda::Nvfp4Planes{}, nullptr);
  EXPECT_NE(std::string(path).find(o.block_rows == 16 ? "16x16" : "1x16"), std::string::npos) << path;
  if (copies & 1) {
    const auto ref = quant::quantize_nvfp4(xf.data(), rows, cols, o.block_rows, o.rounding, o.rowwise_rht);
    row.expect_equals("row-wise", ref);
    // The exact decode of the same codes.
    DeviceBuffer<uint16_t> dec(x.size());
    cuda::decode_nvfp4_bf16({row.codes.p, row.scales.p}, rows, cols, o.block_rows, dec.p, nullptr);
    expect_same("decode row-wise", dec.download(), quant::decode_to_bf16_unscaled(ref));
  }
  if (copies & 2) {
    const auto xt = transpose(xf, rows, cols);
    quant::SrKey col_key = o.rounding;  // the column-wise copy's own seed when the launch has one
    if (o.colwise_seed) col_key.seed = *o.colwise_seed;
    const auto ref = quant::quantize_nvfp4(xt.data(), cols, rows, o.block_rows, col_key, o.colwise_rht);
    col.expect_equals("column-wise", ref);
    DeviceBuffer<uint16_t> dec(x.size());
    cuda::decode_nvfp4_bf16({col.codes.p, col.scales.p}, cols, rows, o.block_rows, dec.p, nullptr);
    expect_same("decode column-wise", dec.download(), quant::decode_to_bf16_unscaled(ref));
  }
  return path;
}

TEST(QuantizeNvfp4, ActivationsAndGradients1x16) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Shape s : kShapes) {
    const auto x = make_input(s.rows, s.cols, rng, Special::none);
    for (bool sr : {false, true}) {
      for (bool row_rht : {false, true}) {
        for (bool col_rht : {true, false}) {
          for (int copies : {1, 2, 3}) {
            SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " sr " << sr << " row_rht " << row_rht
                                              << " col_rht " << col_rht << " copies " << copies);
            cuda::Nvfp4Options o;
            o.rounding = quant::SrKey{sr, rng(), quant::kStreamNvfp4};
            if (sr && row_rht) o.colwise_seed = rng();  // dY and dY^T with their own seeds in one launch
            o.rowwise_rht = row_rht;
            o.colwise_rht = col_rht;
            check_config(x, s.rows, s.cols, o, copies);
          }
        }
      }
    }
  }
}

TEST(QuantizeNvfp4, Weights16x16) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const auto x = make_input(s.rows, s.cols, rng, Special::none);
    for (bool rht : {false, true}) {  // W^T of the dgrad GEMM: no RHT; both rotated as a stress case
      cuda::Nvfp4Options o;
      o.block_rows = 16;
      o.colwise_rht = rht;
      o.rowwise_rht = rht;
      check_config(x, s.rows, s.cols, o, 3);
    }
  }
}

TEST(QuantizeNvfp4, RowsNotMultipleOf16RowwiseOnly) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const auto x = make_input(37, 144, rng, Special::none);
  cuda::Nvfp4Options o;
  o.rounding = quant::SrKey{true, rng(), quant::kStreamNvfp4};
  check_config(x, 37, 144, o, 1);
}

TEST(QuantizeNvfp4, NanAndInfTensors) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (Special sp : {Special::nan, Special::inf, Special::inf_pair}) {
    SCOPED_TRACE(sp == Special::nan ? "nan" : sp == Special::inf ? "inf" : "inf pair");
    const auto x = make_input(64, 96, rng, sp);
    for (bool rht : {false, true}) {
      cuda::Nvfp4Options o;
      o.rowwise_rht = rht;  // the column-wise copy is rotated by default
      check_config(x, 64, 96, o, 3);
      o.block_rows = 16;
      o.colwise_rht = rht;
      check_config(x, 64, 96, o, 3);
    }
  }
}

// FP32 input, both 1x16 copies (the column-wise one rotated, the default), against the reference.
void check_fp32(const std::vector<float>& xf, int64_t rows, int64_t cols) {
  DeviceBuffer<float> dx(xf.size());
  dx.upload(xf);
  cuda::Nvfp4Options o;
  DeviceCopy row(rows, cols, 1), col(cols, rows, 1);
  cuda::quantize_nvfp4(dx.p, cuda::Fp4DenseType::fp32, rows, cols, o, row.planes(), col.planes(), nullptr);
  row.expect_equals("fp32 row-wise", quant::quantize_nvfp4(xf.data(), rows, cols, 1));
  const auto xt = transpose(xf, rows, cols);
  col.expect_equals("fp32 column-wise", quant::quantize_nvfp4(xt.data(), cols, rows, 1, {}, true));
}

// Large tensors with partial 128x128 tiles along both edges and more tiles than the GPU holds CTAs at once
// (25 x 33 = 825 BF16 tiles, 17 x 32 = 544 FP32 tiles; an H100 or H200 holds 660 encode CTAs, 396 with FP32
// chunks): both passes run several waves, the encode pass's reversed tile order included.
TEST(QuantizeNvfp4, LargeTensorsWithPartialTiles) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 3088, cols = 4112;
  const auto x = make_input(rows, cols, rng, Special::none);
  for (int config = 0; config < 3; ++config) {
    SCOPED_TRACE(::testing::Message() << "config " << config);
    cuda::Nvfp4Options o;
    if (config == 1) o.rounding = quant::SrKey{true, rng(), quant::kStreamNvfp4};
    if (config == 2) o.block_rows = 16;
    check_config(x, rows, cols, o, 3);
  }
  check_fp32(to_float(make_input(2064, 4096, rng, Special::none)), 2064, 4096);
}

TEST(QuantizeNvfp4, Fp32InputMatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 64, cols = 128;
  auto xf = to_float(make_input(rows, cols, rng, Special::none));
  xf[9] = 1e-40f;  // an FP32 subnormal, which BF16 inputs cannot carry
  xf[10] = 1.0f + 0x1p-20f;  // bits below BF16 precision
  check_fp32(xf, rows, cols);
}

TEST(QuantizeNvfp4, ClearErrorsBeforeLaunch) {
  // Host-side checks run before any device work: testable without a GPU.
  uint8_t* fake = reinterpret_cast<uint8_t*>(uintptr_t{256});
  float* fs = reinterpret_cast<float*>(fake);
  const cuda::Nvfp4Planes p{fake, fake, fs};
  cuda::Nvfp4Options o;
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 16, 40, o, p, {}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 20, 64, o, {}, p, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 16, 64, o, {}, {}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::quantize_nvfp4(fake + 2, cuda::Fp4DenseType::bf16, 16, 64, o, p, {}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 16, 64, o, {fake, fake, nullptr}, {}, nullptr),
               std::invalid_argument);
  o.block_rows = 8;
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 16, 64, o, p, {}, nullptr), std::invalid_argument);
  o.block_rows = 16;
  EXPECT_THROW(cuda::quantize_nvfp4(fake, cuda::Fp4DenseType::bf16, 24, 64, o, p, {}, nullptr), std::invalid_argument);
  uint16_t* out = reinterpret_cast<uint16_t*>(fake);
  EXPECT_THROW(cuda::decode_nvfp4_bf16({fake, fake}, 24, 64, 16, out, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::decode_nvfp4_bf16({fake, fake}, 16, 40, 1, out, nullptr), std::invalid_argument);
}

}  // namespace
