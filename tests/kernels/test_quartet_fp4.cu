// GPU == CPU reference, bit for bit, for the FP4 kernels: Quartet forward (Hadamard + QuEST/absmax),
// backward quantizer (row-wise, column-wise, both, stochastic, from MXFP4), epilogue, MXFP4
// quantizer and decode. Fresh random BF16 data each run (normals times 2^U(-24, 24) per row, plus
// zero groups, NaN, inf, BF16 subnormals, exact E2M1 ties and extreme scales); outputs poisoned with
// 0xA5 first.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quantize_fp4.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/reencode.hpp"
#include "test_seed.hpp"

namespace {

using namespace nibble;

using test::DeviceBuffer;

// Random BF16 matrix with a spread of magnitudes and the edge cases of every FP4 recipe.
std::vector<uint16_t> make_input(int64_t rows, int64_t cols, std::mt19937_64& rng, bool specials) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-24, 24);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = fmt::pow2f(expo(rng));
    for (int64_t c = 0; c < cols; ++c) {
      float v = normal(rng) * mag;
      if (v == 0.0f) v = mag;  // never zeros as data (zeros come only from the edge cases below)
      x[static_cast<size_t>(r * cols + c)] = fmt::encode_bf16(v);
    }
  }
  if (specials && rows >= 8 && cols >= 64) {
    auto at = [&](int64_t r, int64_t c) -> uint16_t& { return x[static_cast<size_t>(r * cols + c)]; };
    for (int c = 0; c < 32; ++c) at(0, c) = 0;                       // all-zero group
    for (int c = 32; c < 64; ++c) at(0, c) = (c & 1) ? 0x8000 : 0;   // signed zeros
    at(1, 5) = 0x7fc0;                                               // NaN
    at(2, 40) = 0x7f80;                                              // +inf
    at(3, 3) = 0xff80;                                               // -inf
    for (int c = 0; c < 32; ++c) at(4, c) = static_cast<uint16_t>(1 + c);  // BF16 subnormals
    // Exact E2M1 ties once scaled by the OCP rule (amax 4 -> k = 0): 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.
    const float ties[] = {4.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, -0.25f, -2.5f, -3.5f, 1.0f, -1.0f};
    for (int c = 0; c < 32; ++c) at(5, c) = fmt::encode_bf16(ties[c % 12]);
    for (int c = 32; c < 64; ++c) at(6, c) = fmt::encode_bf16(c % 2 ? 1e-30f : -3e4f);  // huge spread
    // Scales at the ends of the BF16-pair encoder's range (fp4::kBf16MagicMinK = -120, kE2m1MagicMaxK =
    // 100) and beyond it (the generic paths take over): one 32-group each, MX exponents 111, 100,
    // -120 and -124.
    const float ends[] = {0x1p112f, 0x1p101f, 0x1p-119f, 0x1p-123f};
    for (int64_t c = 0; c < std::min<int64_t>(cols, 128); ++c) {
      const float m = 1.0f + static_cast<float>(c % 16) / 8.0f;  // 1 .. 2.875: floor(log2 amax) = log2(end) + 1
      at(7, c) = fmt::encode_bf16(ends[c / 32] * m * (c % 3 ? 1.0f : -1.0f));
    }
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

// Compares bytes and prints the first mismatch with the element's input value.
void expect_bytes(const char* what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                  const std::vector<float>& input, int64_t elems_per_byte_num, int64_t elems_per_byte_den) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      const size_t e = static_cast<size_t>(static_cast<int64_t>(i) * elems_per_byte_den / elems_per_byte_num);
      const double in = e < input.size() ? input[e] : 0.0;
      ADD_FAILURE() << what << ": first mismatch at byte " << i << " (element ~" << e << ", input " << in
                    << "): got 0x" << std::hex << int(got[i]) << ", expected 0x" << int(want[i]);
      return;
    }
  }
}

// Packs a reference tensor's codes exactly as it stores them (two per byte, low nibble even).
void expect_mxfp4(const char* what, const quant::QuantizedTensor& ref, const DeviceBuffer<uint8_t>& codes,
                  const DeviceBuffer<uint8_t>& scales, const std::vector<float>& input) {
  expect_bytes((std::string(what) + " codes").c_str(), codes.download(), ref.codes, input, 1, 2);
  expect_bytes((std::string(what) + " scales").c_str(), scales.download(), ref.scale_codes, input, 1, 32);
}

