// Per-tensor FP8 kernels (fp8-current, fp8-delayed) bit-exact against the host reference built from
// nibble::quant's shared functions: amax, scales, row-wise and column-wise codes, stochastic rounding.
#include <gtest/gtest.h>

#include "nibble/quant/amax_history.hpp"

#include "gpu_test_support.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/quant/scale_rules.hpp"
#include "test_quantize_fp8_support.hpp"

namespace {

using nibble::quant::ElementFormat;
using nibble::quant::SrKey;
using namespace nibble::testing;
namespace nc = nibble::cuda;
namespace nq = nibble::quant;

struct Shape {
  int64_t rows, cols;
};
// Multiples of the 128 tile and not (the kernels allow any multiple of 16).
// 4240 rows: 34 tile rows, i.e. one full group of 32 tile rows and a short one (tile_coord).
const Shape kShapes[] = {{256, 384}, {272, 144}, {16, 16}, {144, 528}, {4240, 144}};

float host_amax(const std::vector<uint16_t>& x) {
  uint32_t m = 0;
  for (uint16_t b : x) m = nq::amax_combine_bits(m, nq::abs_bits(bf16f(b)));
  return nq::amax_from_bits(m);
}

struct HostCopies {
  std::vector<uint8_t> row, col;
};
HostCopies reference_cast(const std::vector<uint16_t>& x, int64_t rows, int64_t cols, ElementFormat f, float s,
                          const SrKey& key) {
  HostCopies h{std::vector<uint8_t>(x.size()), std::vector<uint8_t>(x.size())};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = bf16f(x[static_cast<size_t>(r * cols + c)]);
      h.row[static_cast<size_t>(r * cols + c)] = nq::encode_scaled(f, v, s, key, static_cast<uint64_t>(r * cols + c));
      h.col[static_cast<size_t>(c * rows + r)] = nq::encode_scaled(f, v, s, key, static_cast<uint64_t>(c * rows + r));
    }
  }
  return h;
}

void expect_copies(const char* tag, const HostCopies& want, const DeviceBuffer<uint8_t>& row,
                   const DeviceBuffer<uint8_t>& col, const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  EXPECT_TRUE(same_bits((std::string(tag) + " rowwise").c_str(), row.download(), want.row,
                        [&](size_t i) { return describe_bf16(x[i]); }));
  EXPECT_TRUE(same_bits((std::string(tag) + " colwise").c_str(), col.download(), want.col, [&](size_t i) {
    const int64_t c = static_cast<int64_t>(i) / rows, r = static_cast<int64_t>(i) % rows;
    return describe_bf16(x[static_cast<size_t>(r * cols + c)]);
  }));
}

TEST(QuantizeFp8PerTensor, AmaxPassMatchesReferenceIncludingNaN) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (bool edges : {false, true}) {
    const auto x = make_bf16_tensor(rng, 272, 144, edges);
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    DeviceBuffer<float> amax(1);
    amax.poison(0x5A);
    nc::amax_bf16(dx.ptr, static_cast<int64_t>(x.size()), amax.ptr, nullptr);
    EXPECT_TRUE(same_bits("amax", amax.download(), std::vector<float>{host_amax(x)}, [](size_t) { return "whole tensor"; }));
  }
}

TEST(QuantizeFp8PerTensor, CastTransposeWithGivenScaleBothFormatsAndRounding) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  std::uniform_real_distribution<float> sdist(0.01f, 300.0f);
  for (const Shape sh : kShapes) {
    for (ElementFormat f : {ElementFormat::e4m3, ElementFormat::e5m2}) {
      for (bool sr : {false, true}) {
        const auto x = make_bf16_tensor(rng, sh.rows, sh.cols, true);
        const float scale = sr ? sdist(rng) : 1.0f;  // scale 1 keeps the planted E4M3 ties on ties
        const SrKey key{sr, rng(), nq::kStreamFp8};
        DeviceBuffer<uint16_t> dx(x.size());
        dx.upload(x);
        DeviceBuffer<float> ds(1), amax(1);
        ds.upload({scale});
        DeviceBuffer<uint8_t> row(x.size()), col(x.size());
        const auto want = reference_cast(x, sh.rows, sh.cols, f, scale, key);
        for (uint8_t p : kPoisons) {
          row.poison(p);
          col.poison(p);
          NIBBLE_CUDA_CHECK(cudaMemset(amax.ptr, 0, sizeof(float)));
          nc::cast_transpose_fp8(dx.ptr, sh.rows, sh.cols, f, ds.ptr, {row.ptr, col.ptr}, amax.ptr, key, nullptr);
          SCOPED_TRACE(::testing::Message() << sh.rows << "x" << sh.cols << (f == ElementFormat::e4m3 ? " e4m3" : " e5m2")
                                            << (sr ? " stochastic" : " nearest") << " poison " << int(p));
          expect_copies("cast_transpose", want, row, col, x, sh.rows, sh.cols);
          EXPECT_TRUE(same_bits("recorded amax", amax.download(), std::vector<float>{host_amax(x)},
                                [](size_t) { return "whole tensor"; }));
        }
      }
    }
  }
}

