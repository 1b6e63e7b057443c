// Every GEMM mode against the double-accumulation reference of its dequantized operands, with fresh
// random data, poisoned outputs and shapes that are not multiples of 128 where the layout allows.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "test_gemm_operands.hpp"

using namespace nibble::testing;

namespace {

// Accumulation bounds, relative to sum_k |a_k b_k|: split accumulation is FP32 (about K * 2^-24 for
// K <= 512, with slack for blockwise partial sums); fast accumulation keeps fewer bits inside the
// tensor core. Both are far below the O(1) error of a wrong scale or layout.
constexpr double kSplitAcc = 0x1p-14;
// Hopper's FP8 tensor cores keep only about 13-14 bits inside each FP32 promotion interval even
// with split accumulation (measured on our H200, 2026-12-02: worst error 2^-10.5 of sum |a b| at
// K = 272, relative Frobenius 2.2e-4). FP8 paths are "exact" up to that accumulation, like every
// FP8 GEMM on Hopper; the bound below still fails any wrong scale or layout by orders of magnitude.
constexpr double kFp8SplitAcc = 0x1p-9;
constexpr double kFastAcc = 0x1p-8;

struct RunResult {
  nc::ExecutionPath path;
  nc::GemmReport report;
  std::vector<uint8_t> out;
};

RunResult run_gemm(const HostOperand& a, const HostOperand& b, const nc::GemmOptions& options,
                   nc::OutputDType out_type = nc::OutputDType::bf16) {
  DeviceOperand da(a), db(b);
  const size_t elem = out_type == nc::OutputDType::bf16 ? 2 : 4;
  DeviceBuffer c(static_cast<size_t>(a.rows * b.rows) * elem);
  c.poison();
  RunResult r;
  r.path = nc::gemm(da.view, db.view, nc::GemmOutput{c.get(), out_type}, options, &r.report);
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  r.out.resize(c.bytes());
  NIBBLE_CUDA_CHECK(cudaMemcpy(r.out.data(), c.get(), c.bytes(), cudaMemcpyDeviceToHost));
  return r;
}

// The checks every path must pass with BF16 output; `strict_mismatch` (split accumulation) also
// demands agreement with RN_bf16(reference) almost everywhere.
void expect_exact_bf16(const RunResult& r, const Reference& ref, double acc_rel, bool strict_mismatch) {
  const Comparison cmp = compare(r.out, nc::OutputDType::bf16, ref, acc_rel);
  EXPECT_EQ(cmp.non_finite, 0) << "unwritten or non-finite outputs (" << r.report.description << ")";
  EXPECT_LE(cmp.worst_bound_ratio, 1.0) << r.report.description;
  EXPECT_LT(cmp.rel_frobenius, strict_mismatch ? 0x1p-8 : 0x1p-6) << r.report.description;
  // An exact path rounds the (nearly exact) FP32 sum to BF16: it disagrees with RN_bf16(ref) only
  // where the sum sits within the accumulation error of a rounding boundary.
  if (strict_mismatch) {
    EXPECT_LT(cmp.mismatch_fraction, acc_rel > kSplitAcc ? 0.25 : 0.02) << r.report.description;
  }
}

}  // namespace

TEST(GemmAccuracy, Bf16NotMultipleOf128) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 272;
  const auto a = to_bf16(random_matrix(m, k, 3, rng), m, k), b = to_bf16(random_matrix(n, k, 3, rng), n, k);
  nc::GemmOptions o;
  o.alpha = 0.75f;
  const auto r = run_gemm(a, b, o);
  EXPECT_EQ(r.path, nc::ExecutionPath::native);
  expect_exact_bf16(r, reference(a, b, o.alpha), kSplitAcc, true);

  o.operands = nc::ExecutionPath::emulated_exact_bf16;  // e.g. MXFP8 decoded to BF16 by the caller
  EXPECT_EQ(run_gemm(a, b, o).path, nc::ExecutionPath::emulated_exact_bf16);
}