struct Shape {
  int64_t rows, cols;
};
// 15872 tokens is the CodonFM batch; 96 and 320 exercise partial tiles (not multiples of 256).
const Shape kShapes[] = {{64, 256}, {96, 320}, {160, 4096}};

TEST(QuartetForward, MatchesReferenceAllVariants) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Shape s : kShapes) {
    const auto x = make_input(s.rows, s.cols, rng, true);
    const auto xf = to_float(x);
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    for (int h : {16, 32, 64, 128}) {
      for (bool rotate : {true, false}) {
        for (auto kind : {quant::ForwardQuantizer::quest, quant::ForwardQuantizer::absmax}) {
          if (s.cols % h != 0) continue;
          SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " h" << h << " rotate " << rotate
                                            << " quest " << (kind == quant::ForwardQuantizer::quest));
          const auto ref = quant::quantize_quartet_forward(xf.data(), s.rows, s.cols, h, rotate, kind);
          DeviceBuffer<uint8_t> codes(x.size() / 2), scales(x.size() / 32), mask(x.size() / 8);
          cuda::QuartetForwardOptions o{h, rotate, kind};
          cuda::quartet_forward_quantize(dx.p, cuda::Fp4DenseType::bf16, s.rows, s.cols, o,
                                         {codes.p, scales.p, mask.p}, nullptr);
          expect_mxfp4("forward", ref, codes, scales, xf);
          expect_bytes("forward mask", mask.download(), ref.mask, xf, 1, 8);
        }
      }
    }
  }
}

TEST(QuartetForward, Fp32InputMatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 64, cols = 512;
  auto xf = to_float(make_input(rows, cols, rng, true));
  xf[7] = 1e-40f;  // an FP32 subnormal, which BF16 inputs cannot carry
  DeviceBuffer<float> dx(xf.size());
  dx.upload(xf);
  const auto ref = quant::quantize_quartet_forward(xf.data(), rows, cols);
  DeviceBuffer<uint8_t> codes(xf.size() / 2), scales(xf.size() / 32), mask(xf.size() / 8);
  cuda::quartet_forward_quantize(dx.p, cuda::Fp4DenseType::fp32, rows, cols, {}, {codes.p, scales.p, mask.p}, nullptr);
  expect_mxfp4("forward fp32", ref, codes, scales, xf);
  expect_bytes("forward fp32 mask", mask.download(), ref.mask, xf, 1, 8);
}

TEST(QuartetBackward, RowwiseColwiseNearestAndStochastic) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Shape s : kShapes) {
    const auto x = make_input(s.rows, s.cols, rng, true);
    const auto xf = to_float(x);
    const auto xt = transpose(xf, s.rows, s.cols);
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    for (int h : {16, 32}) {
      for (bool sr : {false, true}) {
        for (int copies : {1, 2, 3}) {  // 1 row-wise only, 2 column-wise only, 3 both
          SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " h" << h
                                            << " sr " << sr << " copies " << copies);
          cuda::QuartetBackwardOptions o;
          o.sign_seed = rng();
          o.hadamard_size = h;
          o.rounding = quant::SrKey{sr, rng(), quant::kStreamQuartetBackward};
          DeviceBuffer<uint8_t> rc(x.size() / 2), rs(x.size() / 32), cc(x.size() / 2), cs(x.size() / 32);
          cuda::Mxfp4Planes row{}, col{};
          if (copies & 1) row = {rc.p, rs.p, nullptr};
          if (copies & 2) col = {cc.p, cs.p, nullptr};
          cuda::quartet_backward_quantize(dx.p, cuda::Fp4DenseType::bf16, s.rows, s.cols, o, row, col, nullptr);
          if (copies & 1) {
            const auto ref = quant::quantize_quartet_backward(xf.data(), s.rows, s.cols, o.sign_seed, h, true, o.rounding);
            expect_mxfp4("backward row-wise", ref, rc, rs, xf);
          }
          if (copies & 2) {
            const auto ref = quant::quantize_quartet_backward(xt.data(), s.cols, s.rows, o.sign_seed, h, true, o.rounding);
            expect_mxfp4("backward column-wise", ref, cc, cs, xt);
          }
        }
      }
    }
  }
}

