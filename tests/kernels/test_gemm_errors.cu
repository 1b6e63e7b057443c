// The GEMM on a real device: requests cuBLASLt would reject fail before any launch with a message
// naming the constraint, recipes the GPU cannot run natively say what runs instead, plans are cached,
// and autotuning keeps results correct.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.hpp"
#include "test_gemm_operands.hpp"

using namespace nibble::testing;

namespace {

void expect_invalid(const nc::GemmOperand& a, const nc::GemmOperand& b, const nc::GemmOutput& c,
                    const nc::GemmOptions& o, const std::string& needle) {
  try {
    nc::gemm(a, b, c, o);
    ADD_FAILURE() << "gemm accepted a request that must fail with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(GemmErrors, RejectedShapesAndPointersNameTheConstraint) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const auto ha = quantize_fp8(random_matrix(64, 272, 1, rng), 64, 272, nc::DType::e4m3, nc::ScaleMode::per_tensor);
  const auto hb = quantize_fp8(random_matrix(64, 272, 1, rng), 64, 272, nc::DType::e4m3, nc::ScaleMode::per_tensor);
  DeviceOperand a(ha), b(hb);
  DeviceBuffer c(64 * 64 * 2);
  const nc::GemmOutput out{c.get(), nc::OutputDType::bf16};
  const nc::GemmOptions o;

  auto short_k = a.view, short_kb = b.view;
  short_k.k = short_kb.k = 264;
  expect_invalid(short_k, short_kb, out, o, "K % 16");

  auto shifted = a.view;
  shifted.data = static_cast<const uint8_t*>(a.view.data) + 8;
  shifted.k = 256;
  auto b256 = b.view;
  b256.k = 256;
  expect_invalid(shifted, b256, out, o, "16-byte aligned");

  auto v32a = a.view, v32b = b.view;
  v32a.scale_mode = v32b.scale_mode = nc::ScaleMode::vec32_ue8m0;
  const auto caps = nc::default_gemm_context().caps();
  if (caps.sm_major < 10) expect_invalid(v32a, v32b, out, o, "emulated-exact (bf16)");
}

TEST(GemmErrors, OutOfMemoryReportsTheBytesRequested) {
  NIBBLE_REQUIRE_GPU();
  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  try {
    nc::GemmContext huge(device, size_t{1} << 50);  // a 1 PiB workspace cannot exist
    ADD_FAILURE() << "allocated a 1 PiB workspace";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of GPU memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(size_t{1} << 50)), std::string::npos) << msg;
  }
  // The failed allocation must not poison later CUDA calls.
  DeviceBuffer after(1024);
  after.poison();
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(GemmErrors, PlansAreCachedAndAutotuneStaysCorrect) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int64_t m = 256, n = 384, k = 512;
  const auto ha = quantize_fp8(random_matrix(m, k, 2, rng), m, k, nc::DType::e4m3, nc::ScaleMode::outer_vec);
  const auto hb = quantize_fp8(random_matrix(n, k, 2, rng), n, k, nc::DType::e4m3, nc::ScaleMode::outer_vec);
  DeviceOperand a(ha), b(hb);
  DeviceBuffer c(static_cast<size_t>(m * n) * 2);
  const nc::GemmOutput out{c.get(), nc::OutputDType::bf16};
  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  nc::GemmContext ctx(device);
  nc::GemmOptions o;
  o.pass = nc::Pass::wgrad;
  ctx.run(a.view, b.view, out, o);
  ctx.run(a.view, b.view, out, o);
  EXPECT_EQ(ctx.cached_plans(), 1u);
  o.autotune = true;
  c.poison();
  nc::GemmReport report;
  ctx.run(a.view, b.view, out, o, &report);
  EXPECT_EQ(ctx.cached_plans(), 2u);
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> got(c.bytes());
  NIBBLE_CUDA_CHECK(cudaMemcpy(got.data(), c.get(), c.bytes(), cudaMemcpyDeviceToHost));
  // FP8 tensor cores keep ~13-14 bits inside each promotion interval (see test_gemm_accuracy.cu).
  const auto cmp = compare(got, nc::OutputDType::bf16, reference(ha, hb, 1.0), 0x1p-9);
  EXPECT_EQ(cmp.non_finite, 0);
  EXPECT_LE(cmp.worst_bound_ratio, 1.0) << report.description << " algorithm " << report.algorithm_index;
  EXPECT_EQ(report.accumulation, nc::Accumulation::split);
}
