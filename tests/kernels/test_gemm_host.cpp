// Host-only logic of the GEMM layer: labels, scale layouts, request validation, accumulation and
// execution-path rules, memory accounting. No test here needs a GPU (no NIBBLE_REQUIRE_GPU).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "nibble/kernels/gemm.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "test_seed.hpp"

namespace nc = nibble::cuda;
namespace sl = nibble::cuda::scale_layout;

namespace {

using nibble::testing::fresh_rng;

// Fake device addresses: validation only looks at their alignment.
const void* fake_ptr(uintptr_t addr) { return reinterpret_cast<const void*>(addr); }

nc::DeviceCaps hopper() { return nc::DeviceCaps{9, 0, 130100}; }

nc::GemmOperand fp8(int64_t rows, int64_t k, nc::ScaleMode mode, nc::DType d = nc::DType::e4m3) {
  return nc::GemmOperand{fake_ptr(0x10000), d, rows, k, mode, fake_ptr(0x20000)};
}
nc::GemmOperand bf16(int64_t rows, int64_t k) {
  return nc::GemmOperand{fake_ptr(0x10000), nc::DType::bf16, rows, k, nc::ScaleMode::none, nullptr};
}
nc::GemmOutput out() { return nc::GemmOutput{reinterpret_cast<void*>(0x30000), nc::OutputDType::bf16}; }

// Expects validate_gemm to throw std::invalid_argument whose message contains `needle`.
void expect_rejected(const nc::GemmOperand& a, const nc::GemmOperand& b, const nc::GemmOutput& c,
                     const nc::GemmOptions& o, const nc::DeviceCaps& caps, const std::string& needle) {
  try {
    nc::validate_gemm(a, b, c, o, caps);
    ADD_FAILURE() << "accepted a request that must fail with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace

TEST(GemmLabels, ExecutionPathStringsAreTheContract) {
  EXPECT_EQ(nc::to_string(nc::ExecutionPath::native), "native");
  EXPECT_EQ(nc::to_string(nc::ExecutionPath::emulated_exact_fp8), "emulated-exact (fp8)");
  EXPECT_EQ(nc::to_string(nc::ExecutionPath::emulated_exact_bf16), "emulated-exact (bf16)");
  EXPECT_EQ(nc::to_string(nc::ExecutionPath::emulated_approximate), "emulated-approximate");
  EXPECT_NE(std::string(nc::to_string(nc::ScaleMode::vec32_ue8m0)).find("untested on hardware"), std::string::npos);
  EXPECT_NE(std::string(nc::to_string(nc::ScaleMode::vec16_ue4m3)).find("untested on hardware"), std::string::npos);
}

// Every (row, block) of a random shape gets its own slot inside the buffer, for every mode.
TEST(ScaleLayout, IndicesAreInsideTheBufferAndDistinctPerBlock) {
  auto rng = fresh_rng();
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t rows = 1 + rng() % 700, k = 1 + rng() % 1500;
    for (auto mode : {nc::ScaleMode::outer_vec, nc::ScaleMode::vec128, nc::ScaleMode::blk128x128,
                      nc::ScaleMode::vec32_ue8m0, nc::ScaleMode::vec16_ue4m3}) {
      const int64_t count = sl::scale_count(mode, rows, k);
      const int64_t row_block = mode == nc::ScaleMode::blk128x128 ? 128 : 1;
      const int64_t k_block = mode == nc::ScaleMode::outer_vec ? k : sl::vector_length(mode);
      std::set<int64_t> seen;
      for (int64_t r = 0; r < rows; r += row_block) {
        for (int64_t kk = 0; kk < k; kk += k_block) {
          const int64_t idx = sl::scale_index(mode, rows, k, r, kk);
          ASSERT_GE(idx, 0);
          ASSERT_LT(idx, count) << nc::to_string(mode) << " rows=" << rows << " k=" << k;
          ASSERT_TRUE(seen.insert(idx).second) << "two blocks share a scale slot in " << nc::to_string(mode);
          // Every element of the block maps to the same slot.
          const int64_t r_last = std::min(rows, r + row_block) - 1, k_last = std::min(k, kk + k_block) - 1;
          ASSERT_EQ(sl::scale_index(mode, rows, k, r_last, k_last), idx);
        }
      }
    }
  }
}

TEST(ScaleLayout, BlockModesAreSixteenByteAlignedPerScaleRow) {
  EXPECT_EQ(sl::vec128_count(200, 256), 2 * 200);
  EXPECT_EQ(sl::vec128_count(201, 256), 2 * 204);
  EXPECT_EQ(sl::vec128_index(201, 5, 128), 204 + 5);
  EXPECT_EQ(sl::blk128_count(300, 640), 3 * 8);  // 5 k-blocks padded to 8
  EXPECT_EQ(sl::blk128_index(640, 257, 513), 2 * 8 + 4);
  EXPECT_EQ(sl::scale_bytes(nc::ScaleMode::per_tensor, 10, 10), 4);
  EXPECT_EQ(sl::scale_bytes(nc::ScaleMode::vec32_ue8m0, 1, 32), 128 * 4);  // one 512-byte tile
}

TEST(GemmValidate, AcceptsEveryHopperRecipeShape) {
  const nc::GemmOptions o;
  EXPECT_NO_THROW(nc::validate_gemm(bf16(200, 272), bf16(136, 272), out(), o, hopper()));
  EXPECT_NO_THROW(nc::validate_gemm(fp8(200, 272, nc::ScaleMode::per_tensor), fp8(136, 272, nc::ScaleMode::per_tensor),
                                    out(), o, hopper()));
  EXPECT_NO_THROW(nc::validate_gemm(fp8(200, 272, nc::ScaleMode::per_tensor, nc::DType::e5m2),
                                    fp8(136, 272, nc::ScaleMode::per_tensor), out(), o, hopper()));
  EXPECT_NO_THROW(nc::validate_gemm(fp8(200, 272, nc::ScaleMode::outer_vec), fp8(136, 272, nc::ScaleMode::outer_vec),
                                    out(), o, hopper()));
  EXPECT_NO_THROW(nc::validate_gemm(fp8(200, 256, nc::ScaleMode::vec128), fp8(136, 256, nc::ScaleMode::blk128x128),
                                    out(), o, hopper()));
  EXPECT_NO_THROW(nc::validate_gemm(fp8(200, 256, nc::ScaleMode::vec128), fp8(136, 256, nc::ScaleMode::vec128),
                                    out(), o, hopper()));
}

TEST(GemmValidate, NamesTheConstraintCuBlasLtWouldReject) {
  const nc::GemmOptions o;
  const auto pt = nc::ScaleMode::per_tensor;
  expect_rejected(fp8(200, 264, pt), fp8(136, 264, pt), out(), o, hopper(), "K % 16");
  expect_rejected(bf16(200, 260), bf16(136, 260), out(), o, hopper(), "K % 8");
  expect_rejected(fp8(200, 272, nc::ScaleMode::vec128), fp8(136, 272, nc::ScaleMode::vec128), out(), o, hopper(),
                  "multiple of 128");
  expect_rejected(fp8(200, 256, nc::ScaleMode::blk128x128), fp8(136, 256, nc::ScaleMode::blk128x128), out(), o,
                  hopper(), "1x128 x 1x128 and 1x128 x 128x128");
  expect_rejected(fp8(200, 272, pt, nc::DType::e5m2), fp8(136, 272, pt, nc::DType::e5m2), out(), o, hopper(),
                  "E5M2 x E5M2");
  expect_rejected(bf16(200, 272), fp8(136, 272, pt), out(), o, hopper(), "mixed BF16 x FP8");
  expect_rejected(fp8(200, 272, pt), fp8(136, 288, pt), out(), o, hopper(), "same inner dimension");
  expect_rejected(fp8(200, 272, pt), fp8(132, 272, pt), out(), o, hopper(), "N = B.rows = 132");
  expect_rejected(fp8(200, 272, pt), fp8(136, 272, nc::ScaleMode::outer_vec), out(), o, hopper(), "same scale mode");
  expect_rejected(fp8(200, 272, nc::ScaleMode::none), fp8(136, 272, pt), out(), o, hopper(), "need a scale");

  auto misaligned = fp8(200, 272, pt);
  misaligned.data = fake_ptr(0x10008);
  expect_rejected(misaligned, fp8(136, 272, pt), out(), o, hopper(), "16-byte aligned");
  auto no_scale = fp8(200, 272, pt);
  no_scale.scale = nullptr;
  expect_rejected(no_scale, fp8(136, 272, pt), out(), o, hopper(), ".scale is null");
  auto scaled_bf16 = bf16(200, 272);
  scaled_bf16.scale_mode = pt;
  expect_rejected(scaled_bf16, bf16(136, 272), out(), o, hopper(), "BF16 operands carry no scale");
}

TEST(GemmValidate, RefusesWhatTheGpuCannotRunAndSaysWhatRunsInstead) {
  const nc::GemmOptions o;
  const auto v32 = nc::ScaleMode::vec32_ue8m0;
  expect_rejected(fp8(256, 256, v32), fp8(256, 256, v32), out(), o, hopper(), "emulated-exact (bf16)");
  const nc::DeviceCaps old_lt{9, 0, 120800};
  expect_rejected(fp8(256, 256, nc::ScaleMode::outer_vec), fp8(256, 256, nc::ScaleMode::outer_vec), out(), o, old_lt,
                  "cuBLASLt >= 12.9");
  const nc::DeviceCaps ampere{8, 0, 130100};
  expect_rejected(fp8(256, 256, nc::ScaleMode::per_tensor), fp8(256, 256, nc::ScaleMode::per_tensor), out(), o,
                  ampere, "sm_89 or newer");
  const nc::DeviceCaps blackwell{10, 0, 130100};
  expect_rejected(fp8(256, 256, nc::ScaleMode::vec128), fp8(256, 256, nc::ScaleMode::vec128), out(), o, blackwell,
                  "only on sm_90");
  expect_rejected(fp8(256, 256, nc::ScaleMode::vec16_ue4m3), fp8(256, 256, nc::ScaleMode::vec16_ue4m3), out(), o,
                  blackwell, "E2M1");
}

TEST(GemmValidate, AccumulationFollowsTransformerEngineAndNeverFastOnBlocks) {
  const auto a = fp8(256, 256, nc::ScaleMode::per_tensor), b = fp8(256, 256, nc::ScaleMode::per_tensor);
  nc::GemmOptions o;
  o.pass = nc::Pass::fprop;
  EXPECT_EQ(nc::resolve_accumulation(a, b, o), nc::Accumulation::fast);
  o.pass = nc::Pass::dgrad;
  EXPECT_EQ(nc::resolve_accumulation(a, b, o), nc::Accumulation::split);
  o.pass = nc::Pass::wgrad;
  EXPECT_EQ(nc::resolve_accumulation(a, b, o), nc::Accumulation::split);
  o.accumulation = nc::Accumulation::fast;
  EXPECT_EQ(nc::resolve_accumulation(a, b, o), nc::Accumulation::fast);

  const auto va = fp8(256, 256, nc::ScaleMode::vec128), wb = fp8(256, 256, nc::ScaleMode::blk128x128);
  o.pass = nc::Pass::fprop;
  o.accumulation = nc::Accumulation::default_for_pass;
  EXPECT_EQ(nc::resolve_accumulation(va, wb, o), nc::Accumulation::split);
  o.accumulation = nc::Accumulation::fast;
  expect_rejected(va, wb, out(), o, hopper(), "accumulation = fast");
}

TEST(GemmValidate, ExecutionPathIsWhatTheCallerDidCheckedAgainstWhatRan) {
  const auto a = fp8(256, 256, nc::ScaleMode::outer_vec), b = fp8(256, 256, nc::ScaleMode::outer_vec);
  nc::GemmOptions o;
  o.operands = nc::ExecutionPath::emulated_exact_fp8;
  o.accumulation = nc::Accumulation::split;
  EXPECT_EQ(nc::resolve_execution_path(a, b, o), nc::ExecutionPath::emulated_exact_fp8);
  o.accumulation = nc::Accumulation::fast;  // products exact, sum not FP32: not "exact" any more
  EXPECT_EQ(nc::resolve_execution_path(a, b, o), nc::ExecutionPath::emulated_approximate);
  o.operands = nc::ExecutionPath::emulated_exact_bf16;
  expect_rejected(a, b, out(), o, hopper(), "decoded to BF16");
  o.operands = nc::ExecutionPath::emulated_exact_fp8;
  expect_rejected(bf16(256, 256), bf16(256, 256), out(), o, hopper(), "re-encoded exactly into E4M3");
  auto e5 = fp8(256, 256, nc::ScaleMode::outer_vec, nc::DType::e5m2);
  expect_rejected(e5, b, out(), o, hopper(), "re-encoded exactly into E4M3");
  o.operands = nc::ExecutionPath::emulated_exact_bf16;
  EXPECT_EQ(nc::resolve_execution_path(bf16(256, 256), bf16(256, 256), o), nc::ExecutionPath::emulated_exact_bf16);
}