TEST(QuartetBackward, LargeRotationsAndNoRotationRowwise) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 40, cols = 384;
  const auto x = make_input(rows, cols, rng, true);
  const auto xf = to_float(x);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  for (int h : {64, 128, 0}) {
    SCOPED_TRACE(h);
    cuda::QuartetBackwardOptions o;
    o.sign_seed = rng();
    o.hadamard_size = h == 0 ? 32 : h;
    o.rotate = h != 0;
    DeviceBuffer<uint8_t> rc(x.size() / 2), rs(x.size() / 32);
    cuda::quartet_backward_quantize(dx.p, cuda::Fp4DenseType::bf16, rows, cols, o, {rc.p, rs.p, nullptr}, {}, nullptr);
    const auto ref = quant::quantize_quartet_backward(xf.data(), rows, cols, o.sign_seed, o.hadamard_size, o.rotate);
    expect_mxfp4("backward row-wise", ref, rc, rs, xf);
  }
}

TEST(QuartetBackward, FromMxfp4TransposedMatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 96, cols = 320;
  const auto x = make_input(rows, cols, rng, true);
  const auto xf = to_float(x);
  const auto fwd = quant::quantize_quartet_forward(xf.data(), rows, cols);
  DeviceBuffer<uint8_t> qc(fwd.codes.size()), qs(fwd.scale_codes.size());
  qc.upload(fwd.codes);
  qs.upload(fwd.scale_codes);
  const auto deq_t = transpose(quant::dequantize(fwd), rows, cols);
  {
    cuda::QuartetBackwardOptions o;
    o.sign_seed = rng();
    o.rounding = quant::SrKey{true, rng(), quant::kStreamQuartetBackward};
    DeviceBuffer<uint8_t> cc(x.size() / 2), cs(x.size() / 32);
    cuda::quartet_backward_quantize_mxfp4_transposed({qc.p, qs.p, nullptr}, rows, cols, o, {cc.p, cs.p, nullptr},
                                                     nullptr);
    const auto ref = quant::quantize_quartet_backward(deq_t.data(), cols, rows, o.sign_seed, 32, true, o.rounding);
    expect_mxfp4("backward from mxfp4", ref, cc, cs, deq_t);
  }
}

// FP32 input (the Python layer's float32 gradients) through the tile kernel, with an FP32
// subnormal that BF16 cannot carry.
TEST(QuartetBackward, Fp32InputTileMatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 96, cols = 352;
  auto xf = to_float(make_input(rows, cols, rng, true));
  xf[7 * cols + 9] = 1e-40f;
  const auto xt = transpose(xf, rows, cols);
  DeviceBuffer<float> dx(xf.size());
  dx.upload(xf);
  {
    for (bool sr : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "sr " << sr);
      cuda::QuartetBackwardOptions o;
      o.sign_seed = rng();
      o.rounding = quant::SrKey{sr, rng(), quant::kStreamQuartetBackward};
      DeviceBuffer<uint8_t> rc(xf.size() / 2), rs(xf.size() / 32), cc(xf.size() / 2), cs(xf.size() / 32);
      cuda::quartet_backward_quantize(dx.p, cuda::Fp4DenseType::fp32, rows, cols, o, {rc.p, rs.p, nullptr},
                                      {cc.p, cs.p, nullptr}, nullptr);
      expect_mxfp4("fp32 row-wise", quant::quantize_quartet_backward(xf.data(), rows, cols, o.sign_seed, 32, true,
                                                                     o.rounding), rc, rs, xf);
      expect_mxfp4("fp32 column-wise", quant::quantize_quartet_backward(xt.data(), cols, rows, o.sign_seed, 32, true,
                                                                        o.rounding), cc, cs, xt);
    }
  }
}