TEST(GemmAccuracy, Fp32OutputIsExactToFp32Accumulation) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 272;
  const auto x = random_matrix(m, k, 2, rng), w = random_matrix(n, k, 2, rng);
  nc::GemmOptions o;
  o.pass = nc::Pass::dgrad;  // split accumulation
  for (const bool fp8 : {false, true}) {
    const auto a = fp8 ? quantize_fp8(x, m, k, nc::DType::e4m3, nc::ScaleMode::per_tensor) : to_bf16(x, m, k);
    const auto b = fp8 ? quantize_fp8(w, n, k, nc::DType::e4m3, nc::ScaleMode::per_tensor) : to_bf16(w, n, k);
    const auto r = run_gemm(a, b, o, nc::OutputDType::f32);
    const auto cmp = compare(r.out, nc::OutputDType::f32, reference(a, b, 1.0), fp8 ? kFp8SplitAcc : kSplitAcc);
    EXPECT_EQ(cmp.non_finite, 0);
    EXPECT_LT(cmp.rel_frobenius, fp8 ? 2e-3 : 1e-5) << r.report.description;
    EXPECT_LE(cmp.worst_bound_ratio, 1.0) << r.report.description;
  }
}

// Per-tensor FP8, both hybrid orders, split and fast accumulation.
TEST(GemmAccuracy, PerTensorFp8AllPassesAndHybrid) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 272;
  const auto x = random_matrix(m, k, 2, rng), w = random_matrix(n, k, 2, rng);
  const nc::DType pairs[][2] = {{nc::DType::e4m3, nc::DType::e4m3},
                                {nc::DType::e5m2, nc::DType::e4m3},   // dgrad: dY x W^T
                                {nc::DType::e4m3, nc::DType::e5m2}};  // wgrad: X^T x dY^T
  for (const auto& p : pairs) {
    const auto a = quantize_fp8(x, m, k, p[0], nc::ScaleMode::per_tensor);
    const auto b = quantize_fp8(w, n, k, p[1], nc::ScaleMode::per_tensor);
    for (const auto pass : {nc::Pass::fprop, nc::Pass::dgrad, nc::Pass::wgrad}) {
      nc::GemmOptions o;
      o.pass = pass;
      o.alpha = 1.25f;
      const auto r = run_gemm(a, b, o);
      EXPECT_EQ(r.path, nc::ExecutionPath::native);
      const bool fast = pass == nc::Pass::fprop;
      EXPECT_EQ(r.report.accumulation, fast ? nc::Accumulation::fast : nc::Accumulation::split);
      expect_exact_bf16(r, reference(a, b, o.alpha), fast ? kFastAcc : kFp8SplitAcc, !fast);
    }
  }
}

TEST(GemmAccuracy, RowwiseOuterVecFp8) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 272;
  const auto a = quantize_fp8(random_matrix(m, k, 4, rng), m, k, nc::DType::e4m3, nc::ScaleMode::outer_vec);
  const auto b = quantize_fp8(random_matrix(n, k, 4, rng), n, k, nc::DType::e4m3, nc::ScaleMode::outer_vec);
  for (const auto acc : {nc::Accumulation::split, nc::Accumulation::fast}) {
    nc::GemmOptions o;
    o.accumulation = acc;
    const auto r = run_gemm(a, b, o);
    expect_exact_bf16(r, reference(a, b, 1.0), acc == nc::Accumulation::fast ? kFastAcc : kFp8SplitAcc,
                      acc == nc::Accumulation::split);
  }
}

// Block scaling in the layouts training uses: fprop/dgrad 1x128 x 128x128, wgrad 1x128 x 1x128, and
// the mirrored 128x128 x 1x128. M and N are not multiples of 128 (partial row blocks).
TEST(GemmAccuracy, BlockScaledFp8TrainingLayouts) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 384;
  const auto x = random_matrix(m, k, 4, rng), w = random_matrix(n, k, 4, rng);
  const nc::ScaleMode combos[][2] = {{nc::ScaleMode::vec128, nc::ScaleMode::blk128x128},
                                     {nc::ScaleMode::vec128, nc::ScaleMode::vec128},
                                     {nc::ScaleMode::blk128x128, nc::ScaleMode::vec128}};
  for (const auto& c : combos) {
    const auto a = quantize_fp8(x, m, k, nc::DType::e4m3, c[0]);
    const auto b = quantize_fp8(w, n, k, nc::DType::e4m3, c[1]);
    nc::GemmOptions o;  // fprop default: block modes still resolve to split
    const auto r = run_gemm(a, b, o);
    EXPECT_EQ(r.report.accumulation, nc::Accumulation::split);
    expect_exact_bf16(r, reference(a, b, 1.0), kFp8SplitAcc, true);
  }
}

