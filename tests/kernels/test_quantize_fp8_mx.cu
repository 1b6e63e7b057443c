// mxfp8 quantizer (OCP and round-up rules, row-wise 1x32 and column-wise 32x1, nearest and
// stochastic) and the exact mxfp8 -> BF16 decode (straight and transposed), bit-exact against host
// references built from nibble::quant's shared functions.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpu_test_support.hpp"
#include "nibble/kernels/mxfp8_decode_math.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "test_quantize_fp8_support.hpp"

namespace {

using nibble::quant::ElementFormat;
using nibble::quant::MxScaleRule;
using nibble::quant::SrKey;
using namespace nibble::testing;
namespace nc = nibble::cuda;
namespace nq = nibble::quant;

bool all_bytes_are(const std::vector<uint8_t>& v, uint8_t b) {
  return std::all_of(v.begin(), v.end(), [b](uint8_t x) { return x == b; });
}

struct Shape {
  int64_t rows, cols;
};
// 4192 rows: 33 tile rows, i.e. one full group of 32 tile rows and a short one (tile_coord).
const Shape kShapes[] = {{256, 384}, {96, 160}, {32, 32}, {160, 544}, {4192, 160}};

struct MxOperand {
  std::vector<uint8_t> codes, scales;  // grid scales [n_rows, k / 32]
};
// y is [n_rows, k]: quant::quantize_mx_group on every 1x32 group.
MxOperand reference_mx(const std::vector<float>& y, int64_t n_rows, int64_t k, MxScaleRule rule, const SrKey& key) {
  MxOperand o{std::vector<uint8_t>(y.size()), std::vector<uint8_t>(y.size() / 32)};
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t g = 0; g < k / 32; ++g)
      o.scales[r * (k / 32) + g] = nq::quantize_mx_group(&y[r * k + 32 * g], 32, ElementFormat::e4m3, rule, key,
                                                         static_cast<uint64_t>(r * k + 32 * g), &o.codes[r * k + 32 * g]);
  return o;
}

// Grid scales [n_rows, k / 32] in `layout` (tiled padding is zero).
std::vector<uint8_t> place_scales(const std::vector<uint8_t>& grid, int64_t n_rows, int64_t k, nc::MxScaleLayout layout) {
  return layout == nc::MxScaleLayout::grid ? grid : tiled_from_grid(grid, n_rows, k);
}
constexpr nc::MxScaleLayout kLayouts[] = {nc::MxScaleLayout::grid, nc::MxScaleLayout::tiled128x4};
const char* layout_name(nc::MxScaleLayout l) { return l == nc::MxScaleLayout::grid ? "grid" : "tiled"; }

// Which copies a call asks for: the kernels take the row-only and column-only paths too.
enum class Copies { both, row_only, col_only };