// The 64x128 tile kernel on a tensor with many more tiles than resident CTAs, with a partial last
// column tile (8480 = 66 x 128 + 32) and a partial last row tile (1632 = 25 x 64 + 32).
TEST(QuartetBackward, TileKernelMatchesReferenceOnManyTiles) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 1632, cols = 8480;
  const auto x = make_input(rows, cols, rng, true);
  const auto xf = to_float(x);
  const auto xt = transpose(xf, rows, cols);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  const auto fwd = quant::quantize_quartet_forward(xf.data(), rows, cols);
  DeviceBuffer<uint8_t> qc(fwd.codes.size()), qs(fwd.scale_codes.size());
  qc.upload(fwd.codes);
  qs.upload(fwd.scale_codes);
  const auto deq_t = transpose(quant::dequantize(fwd), rows, cols);
  {
    for (bool sr : {false, true}) {
      SCOPED_TRACE(sr);
      cuda::QuartetBackwardOptions o;
      o.sign_seed = rng();
      o.rounding = quant::SrKey{sr, rng(), quant::kStreamQuartetBackward};
      DeviceBuffer<uint8_t> rc(x.size() / 2), rs(x.size() / 32), cc(x.size() / 2), cs(x.size() / 32);
      const std::string path = cuda::quartet_backward_quantize(dx.p, cuda::Fp4DenseType::bf16, rows, cols, o,
                                                               {rc.p, rs.p, nullptr}, {cc.p, cs.p, nullptr}, nullptr);
      EXPECT_NE(path.find("64x128"), std::string::npos) << path;
      expect_mxfp4("backward row-wise", quant::quantize_quartet_backward(xf.data(), rows, cols, o.sign_seed, 32, true,
                                                                         o.rounding), rc, rs, xf);
      expect_mxfp4("backward column-wise", quant::quantize_quartet_backward(xt.data(), cols, rows, o.sign_seed, 32,
                                                                            true, o.rounding), cc, cs, xt);
      DeviceBuffer<uint8_t> tc(x.size() / 2), ts(x.size() / 32);
      cuda::quartet_backward_quantize_mxfp4_transposed({qc.p, qs.p, nullptr}, rows, cols, o, {tc.p, ts.p, nullptr},
                                                       nullptr);
      expect_mxfp4("backward from mxfp4", quant::quantize_quartet_backward(deq_t.data(), cols, rows, o.sign_seed, 32,
                                                                           true, o.rounding), tc, ts, deq_t);
      if (::testing::Test::HasFailure()) break;
    }
  }
}

TEST(QuartetEpilogue, MatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const int64_t rows = 48, cols = 512;
  const auto gf = to_float(make_input(rows, cols, rng, false));
  std::vector<uint8_t> mask(static_cast<size_t>(rows * cols / 8));
  for (auto& b : mask) b = static_cast<uint8_t>(rng() | rng());  // mostly trusted, some masked
  DeviceBuffer<float> dg(gf.size());
  dg.upload(gf);
  DeviceBuffer<uint8_t> dm(mask.size());
  dm.upload(mask);
  for (int h : {16, 32, 64, 128}) {
    SCOPED_TRACE(h);
    const auto ref = quant::quartet_dgrad_epilogue(gf.data(), rows, cols, mask, quant::Rotation{h, quant::SignKind::none, 0});
    DeviceBuffer<float> out(gf.size());
    DeviceBuffer<uint16_t> out16(gf.size());
    cuda::QuartetEpilogueOptions o;
    o.hadamard_size = h;
    cuda::quartet_epilogue(dg.p, cuda::Fp4DenseType::fp32, rows, cols, dm.p, o, out.p, cuda::Fp4DenseType::fp32, nullptr);
    cuda::quartet_epilogue(dg.p, cuda::Fp4DenseType::fp32, rows, cols, dm.p, o, out16.p, cuda::Fp4DenseType::bf16, nullptr);
    const auto got = out.download();
    const auto got16 = out16.download();
    for (size_t i = 0; i < ref.size(); ++i) {
      if (fmt::float_bits(got[i]) != fmt::float_bits(ref[i]) || got16[i] != fmt::encode_bf16(ref[i])) {
        ADD_FAILURE() << "epilogue: first mismatch at " << i << " (g " << gf[i] << "): got " << got[i] << " / bf16 0x"
                      << std::hex << got16[i] << ", expected " << ref[i];
        break;
      }
    }
  }
}

TEST(Mxfp4, QuantizeAndDecodeMatchReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Shape s : kShapes) {
    const auto x = make_input(s.rows, s.cols, rng, true);
    const auto xf = to_float(x);
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    for (auto rule : {quant::MxScaleRule::ocp, quant::MxScaleRule::te}) {
      for (bool sr : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " te " << (rule == quant::MxScaleRule::te) << " sr " << sr);
        const quant::SrKey key{sr, rng(), quant::kStreamMx};
        const auto ref = quant::quantize_mx(xf.data(), s.rows, s.cols, quant::ElementFormat::e2m1, rule, key);
        DeviceBuffer<uint8_t> codes(x.size() / 2), scales(x.size() / 32);
        cuda::quantize_mxfp4(dx.p, cuda::Fp4DenseType::bf16, s.rows, s.cols, rule, key, {codes.p, scales.p, nullptr}, nullptr);
        expect_mxfp4("mxfp4", ref, codes, scales, xf);
        DeviceBuffer<uint16_t> dec(x.size());
        cuda::decode_mxfp4_bf16({codes.p, scales.p, nullptr}, s.rows, s.cols, dec.p, nullptr);
        const auto want = quant::decode_to_bf16_unscaled(ref);
        const auto got = dec.download();
        for (size_t i = 0; i < want.size(); ++i) {
          if (got[i] != want[i]) {
            ADD_FAILURE() << "decode mxfp4: first mismatch at " << i << ": got 0x" << std::hex << got[i] << ", expected 0x" << want[i];
            break;
          }
        }
      }
    }
  }
}

