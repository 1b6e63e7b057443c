// GPU == CPU reference, bit for bit, for the MXFP4 -> E4M3 re-encoding (codes, set scales in the
// cuBLASLt layouts, violation counts). Fresh random MXFP4 tensors each run: per row a base exponent
// and block exponents below it with controlled spreads (exactly 14 and 15 binades inside a row and
// inside one 1x128 group, wide random spreads), all-zero blocks (+0 and -0 codes) with far-away
// scales, NaN scales (0xFF), all-zero rows, the extreme E8M0 codes 0 and 254. Outputs poisoned 0xA5.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_support.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/reencode.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format.hpp"
#include "nibble/quant/reencode.hpp"
#include "test_seed.hpp"

namespace {

using namespace nibble;

using test::DeviceBuffer;

enum RowKind { kExact, kRowSpread14, kRowSpread15, kGroupSpread14, kGroupSpread15, kWide, kSpecials, kAllZero, kKinds };

// A random MXFP4 tensor whose rows cycle through the kinds above (random order per run).
quant::QuantizedTensor make_mxfp4(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  auto q = quant::make_quantized_tensor(rows, cols, quant::ElementFormat::e2m1, 1, 32, quant::ScaleFormat::e8m0, false);
  const int64_t nb = cols / 32;
  std::uniform_int_distribution<int> base_k(-110, 110), nib(0, 15), kind_of(0, kKinds - 1);
  auto u = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto code_of = [](int k) { return static_cast<uint8_t>(fmt::encode_e8m0_exponent(k)); };
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = r < kKinds ? static_cast<int>(r) : kind_of(rng);
    const int base = base_k(rng);
    const int spread = kind == kWide ? 40 : 14;
    for (int64_t b = 0; b < nb; ++b) {
      q.scale_codes[static_cast<size_t>(r * nb + b)] = code_of(base - u(0, kind == kExact ? u(0, 14) : spread));
      bool nonzero = false;
      for (int64_t c = b * 32; c < (b + 1) * 32; ++c) {
        const uint8_t e = kind == kAllZero ? static_cast<uint8_t>(u(0, 1) * 8) : static_cast<uint8_t>(nib(rng));
        q.set_code(r, c, e);
        nonzero |= (e & 7) != 0;
      }
      if (!nonzero && kind != kAllZero) q.set_code(r, b * 32 + u(0, 31), static_cast<uint8_t>(u(1, 7) | 8 * u(0, 1)));
    }
    auto scale = [&](int64_t b) -> uint8_t& { return q.scale_codes[static_cast<size_t>(r * nb + b)]; };
    // The row's (and, at group kinds, one group's) extremes placed exactly.
    const int64_t g = nb >= 8 ? 4 * u(0, static_cast<int>(nb / 4) - 1) : 0;  // first block of a random 1x128 group
    switch (kind) {
      case kRowSpread14: scale(0) = code_of(base); scale(nb - 1) = code_of(base - 14); break;
      case kRowSpread15:  // the row spans 15 binades, but no 1x128 group does
        for (int64_t b = 0; b < nb; ++b) scale(b) = code_of(b < nb / 2 ? base - u(0, 7) : base - u(8, 15));
        if (nb >= 8) { scale(0) = code_of(base); scale(nb - 1) = code_of(base - 15); }
        break;
      case kGroupSpread14:
      case kGroupSpread15:
        if (nb >= 4) {
          scale(g) = code_of(base + 1);
          scale(g + 3) = code_of(base + 1 - (kind == kGroupSpread14 ? 14 : 15));
        }
        break;
      case kSpecials:
        if (nb >= 4) {
          scale(0) = fmt::kE8M0Nan;                           // NaN block (has non-zero codes)
          for (int64_t c = 32; c < 64; ++c) q.set_code(r, c, static_cast<uint8_t>(c % 2 ? 8 : 0));  // +-0 block
          scale(1) = code_of(u(0, 1) ? 127 : -127);           // ... with a far-away scale
          scale(2) = code_of(127);                            // extreme codes 254 and 0
          scale(3) = code_of(-127);
        }
        break;
      default: break;
    }
  }
  return q;
}

void expect_equal_bytes(const char* what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t cols) {
  ASSERT_GE(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << ": first mismatch at (" << i / cols << ", " << i % cols << "): got 0x" << std::hex
                    << int(got[i]) << ", expected 0x" << int(want[i]);
      return;
    }
  }
}

struct Case {
  int64_t rows, cols;
};
// cols 96 / 352: no 1x128 groups; 22400 / 48000 / 96000 exercise 2, 4 and 8 blocks per thread;
// 131456 does not fit in registers (the re-reading pass 2).
const Case kCases[] = {{64, 96}, {40, 352}, {96, 512}, {33, 4096}, {17, 16384}, {9, 22400}, {9, 48000}, {5, 96000}, {3, 131456}};