void run_case(std::mt19937_64& rng, Shape sh, MxScaleRule rule, nc::MxScaleLayout layout, bool sr,
              Copies copies = Copies::both) {
  const int64_t rows = sh.rows, cols = sh.cols;
  const auto x = make_bf16_tensor(rng, rows, cols, true);
  std::vector<float> xf(x.size()), xt(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = xf[r * cols + c] = bf16f(x[r * cols + c]);
  const SrKey key{sr, rng(), nq::kStreamMx};
  const auto want_row = reference_mx(xf, rows, cols, rule, key);
  const auto want_col = reference_mx(xt, cols, rows, rule, key);
  const bool tiled = layout == nc::MxScaleLayout::tiled128x4;
  const auto want_srow = place_scales(want_row.scales, rows, cols, layout);
  const auto want_scol = place_scales(want_col.scales, cols, rows, layout);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  DeviceBuffer<uint8_t> row(x.size()), col(x.size()), srow(want_srow.size()), scol(want_scol.size());
  for (uint8_t p : kPoisons) {
    row.poison(p);
    col.poison(p);
    srow.poison(p);
    scol.poison(p);
    const bool want_r = copies != Copies::col_only, want_c = copies != Copies::row_only;
    nc::quantize_mxfp8(dx.ptr, rows, cols, rule, {want_r ? row.ptr : nullptr, want_c ? col.ptr : nullptr},
                       want_r ? srow.ptr : nullptr, want_c ? scol.ptr : nullptr, layout, key, nullptr);
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << (rule == MxScaleRule::ocp ? " ocp" : " round_up")
                                      << (tiled ? " tiled" : " grid") << (sr ? " stochastic" : " nearest") << " poison "
                                      << int(p) << " copies " << static_cast<int>(copies));
    auto in_row = [&](size_t i) { return describe_bf16(x[i]); };
    auto in_col = [&](size_t i) {
      return describe_bf16(x[(static_cast<int64_t>(i) % rows) * cols + static_cast<int64_t>(i) / rows]);
    };
    auto in_scale = [](size_t i) { return "scale #" + std::to_string(i); };
    if (want_r) {
      EXPECT_TRUE(same_bits("rowwise codes", row.download(), want_row.codes, in_row));
      EXPECT_TRUE(same_bits("rowwise scales", srow.download(), want_srow, in_scale));
    } else {
      EXPECT_TRUE(all_bytes_are(row.download(), p) && all_bytes_are(srow.download(), p)) << "row-wise copy written";
    }
    if (want_c) {
      EXPECT_TRUE(same_bits("colwise codes", col.download(), want_col.codes, in_col));
      EXPECT_TRUE(same_bits("colwise scales", scol.download(), want_scol, in_scale));
    } else {
      EXPECT_TRUE(all_bytes_are(col.download(), p) && all_bytes_are(scol.download(), p)) << "column-wise copy written";
    }
  }
}

TEST(QuantizeMxfp8, BothRulesBothLayoutsBothRoundings) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (Shape sh : kShapes)
    for (auto rule : {MxScaleRule::ocp, MxScaleRule::te})
      for (auto layout : kLayouts)
        for (bool sr : {false, true}) run_case(rng, sh, rule, layout, sr);
}

// One copy alone: the row-only kernel returns before the column phase (the tiled layout stores its
// staged scale tile there), the column-only kernel skips the row phase's stores.
TEST(QuantizeMxfp8, OneCopyAloneBothLayouts) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (Shape sh : kShapes)
    for (auto layout : kLayouts)
      for (auto copies : {Copies::row_only, Copies::col_only}) run_case(rng, sh, MxScaleRule::ocp, layout, false, copies);
}

// Decode every code under random scales (including 0, 0xFF and extremes), straight and transposed.
TEST(DecodeMxfp8Bf16, StraightAndTransposedMatchReference) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  std::uniform_int_distribution<int> byte(0, 255), mid(100, 150);
  for (Shape sh : kShapes) {
    const int64_t rows = sh.rows, cols = sh.cols;
    std::vector<uint8_t> codes(static_cast<size_t>(rows * cols)), scales(codes.size() / 32);
    for (auto& c : codes) c = static_cast<uint8_t>(byte(rng));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i % 7 == 0 ? byte(rng) : mid(rng));
    scales[0] = 0xFF;
    scales[scales.size() - 1] = 0;
    std::vector<uint16_t> want(codes.size()), want_t(codes.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t v = nc::mxfp8_decode_bf16(codes[r * cols + c], scales[r * (cols / 32) + c / 32]);
        want[r * cols + c] = v;
        want_t[c * rows + r] = v;
      }
    DeviceBuffer<uint8_t> dc(codes.size());
    dc.upload(codes);
    DeviceBuffer<uint16_t> out(codes.size());
    for (auto layout : kLayouts)
    for (bool transpose : {false, true}) {
      const auto placed = place_scales(scales, rows, cols, layout);
      DeviceBuffer<uint8_t> ds(placed.size());
      ds.upload(placed);
      for (uint8_t p : kPoisons) {
        out.poison(p);
        nc::decode_mxfp8_bf16(dc.ptr, ds.ptr, rows, cols, out.ptr, transpose, layout, nullptr);
        SCOPED_TRACE(::testing::Message() << rows << "x" << cols << (transpose ? " transposed " : " straight ")
                                          << layout_name(layout));
        EXPECT_TRUE(same_bits("bf16", out.download(), transpose ? want_t : want, [&](size_t i) {
          const int64_t r = transpose ? static_cast<int64_t>(i) % rows : static_cast<int64_t>(i) / cols;
          const int64_t c = transpose ? static_cast<int64_t>(i) / rows : static_cast<int64_t>(i) % cols;
          return "code " + std::to_string(codes[r * cols + c]) + " scale " + std::to_string(scales[r * (cols / 32) + c / 32]);
        }));
      }
    }
  }
}