// The row + column MXFP4 quantizer (64x128 tile) against quant::quantize_mx of x and of x^T, for
// each rule and rounding, BF16 and FP32 input, each copy alone and both, grid scales and (BF16 input,
// nearest rounding: the BF16 tile) 128x4-tiled scales; shapes with partial row tiles (96 = 64 + 32;
// 64, 160 and 192 leave half of the last 128-row scale tile to the launcher's zeroing) and partial
// column tiles (320 = 2 x 128 + 64), and one with many tiles.
TEST(Mxfp4, RowColMatchesReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const Shape shapes[] = {{64, 256}, {96, 320}, {160, 4096}, {192, 384}, {1632, 544}};
  for (const Shape s : shapes) {
    const auto x = make_input(s.rows, s.cols, rng, true);
    auto xf = to_float(x);
    DeviceBuffer<uint16_t> dx(x.size());
    dx.upload(x);
    auto xf32 = xf;
    xf32[3 * s.cols + 11] = 1e-40f;  // an FP32 subnormal (not representable in BF16)
    xf32[2 * s.cols + 17] = 3.0000002f;
    DeviceBuffer<float> dxf(xf32.size());
    dxf.upload(xf32);
    for (bool fp32 : {false, true}) {
      const auto& in = fp32 ? xf32 : xf;
      const auto xt = transpose(in, s.rows, s.cols);
      for (auto rule : {quant::MxScaleRule::ocp, quant::MxScaleRule::te}) {
        for (bool sr : {false, true}) {
          for (int copies : {1, 2, 3}) {
           for (auto layout : {cuda::MxScaleLayout::grid, cuda::MxScaleLayout::tiled128x4}) {
            const bool tiled = layout == cuda::MxScaleLayout::tiled128x4;
            if (tiled && (fp32 || sr)) continue;  // tiled scales: the BF16 tile only (rejection test below)
            SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << " fp32 " << fp32 << " te "
                                              << (rule == quant::MxScaleRule::te) << " sr " << sr
                                              << " copies " << copies << (tiled ? " tiled scales" : " grid scales"));
            const quant::SrKey key{sr, rng(), quant::kStreamMx};
            const size_t rs_n = tiled ? static_cast<size_t>(cuda::scale_layout::tiled_count(s.rows, s.cols, 32)) : x.size() / 32;
            const size_t cs_n = tiled ? static_cast<size_t>(cuda::scale_layout::tiled_count(s.cols, s.rows, 32)) : x.size() / 32;
            DeviceBuffer<uint8_t> rc(x.size() / 2), rs(rs_n), cc(x.size() / 2), cs(cs_n);
            const cuda::Mxfp4Planes none{nullptr, nullptr, nullptr};
            const cuda::Mxfp4Planes row = (copies & 1) ? cuda::Mxfp4Planes{rc.p, rs.p, nullptr, layout} : none;
            const cuda::Mxfp4Planes col = (copies & 2) ? cuda::Mxfp4Planes{cc.p, cs.p, nullptr, layout} : none;
            const void* src = fp32 ? static_cast<const void*>(dxf.p) : static_cast<const void*>(dx.p);
            const char* path = cuda::quantize_mxfp4_rowcol(
                src, fp32 ? cuda::Fp4DenseType::fp32 : cuda::Fp4DenseType::bf16, s.rows, s.cols, rule, key, row,
                col, nullptr);
            NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
            EXPECT_NE(std::string(path).find("64x128"), std::string::npos) << path;
            EXPECT_EQ(std::string(path).find("128x4-tiled") != std::string::npos, tiled) << path;
            auto check_copy = [&](const char* what, const quant::QuantizedTensor& ref, const DeviceBuffer<uint8_t>& codes,
                                  const DeviceBuffer<uint8_t>& scales, const std::vector<float>& input, int64_t n_rows,
                                  int64_t k) {
              if (!tiled) return expect_mxfp4(what, ref, codes, scales, input);
              expect_bytes((std::string(what) + " codes").c_str(), codes.download(), ref.codes, input, 1, 2);
              expect_bytes((std::string(what) + " tiled scales").c_str(), scales.download(),
                           nibble::testing::tiled_from_grid(ref.scale_codes, n_rows, k), input, 1, 0);  // byte = tiled offset
            };
            if (copies & 1) {
              check_copy("rowcol row-wise",
                         quant::quantize_mx(in.data(), s.rows, s.cols, quant::ElementFormat::e2m1, rule, key), rc, rs,
                         in, s.rows, s.cols);
            }
            if (copies & 2) {
              check_copy("rowcol column-wise",
                         quant::quantize_mx(xt.data(), s.cols, s.rows, quant::ElementFormat::e2m1, rule, key), cc, cs,
                         xt, s.cols, s.rows);
            }
            if (copies != 3) {  // an unrequested copy is never written
              for (const auto* b : copies == 1 ? std::vector<const DeviceBuffer<uint8_t>*>{&cc, &cs}
                                               : std::vector<const DeviceBuffer<uint8_t>*>{&rc, &rs}) {
                const auto untouched = b->download();
                EXPECT_EQ(std::count(untouched.begin(), untouched.end(), uint8_t{0xA5}),
                          static_cast<std::ptrdiff_t>(untouched.size()));
              }
            }
           }
          }
        }
      }
    }
  }
}