void run_case(const Case& cs, std::mt19937_64& rng, cuda::MxScaleLayout layout) {
  const auto q = make_mxfp4(cs.rows, cs.cols, rng);
  const bool grid = layout == cuda::MxScaleLayout::grid;
  // Tiled padding poisoned: the re-encoding must not read it.
  const auto placed = grid ? q.scale_codes : nibble::testing::tiled_from_grid(q.scale_codes, cs.rows, cs.cols, 0xA5);
  DeviceBuffer<uint8_t> codes(q.codes.size()), scales(placed.size());
  codes.upload(q.codes);
  scales.upload(placed);
  const cuda::Mxfp4ConstPlanes in{codes.p, scales.p, nullptr, layout};
  SCOPED_TRACE(grid ? "grid scales" : "tiled128x4 scales");
  const bool groups = cs.cols % 128 == 0;
  const int64_t want_rows = quant::count_reencode_violations(q, quant::ReencodeSet::row);
  const int64_t want_groups = groups ? quant::count_reencode_violations(q, quant::ReencodeSet::group_1x128) : -1;
  for (auto g : {cuda::ReencodeGranularity::row, cuda::ReencodeGranularity::group128}) {
    if (g == cuda::ReencodeGranularity::group128 && !groups) continue;
    const bool row = g == cuda::ReencodeGranularity::row;
    SCOPED_TRACE(::testing::Message() << cs.rows << "x" << cs.cols << (row ? " row" : " group128"));
    const auto ref = quant::reencode_mxfp4_as_e4m3(q, row ? quant::ReencodeSet::row : quant::ReencodeSet::group_1x128);
    DeviceBuffer<uint8_t> out(q.codes.size() * 2);
    DeviceBuffer<float> sc(static_cast<size_t>(cuda::reencode_scale_count(g, cs.rows, cs.cols)));
    DeviceBuffer<cuda::ReencodeViolations> v(1);
    const char* path = cuda::reencode_mxfp4_e4m3(in, cs.rows, cs.cols, g, out.p, sc.p, v.p, nullptr);
    EXPECT_NE(std::string(path).find(row ? "outer_vec" : "vec128"), std::string::npos) << path;
    expect_equal_bytes("e4m3 codes", out.download(), ref.codes, cs.cols);
    const auto got_scales = sc.download();
    const int64_t per_row = row ? 1 : cs.cols / 128;
    for (int64_t r = 0; r < cs.rows; ++r) {
      for (int64_t s = 0; s < per_row; ++s) {
        const int64_t at = row ? cuda::scale_layout::outer_vec_index(r) : cuda::scale_layout::vec128_index(cs.rows, r, s * 128);
        const float want = ref.set_scales[static_cast<size_t>(r * per_row + s)];
        if (fmt::float_bits(got_scales[static_cast<size_t>(at)]) != fmt::float_bits(want)) {
          ADD_FAILURE() << "set scale (" << r << ", set " << s << "): got " << got_scales[static_cast<size_t>(at)]
                        << ", expected " << want;
          r = cs.rows;
          break;
        }
      }
    }
    // Padding rows of the VEC128 layout stay untouched (documented): still poison.
    if (!row) {
      for (int64_t r = cs.rows; r < cuda::scale_layout::vec128_stride(cs.rows); ++r) {
        EXPECT_EQ(fmt::float_bits(got_scales[static_cast<size_t>(cuda::scale_layout::vec128_index(cs.rows, r, 0))]), 0xA5A5A5A5u);
      }
    }
    cuda::ReencodeViolations got_v;
    NIBBLE_CUDA_CHECK(cudaMemcpy(&got_v, v.p, sizeof got_v, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_v.row_sets, row ? want_rows : -1);
    EXPECT_EQ(got_v.group128_sets, want_groups);
    // In rows whose spread is <= 14 (computed here, independently of the reference), every element
    // decodes to exactly its MXFP4 value.
    const auto got = out.download();
    const int64_t nb = cs.cols / 32;
    int64_t exact_rows = 0;
    for (int64_t r = 0; r < cs.rows && row; ++r) {
      int kmax = -1000, kmin = 1000;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t sc = q.scale_codes[static_cast<size_t>(r * nb + b)];
        bool nonzero = false;
        for (int64_t c = b * 32; c < (b + 1) * 32; ++c) nonzero |= (q.code_at(r, c) & 7) != 0;
        if (sc == fmt::kE8M0Nan || !nonzero) continue;
        kmax = std::max(kmax, fmt::e8m0_exponent(sc));
        kmin = std::min(kmin, fmt::e8m0_exponent(sc));
      }
      if (kmax - kmin > 14) continue;
      ++exact_rows;
      for (int64_t c = 0; c < cs.cols; ++c) {
        if (q.scale_codes[static_cast<size_t>(r * nb + c / 32)] == fmt::kE8M0Nan) continue;
        ASSERT_EQ(fmt::decode_e4m3(got[static_cast<size_t>(r * cs.cols + c)]) * got_scales[static_cast<size_t>(r)],
                  q.unscaled_value_at(r, c))
            << "(" << r << ", " << c << ")";
      }
    }
    if (row) EXPECT_GT(exact_rows, 0) << "the generator must produce exact rows";
  }
  DeviceBuffer<cuda::ReencodeViolations> v(1);
  cuda::count_reencode_violations_mxfp4(in, cs.rows, cs.cols, v.p, nullptr);
  cuda::ReencodeViolations got_v;
  NIBBLE_CUDA_CHECK(cudaMemcpy(&got_v, v.p, sizeof got_v, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_v.row_sets, want_rows) << "count only";
  EXPECT_EQ(got_v.group128_sets, want_groups) << "count only";
}

TEST(ReencodeMxfp4, MatchesReferenceAllShapesAndGranularities) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (const Case& cs : kCases) {
    for (auto layout : {cuda::MxScaleLayout::grid, cuda::MxScaleLayout::tiled128x4}) run_case(cs, rng, layout);
  }
}