// Every (code, scale) pair, straight and transposed: the decode takes bit arithmetic for scales in
// [15, 246] and the scalar path otherwise (and for NaN codes), so the boundaries must agree too.
// Row r, block b holds codes 32 b .. 32 b + 31 with scale (r + 37 b) % 256: 256 rows reach every scale.
TEST(DecodeMxfp8Bf16, EveryCodeUnderEveryScale) {
  NIBBLE_REQUIRE_GPU();
  constexpr int64_t rows = 256, cols = 256;
  std::vector<uint8_t> codes(rows * cols), scales(rows * cols / 32);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) codes[r * cols + c] = static_cast<uint8_t>(c);
    for (int64_t b = 0; b < cols / 32; ++b) scales[r * (cols / 32) + b] = static_cast<uint8_t>((r + 37 * b) % 256);
  }
  std::vector<uint16_t> want(codes.size()), want_t(codes.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t v = nc::mxfp8_decode_bf16(codes[r * cols + c], scales[r * (cols / 32) + c / 32]);
      want[r * cols + c] = v;
      want_t[c * rows + r] = v;
    }
  DeviceBuffer<uint8_t> dc(codes.size());
  dc.upload(codes);
  DeviceBuffer<uint16_t> out(codes.size());
  for (auto layout : kLayouts)
  for (bool transpose : {false, true}) {
    const auto placed = place_scales(scales, rows, cols, layout);
    DeviceBuffer<uint8_t> ds(placed.size());
    ds.upload(placed);
    for (uint8_t p : kPoisons) {
      out.poison(p);
      nc::decode_mxfp8_bf16(dc.ptr, ds.ptr, rows, cols, out.ptr, transpose, layout, nullptr);
      SCOPED_TRACE(::testing::Message() << (transpose ? "transposed " : "straight ") << layout_name(layout));
      EXPECT_TRUE(same_bits("bf16", out.download(), transpose ? want_t : want, [&](size_t i) {
        const int64_t r = transpose ? static_cast<int64_t>(i) % rows : static_cast<int64_t>(i) / cols;
        const int64_t c = transpose ? static_cast<int64_t>(i) / rows : static_cast<int64_t>(i) % cols;
        return "code " + std::to_string(codes[r * cols + c]) + " scale " + std::to_string(scales[r * (cols / 32) + c / 32]);
      }));
    }
  }
}

TEST(QuantizeMxfp8, BadShapesThrowBeforeLaunch) {
  NIBBLE_REQUIRE_GPU();
  DeviceBuffer<uint16_t> x(64 * 64);
  DeviceBuffer<uint8_t> o(64 * 64), s(256);
  EXPECT_THROW(nc::quantize_mxfp8(x.ptr, 48, 64, MxScaleRule::ocp, {o.ptr, o.ptr}, s.ptr, s.ptr, nc::MxScaleLayout::grid, {}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(nc::decode_mxfp8_bf16(o.ptr, s.ptr, 64, 48, x.ptr, false, nc::MxScaleLayout::grid, nullptr), std::invalid_argument);
}

}  // namespace