// Tiled scales are written by the BF16 tile only and read by the re-encoding only: every other kernel,
// and the tile with SR or FP32 input or with two different layouts, refuses them before any launch
// (so this runs without a GPU: the pointers are never dereferenced).
TEST(Mxfp4, TiledScalesRejectedWhereUnsupported) {
  uint8_t* fake = reinterpret_cast<uint8_t*>(uintptr_t{256});
  const auto tiled = cuda::MxScaleLayout::tiled128x4;
  const cuda::Mxfp4Planes t{fake, fake, fake, tiled}, g{fake, fake, fake};
  const cuda::Mxfp4ConstPlanes ct{fake, fake, fake, tiled};
  auto expect_rejects = [](const char* what, auto&& call) {
    try {
      call();
      ADD_FAILURE() << what << ": no throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("tiled"), std::string::npos) << what << ": " << e.what();
    }
  };
  const auto bf16 = cuda::Fp4DenseType::bf16;
  const auto ocp = quant::MxScaleRule::ocp;
  expect_rejects("quantize_mxfp4", [&] { cuda::quantize_mxfp4(fake, bf16, 64, 256, ocp, {}, t, nullptr); });
  expect_rejects("decode_mxfp4_bf16", [&] {
    cuda::decode_mxfp4_bf16(ct, 64, 256, reinterpret_cast<uint16_t*>(fake), nullptr);
  });
  expect_rejects("quartet_forward_quantize", [&] {
    cuda::quartet_forward_quantize(fake, bf16, 64, 256, cuda::QuartetForwardOptions{}, t, nullptr);
  });
  expect_rejects("quartet_backward_quantize", [&] {
    cuda::quartet_backward_quantize(fake, bf16, 64, 256, cuda::QuartetBackwardOptions{}, t, g, nullptr);
  });
  expect_rejects("quartet_backward_quantize_mxfp4_transposed", [&] {
    cuda::quartet_backward_quantize_mxfp4_transposed(ct, 64, 256, cuda::QuartetBackwardOptions{}, g, nullptr);
  });
  expect_rejects("rowcol, stochastic", [&] {
    cuda::quantize_mxfp4_rowcol(fake, bf16, 64, 256, ocp, quant::SrKey{true, 1, quant::kStreamMx}, t, t, nullptr);
  });
  expect_rejects("rowcol, FP32 input", [&] {
    cuda::quantize_mxfp4_rowcol(fake, cuda::Fp4DenseType::fp32, 64, 256, ocp, {}, t, t, nullptr);
  });
  expect_rejects("rowcol, layouts differ", [&] { cuda::quantize_mxfp4_rowcol(fake, bf16, 64, 256, ocp, {}, t, g, nullptr); });
}

