// `nibble quantize` end to end: outputs equal the in-process CPU reference bit for bit, codes and
// scales reconstruct the output, and every bad input fails with a message, a non-zero exit code
// and no output file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "cli_runner.hpp"
#include "nibble/io.hpp"
#include "nibble/quant.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

using namespace nibble;
using nibble::cli::testing::CliSandbox;

namespace {

void expect_failure(const CliSandbox& box, const std::string& args, const std::string& needle,
                    const std::string& listing_before) {
  const auto r = box.run(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
  EXPECT_TRUE(r.out.empty()) << "a failed run printed results: " << r.out;
  EXPECT_EQ(box.listing(), listing_before) << "a failed run left files behind: " << args;
}

}  // namespace

TEST(CliQuantize, EveryRecipeAndRoleMatchesTheReference) {
  CliSandbox box;
  const int64_t rows = 128, cols = 256;
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols), 0.05f);
  io::write_npy(box / "x.npy", io::make_f32_tensor("", {rows, cols}, x));
  const uint64_t seed = nibble::testing::fresh_seed();
  for (quant::Recipe recipe : quant::kAllRecipes) {
    for (quant::Role role : {quant::Role::x, quant::Role::w, quant::Role::dy}) {
      const std::string what = std::string(quant::recipe_name(recipe)) + " " + quant::role_name(role);
      const auto r = box.run("quantize --recipe " + std::string(quant::recipe_name(recipe)) + " --role " +
                             quant::role_name(role) + " --seed " + std::to_string(seed) + " --in " + box.path("x.npy") +
                             " --out " + box.path("y.npy"));
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.err;
      EXPECT_NE(r.out.find("path: cpu-reference"), std::string::npos) << r.out;
      quant::QuantOptions o;
      o.role = role;
      o.seed = seed;
      const auto want = quant::quantize_dequantize(recipe, x.data(), rows, cols, o);
      const io::Tensor y = io::read_npy(box / "y.npy");
      EXPECT_EQ(y.shape, (std::vector<int64_t>{rows, cols})) << what;
      const auto got = io::to_float32(y);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
  EXPECT_EQ(box.listing(), "x.npy y.npy");
}

TEST(CliQuantize, CodesAndScalesReconstructTheOutput) {
  CliSandbox box;
  const int64_t rows = 6, cols = 96;
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols), 4.0f);
  io::write_npy(box / "x.npy", io::make_f32_tensor("", {rows, cols}, x));
  const auto r = box.run("quantize --recipe mxfp4 --in " + box.path("x.npy") + " --out " + box.path("y.npy") +
                         " --codes " + box.path("c.npy") + " --scales " + box.path("s.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto y = io::to_float32(io::read_npy(box / "y.npy"));
  const io::Tensor c = io::read_npy(box / "c.npy");
  const io::Tensor s = io::read_npy(box / "s.npy");
  EXPECT_EQ(c.dtype, io::DType::u8);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{rows, cols}));
  EXPECT_EQ(s.dtype, io::DType::f32);
  EXPECT_EQ(s.shape, (std::vector<int64_t>{rows, cols / 32}));
  const auto scales = io::to_float32(s);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t code = c.bytes[static_cast<size_t>(i * cols + j)];
      ASSERT_LT(code, 16) << "E2M1 codes are unpacked, one per byte";
      const float v = fmt::decode_e2m1(code) * scales[static_cast<size_t>(i * (cols / 32) + j / 32)];
      ASSERT_EQ(v, y[static_cast<size_t>(i * cols + j)]) << i << "," << j;
    }
  }
}

TEST(CliQuantize, OneDStaysOneDAndQuartetComesBackUnrotated) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(256);
  io::write_npy(box / "v.npy", io::make_f32_tensor("", {256}, x));
  const auto r = box.run("quantize --recipe quartet --in " + box.path("v.npy") + " --out " + box.path("q.npy") +
                         " --scales " + box.path("s.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const io::Tensor q = io::read_npy(box / "q.npy");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{256}));
  EXPECT_EQ(io::read_npy(box / "s.npy").shape, (std::vector<int64_t>{8}));
  const auto y = io::to_float32(q);
  // In the original domain the output tracks x element by element (in the rotated domain it would not).
  double e2 = 0, s2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e2 += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    s2 += x[i] * static_cast<double>(x[i]);
  }
  EXPECT_LT(e2 / s2, 0.1);
}

TEST(CliQuantize, PerTensorScalesFile) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(4 * 32);
  io::write_npy(box / "x.npy", io::make_f32_tensor("", {4, 32}, x));
  ASSERT_EQ(box.run("quantize --recipe fp8-current --in " + box.path("x.npy") + " --out " + box.path("y.npy") +
                    " --scales " + box.path("s.npy")).exit_code, 0);
  const auto s = io::to_float32(io::read_npy(box / "s.npy"));
  ASSERT_EQ(s.size(), 1u);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(s[0], 1.0f / (448.0f / amax));
}