TEST(QuantizeFp8PerTensor, CurrentScalingBothPaths) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (const Shape sh : kShapes) {
    for (ElementFormat f : {ElementFormat::e4m3, ElementFormat::e5m2}) {
      for (auto path : {nc::Fp8CurrentPath::two_launch, nc::Fp8CurrentPath::single_launch}) {
        for (bool edges : {false, true}) {  // with NaN planted the scale falls back to 1
          const auto x = make_bf16_tensor(rng, sh.rows, sh.cols, edges);
          const float amax = host_amax(x);
          const float s = nq::per_tensor_encode_scale(nq::element_max(f), amax);
          const auto want = reference_cast(x, sh.rows, sh.cols, f, s, SrKey{});
          DeviceBuffer<uint16_t> dx(x.size());
          dx.upload(x);
          DeviceBuffer<float> da(1), ds(1), dsi(1);
          DeviceBuffer<uint8_t> row(x.size()), col(x.size());
          for (uint8_t p : kPoisons) {
            row.poison(p);
            col.poison(p);
            da.poison(p);
            ds.poison(p);
            dsi.poison(p);
            nc::quantize_fp8_current(dx.ptr, sh.rows, sh.cols, f, {da.ptr, ds.ptr, dsi.ptr}, {row.ptr, col.ptr}, path,
                                     SrKey{}, nullptr);
            SCOPED_TRACE(::testing::Message() << sh.rows << "x" << sh.cols << " path " << int(path) << " edges " << edges);
            expect_copies("current", want, row, col, x, sh.rows, sh.cols);
            auto ctx = [](size_t) { return "per-tensor scalar"; };
            EXPECT_TRUE(same_bits("amax", da.download(), std::vector<float>{amax}, ctx));
            EXPECT_TRUE(same_bits("scale", ds.download(), std::vector<float>{s}, ctx));
            EXPECT_TRUE(same_bits("scale_inv", dsi.download(), std::vector<float>{nq::per_tensor_decode_scale(s)}, ctx));
          }
        }
      }
    }
  }
}

// Several steps of delayed scaling against quant::AmaxHistory (Transformer Engine's rule): scale 1 on
// the first step, then the scale from the last `window` amaxes; a zero or non-finite history max
// (the NaN of step 3 stays in the window for 3 steps) keeps the previous scale.
TEST(QuantizeFp8PerTensor, DelayedScalingOverSteps) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  const int window = 3, margin = 1;
  const int64_t rows = 144, cols = 272;
  const ElementFormat f = ElementFormat::e5m2;
  DeviceBuffer<float> hist(window), ds(1), dsi(1);
  NIBBLE_CUDA_CHECK(cudaMemset(hist.ptr, 0, window * sizeof(float)));
  ds.upload({1.0f});
  dsi.upload({1.0f});
  const nc::Fp8DelayedState st{hist.ptr, window, ds.ptr, dsi.ptr};
  nq::AmaxHistory host(window, margin);
  std::uniform_int_distribution<int> amp(-6, 6);
  for (int64_t step = 0; step < 7; ++step) {
    auto x = make_bf16_tensor(rng, rows, cols, step == 3);  // step 3 has NaN: the scale holds
    for (auto& b : x) b = nibble::fmt::encode_bf16(bf16f(b) * std::ldexp(1.0f, amp(rng)));
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    DeviceBuffer<uint8_t> row(x.size()), col(x.size());
    row.poison(0xA5);
    col.poison(0x5A);
    nc::quantize_fp8_delayed(dx.ptr, rows, cols, f, st, step, {row.ptr, col.ptr}, SrKey{}, nullptr);
    nc::update_fp8_delayed_scale(st, step, f, margin, nullptr);
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const float a = host_amax(x);
    const float step_scale = host.encode_scale(nq::element_max(f), a);
    if (step == 0) EXPECT_EQ(step_scale, 1.0f);
    expect_copies("delayed", reference_cast(x, rows, cols, f, step_scale, SrKey{}), row, col, x, rows, cols);
    host.record(a, nq::element_max(f));
    const float host_scale = host.encode_scale(nq::element_max(f), a);
    auto ctx = [](size_t) { return "per-tensor scalar"; };
    EXPECT_TRUE(same_bits("scale", ds.download(), std::vector<float>{host_scale}, ctx));
    EXPECT_TRUE(same_bits("scale_inv", dsi.download(), std::vector<float>{nq::per_tensor_decode_scale(host_scale)}, ctx));
  }
}

TEST(QuantizeFp8PerTensor, BadShapesThrowBeforeLaunch) {
  NIBBLE_REQUIRE_GPU();
  DeviceBuffer<uint16_t> x(64 * 64);
  DeviceBuffer<float> s(1);
  DeviceBuffer<uint8_t> o(64 * 64);
  EXPECT_THROW(nc::cast_transpose_fp8(x.ptr, 64, 40, ElementFormat::e4m3, s.ptr, {o.ptr, o.ptr}, nullptr, {}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(nc::cast_transpose_fp8(x.ptr + 1, 64, 32, ElementFormat::e4m3, s.ptr, {o.ptr, o.ptr}, nullptr, {}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(nc::cast_transpose_fp8(x.ptr, 64, 32, ElementFormat::e2m1, s.ptr, {o.ptr, o.ptr}, nullptr, {}, nullptr),
               std::invalid_argument);
}

}  // namespace