// Rows that each hold one kind only, so the counts are known without the reference.
TEST(ReencodeMxfp4, ExactSpreadsAreNotViolations) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (int spread : {14, 15}) {
    const int64_t rows = 8, cols = 256;
    auto q = make_mxfp4(rows, cols, rng);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        q.scale_codes[static_cast<size_t>(r * 8 + b)] = fmt::encode_e8m0_exponent(b == 5 ? 3 - spread : 3);
        q.set_code(r, b * 32 + 7, 1);  // every block holds a non-zero code
      }
    }
    DeviceBuffer<uint8_t> codes(q.codes.size()), scales(q.scale_codes.size()), out(q.codes.size() * 2);
    codes.upload(q.codes);
    scales.upload(q.scale_codes);
    DeviceBuffer<float> sc(rows);
    DeviceBuffer<cuda::ReencodeViolations> v(1);
    cuda::reencode_mxfp4_e4m3({codes.p, scales.p, nullptr}, rows, cols, cuda::ReencodeGranularity::row, out.p, sc.p, v.p, nullptr);
    cuda::ReencodeViolations got;
    NIBBLE_CUDA_CHECK(cudaMemcpy(&got, v.p, sizeof got, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got.row_sets, spread == 14 ? 0 : rows) << "spread " << spread;
    EXPECT_EQ(got.group128_sets, spread == 14 ? 0 : rows) << "spread " << spread;
    const auto ref = quant::reencode_mxfp4_as_e4m3(q, quant::ReencodeSet::row);
    expect_equal_bytes("e4m3 codes", out.download(), ref.codes, cols);
  }
}

TEST(ReencodeMxfp4, ChooseGranularity) {
  using cuda::ReencodeGranularity;
  EXPECT_EQ(cuda::choose_reencode_granularity({0, 0}), ReencodeGranularity::row);
  EXPECT_EQ(cuda::choose_reencode_granularity({0, -1}), ReencodeGranularity::row);
  EXPECT_EQ(cuda::choose_reencode_granularity({3, 0}), ReencodeGranularity::group128);
  EXPECT_EQ(cuda::choose_reencode_granularity({-1, 0}), ReencodeGranularity::group128);
  try {
    cuda::choose_reencode_granularity({3, 2});
    ADD_FAILURE() << "expected a throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("spread > 14 inside a 1x128 group"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::choose_reencode_granularity({3, -1}), std::runtime_error);
  EXPECT_EQ(cuda::reencode_scale_count(ReencodeGranularity::row, 7, 256), 7);
  EXPECT_EQ(cuda::reencode_scale_count(ReencodeGranularity::group128, 7, 256), 2 * 8);
}

TEST(ReencodeMxfp4, ClearErrorsBeforeLaunch) {
  // Host-side checks run before any device work: testable without a GPU.
  uint8_t* fake = reinterpret_cast<uint8_t*>(uintptr_t{256});
  float* fs = reinterpret_cast<float*>(fake);
  const cuda::Mxfp4ConstPlanes in{fake, fake, nullptr};
  using cuda::ReencodeGranularity;
  EXPECT_THROW(cuda::reencode_mxfp4_e4m3(in, 4, 48, ReencodeGranularity::row, fake, fs, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::reencode_mxfp4_e4m3(in, 4, 96, ReencodeGranularity::group128, fake, fs, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::reencode_mxfp4_e4m3(in, 0, 128, ReencodeGranularity::row, fake, fs, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::reencode_mxfp4_e4m3({fake + 1, fake, nullptr}, 4, 128, ReencodeGranularity::row, fake, fs, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::reencode_mxfp4_e4m3(in, 4, 128, ReencodeGranularity::row, nullptr, fs, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::count_reencode_violations_mxfp4(in, 4, 128, nullptr, nullptr), std::invalid_argument);
}

}  // namespace