// MXFP4 re-encoded exactly into E4M3: the FP8 GEMM equals the MXFP4 GEMM (docs/spec.md §4), with
// Quartet's backward 16/9 folded into alpha. Row-wise (outer_vec) and 1x128 (vec128) sets.
TEST(GemmAccuracy, Mxfp4ExactReencodingEqualsTheMxfp4Gemm) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 200, n = 136, k = 384;
  const auto x = random_matrix(m, k, 4, rng), w = random_matrix(n, k, 4, rng);
  for (const auto mode : {nc::ScaleMode::outer_vec, nc::ScaleMode::vec128}) {
    const auto a = mxfp4_reencoded(x, m, k, mode), b = mxfp4_reencoded(w, n, k, mode);
    nc::GemmOptions o;
    o.pass = nc::Pass::dgrad;
    o.alpha = 16.0f / 9.0f;
    o.operands = nc::ExecutionPath::emulated_exact_fp8;
    const auto r = run_gemm(a, b, o);
    EXPECT_EQ(r.path, nc::ExecutionPath::emulated_exact_fp8) << nc::to_string(r.path);
    expect_exact_bf16(r, reference(a, b, o.alpha), kFp8SplitAcc, true);
    if (mode == nc::ScaleMode::outer_vec) {
      o.accumulation = nc::Accumulation::fast;  // products still exact; the label must drop "exact"
      const auto f = run_gemm(a, b, o);
      EXPECT_EQ(f.path, nc::ExecutionPath::emulated_approximate);
      expect_exact_bf16(f, reference(a, b, o.alpha), kFastAcc, false);
    }
  }
}

// A quantized GEMM must differ from the product of the unquantized data by what the quantization
// predicts, and track the quantized operands far more closely: a GEMM that silently ran on
// unquantized BF16 data (error ~2^-9) or mixed up scales (error ~1) fails.
TEST(GemmAccuracy, QuantizedResultDiffersFromBf16ByThePredictedAmount) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 256, n = 256, k = 512;
  const auto x = random_matrix(m, k, 0, rng), w = random_matrix(n, k, 0, rng);
  const auto ua = to_bf16(x, m, k), ub = to_bf16(w, n, k);
  const Reference unquantized = reference(ua, ub, 1.0);
  struct Case {
    HostOperand a, b;
    nc::ExecutionPath claim;
  };
  std::vector<Case> cases;
  cases.push_back({quantize_fp8(x, m, k, nc::DType::e4m3, nc::ScaleMode::per_tensor),
                   quantize_fp8(w, n, k, nc::DType::e4m3, nc::ScaleMode::per_tensor), nc::ExecutionPath::native});
  cases.push_back({quantize_fp8(x, m, k, nc::DType::e5m2, nc::ScaleMode::per_tensor),
                   quantize_fp8(w, n, k, nc::DType::e4m3, nc::ScaleMode::per_tensor), nc::ExecutionPath::native});
  cases.push_back({mxfp4_reencoded(x, m, k, nc::ScaleMode::outer_vec), mxfp4_reencoded(w, n, k, nc::ScaleMode::outer_vec),
                   nc::ExecutionPath::emulated_exact_fp8});
  for (const auto& c : cases) {
    const Reference quantized = reference(c.a, c.b, 1.0);
    const double predicted = rel_distance(quantized.c, unquantized.c);
    nc::GemmOptions o;
    o.pass = nc::Pass::wgrad;
    o.operands = c.claim;
    const auto r = run_gemm(c.a, c.b, o);
    std::vector<double> got(quantized.c.size());
    for (size_t i = 0; i < got.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, &r.out[2 * i], 2);
      got[i] = nf::decode_bf16(h);
    }
    const double vs_unquantized = rel_distance(got, unquantized.c);
    const double vs_quantized = rel_distance(got, quantized.c);
    EXPECT_GT(predicted, 4 * 0x1p-8) << "quantization error too small to tell the paths apart";
    EXPECT_NEAR(vs_unquantized, predicted, 0.25 * predicted) << r.report.description;
    EXPECT_LT(vs_quantized, 0.25 * predicted) << r.report.description;
  }
}