TEST(CliQuantize, BadInputFailsCleanly) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(4 * 30);
  io::write_npy(box / "x30.npy", io::make_f32_tensor("", {4, 30}, x));
  io::write_npy(box / "x.npy", io::make_f32_tensor("", {4, 32}, nibble::testing::fresh_normal_floats(128)));
  std::vector<uint8_t> bytes(128, 3);
  io::write_npy(box / "u8.npy", io::make_u8_tensor("", {4, 32}, bytes));
  auto truncated = io::encode_npy(io::make_f32_tensor("", {4, 32}, nibble::testing::fresh_normal_floats(128)));
  truncated.resize(truncated.size() - 4);
  io::write_file_atomic(box / "trunc.npy", truncated);
  std::vector<uint8_t> junk = {'h', 'e', 'l', 'l', 'o'};
  io::write_file_atomic(box / "junk.npy", junk);
  // Larger than the machine: data of half its RAM (the run needs ~20 bytes per element), and data of
  // twice its RAM. Both are refused from the header, before the data is read.
  const uint64_t ram = io::host_memory_bytes();
  ASSERT_GT(ram, 0u);
  io::testing::write_sparse_f32_npy(box / "half_ram.npy", ram / 8);
  io::testing::write_sparse_f32_npy(box / "twice_ram.npy", ram / 2);
  const std::string before = box.listing();
  const std::string out = " --out " + box.path("out.npy");
  const std::string in = " --in " + box.path("x.npy");

  expect_failure(box, "quantize --recipe fp16" + in + out, "valid recipes: bf16, fp8-delayed", before);
  expect_failure(box, "quantize --recipe mxfp4 --role g" + in + out, "valid roles", before);
  expect_failure(box, "quantize --recipe mxfp4 --in " + box.path("x30.npy") + out, "not divisible", before);
  expect_failure(box, "quantize --recipe nvfp4 --role w" + in + out, "16", before);  // 4 rows, 16x16 blocks
  expect_failure(box, "quantize --recipe fp8-current --in " + box.path("u8.npy") + out, "float32", before);
  expect_failure(box, "quantize --recipe fp8-current --in " + box.path("trunc.npy") + out, "trunc.npy", before);
  expect_failure(box, "quantize --recipe fp8-current --in " + box.path("junk.npy") + out, "magic", before);
  expect_failure(box, "quantize --recipe fp8-current --in " + box.path("missing.npy") + out, "no such file", before);
  expect_failure(box, "quantize --recipe bf16" + in + out + " --codes " + box.path("c.npy"), "--codes", before);
  expect_failure(box, "quantize --recipe mxfp4" + in + " --out " + box.path("x.npy"), "input file", before);
  expect_failure(box, "quantize --recipe mxfp4" + in + out + " --scales " + box.path("out.npy"), "same file", before);
  expect_failure(box, "quantize --recipe mxfp4" + in + " --out " + box.path("nodir/out.npy"), "nodir", before);
  expect_failure(box, "quantize --recipe mxfp4 --mx-scale-rule up" + in + out, "round-up", before);
  expect_failure(box, "quantize --recipe mxfp4" + in, "--out", before);  // CLI11: required option
  expect_failure(box, "quantize --recipe mxfp4 --in " + box.path("half_ram.npy") + out, "GiB of RAM", before);
  expect_failure(box, "quantize --recipe mxfp4 --in " + box.path("twice_ram.npy") + out,
                 std::to_string(20 * (ram / 2)) + " bytes", before);
}

// The grammar `nibble error` shares: the input positional (--in is an alias), f64 rounded to float32 with a
// note, rank 3 and more read as (prod of leading dims, last dim) with every output in the input's shape.
TEST(CliQuantize, AcceptsWhatErrorAccepts) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(2 * 3 * 64);
  io::write_npy(box / "x3d.npy", io::make_f32_tensor("", {2, 3, 64}, x));
  io::Tensor f64;
  f64.dtype = io::DType::f64;
  f64.shape = {6, 64};
  for (float v : x) {
    const double d = v;
    const auto* b = reinterpret_cast<const uint8_t*>(&d);
    f64.bytes.insert(f64.bytes.end(), b, b + 8);
  }
  io::write_npy(box / "x64.npy", f64);

  const auto r3 = box.run("quantize " + box.path("x3d.npy") + " --recipe mxfp4 --out " + box.path("y3d.npy") +
                          " --codes " + box.path("c3d.npy") + " --scales " + box.path("s3d.npy"));
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_NE(r3.out.find("6 x 64"), std::string::npos) << r3.out;
  EXPECT_EQ(io::read_npy(box / "y3d.npy").shape, (std::vector<int64_t>{2, 3, 64}));
  EXPECT_EQ(io::read_npy(box / "c3d.npy").shape, (std::vector<int64_t>{2, 3, 64}));
  EXPECT_EQ(io::read_npy(box / "s3d.npy").shape, (std::vector<int64_t>{6, 2})) << "the block grid of the 6 x 64 view";
  // Its values are those of the 2-D view, bit for bit.
  const auto want = quant::quantize_dequantize(quant::Recipe::mxfp4, x.data(), 6, 64, {});
  EXPECT_EQ(io::to_float32(io::read_npy(box / "y3d.npy")), want);

  const auto r64 = box.run("quantize --in " + box.path("x64.npy") + " --recipe mxfp4 --out " + box.path("y64.npy"));
  ASSERT_EQ(r64.exit_code, 0) << r64.err;
  EXPECT_NE(r64.err.find("nibble: note: '" + box.path("x64.npy") + "' is f64: rounded to float32"), std::string::npos)
      << r64.err;
  EXPECT_EQ(io::to_float32(io::read_npy(box / "y64.npy")), want) << "f64 holding float32 values: the same result";
}