// More tiles than an H100/H200 holds CTAs at once (132 SMs x 5): 65 x 21 = 1365 tiles, the last tile
// column 32 wide, so CTAs of a later wave reuse SMs (and, for a persistent kernel, buffers) of an earlier one.
TEST(Mxfp4, RowColManyTilesMatchReference) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const Shape s{4160, 2592};
  const auto x = make_input(s.rows, s.cols, rng, true);
  const auto xf = to_float(x);
  const auto xt = transpose(xf, s.rows, s.cols);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  for (auto rule : {quant::MxScaleRule::ocp, quant::MxScaleRule::te}) {
    SCOPED_TRACE(::testing::Message() << "te " << (rule == quant::MxScaleRule::te));
    const quant::SrKey nearest{false, 0, quant::kStreamMx};
    DeviceBuffer<uint8_t> rc(x.size() / 2), rs(x.size() / 32), cc(x.size() / 2), cs(x.size() / 32);
    const char* path = cuda::quantize_mxfp4_rowcol(dx.p, cuda::Fp4DenseType::bf16, s.rows, s.cols, rule, nearest,
                                                   {rc.p, rs.p, nullptr}, {cc.p, cs.p, nullptr}, nullptr);
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_NE(std::string(path).find("BF16 smem tile"), std::string::npos) << path;
    expect_mxfp4("many tiles row-wise",
                 quant::quantize_mx(xf.data(), s.rows, s.cols, quant::ElementFormat::e2m1, rule, nearest), rc, rs, xf);
    expect_mxfp4("many tiles column-wise",
                 quant::quantize_mx(xt.data(), s.cols, s.rows, quant::ElementFormat::e2m1, rule, nearest), cc, cs, xt);
  }
}

TEST(Fp4Preconditions, ClearErrorsBeforeLaunch) {
  // Host-side checks run before any device work, so they are testable without a GPU too.
  uint8_t* fake = reinterpret_cast<uint8_t*>(uintptr_t{256});
  cuda::Mxfp4Planes out{fake, fake, nullptr};
  EXPECT_THROW(cuda::quantize_mxfp4(fake, cuda::Fp4DenseType::bf16, 4, 48, quant::MxScaleRule::ocp, {}, out, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::quantize_mxfp4(fake + 2, cuda::Fp4DenseType::bf16, 4, 64, quant::MxScaleRule::ocp, {}, out, nullptr),
               std::invalid_argument);
  cuda::QuartetBackwardOptions o;
  o.hadamard_size = 64;
  EXPECT_THROW(cuda::quartet_backward_quantize(fake, cuda::Fp4DenseType::bf16, 64, 256, o, {}, out, nullptr),
               std::invalid_argument);  // column-wise copies support 16 and 32 only
  o.hadamard_size = 32;
  EXPECT_THROW(cuda::quartet_backward_quantize(fake, cuda::Fp4DenseType::bf16, 40, 256, o, {}, out, nullptr),
               std::invalid_argument);  // rows not a multiple of 32
  EXPECT_THROW(cuda::quartet_forward_quantize(fake, cuda::Fp4DenseType::bf16, 4, 0, {}, out, nullptr),
               std::invalid_argument);
  const cuda::Mxfp4Planes none{nullptr, nullptr, nullptr};
  EXPECT_THROW(cuda::quantize_mxfp4_rowcol(fake, cuda::Fp4DenseType::bf16, 40, 64, quant::MxScaleRule::ocp, {}, out,
                                           none, nullptr),
               std::invalid_argument);  // rows not a multiple of 32
  EXPECT_THROW(cuda::quantize_mxfp4_rowcol(fake, cuda::Fp4DenseType::bf16, 64, 48, quant::MxScaleRule::ocp, {}, none,
                                           out, nullptr),
               std::invalid_argument);  // cols not a multiple of 32
  EXPECT_THROW(cuda::quantize_mxfp4_rowcol(fake, cuda::Fp4DenseType::bf16, 64, 64, quant::MxScaleRule::ocp, {}, none,
                                           none, nullptr),
               std::invalid_argument);  // no copy asked for
  EXPECT_THROW(cuda::quantize_mxfp4_rowcol(fake, cuda::Fp4DenseType::bf16, 64, 64, quant::MxScaleRule::ocp, {},
                                           cuda::Mxfp4Planes{fake, nullptr, nullptr}, none, nullptr),
               std::invalid_argument);  // codes without scales
}

}  // namespace
