// `nibble error` end to end: JSON equals the in-process metrics, safetensors of mixed dtypes and
// shapes give per-row notes instead of crashes, and bad files fail with a message and exit code.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <limits>
#include <random>
#include <sstream>

#include "cli_runner.hpp"
#include "nibble/format/bf16.hpp"
#include "nibble/io.hpp"
#include "nibble/quant.hpp"
#include "nibble/quant/error_metrics.hpp"
#include "test_seed.hpp"

using namespace nibble;
using nibble::cli::testing::CliSandbox;

namespace {

io::Tensor bf16_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  io::Tensor t;
  t.name = std::move(name);
  t.dtype = io::DType::bf16;
  t.shape = std::move(shape);
  t.bytes.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = fmt::encode_bf16(v[i]);
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  return t;
}

const nlohmann::json* find_row(const nlohmann::json& rows, const std::string& tensor, const std::string& recipe) {
  for (const auto& r : rows) {
    if (r["tensor"] == tensor && r["recipe"] == recipe) return &r;
  }
  return nullptr;
}

}  // namespace

TEST(CliError, NpyJsonMatchesInProcessMetrics) {
  CliSandbox box;
  const int64_t rows = 128, cols = 256;  // 128 rows: fp8-block's 128x128 weight blocks fit
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols), 0.1f);
  io::write_npy(box / "acts.npy", io::make_f32_tensor("", {rows, cols}, x));
  for (const char* role : {"x", "w", "dy"}) {
    const auto r = box.run("error " + box.path("acts.npy") + " --format json --role " + role);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rows_json = nlohmann::json::parse(r.out);
    ASSERT_TRUE(rows_json.is_array());
    EXPECT_EQ(rows_json.size(), 7u) << "default: every recipe but bf16";
    EXPECT_EQ(find_row(rows_json, "acts.npy", "bf16"), nullptr);
    quant::QuantOptions o;
    o.role = quant::parse_role(role);
    for (quant::Recipe recipe : quant::kAllRecipes) {
      if (recipe == quant::Recipe::bf16) continue;
      const auto* row = find_row(rows_json, "acts.npy", quant::recipe_name(recipe));
      ASSERT_NE(row, nullptr) << quant::recipe_name(recipe);
      for (const char* key : {"tensor", "recipe", "rel_mse", "snr_db", "max_abs_err", "clipped_frac", "zero_frac"}) {
        EXPECT_TRUE(row->contains(key)) << key;
      }
      const auto m = quant::quantization_error(recipe, x.data(), rows, cols, o);
      EXPECT_EQ((*row)["rel_mse"].get<double>(), m.rel_mse) << quant::recipe_name(recipe) << " " << role;
      EXPECT_EQ((*row)["snr_db"].get<double>(), m.snr_db);
      EXPECT_EQ((*row)["max_abs_err"].get<double>(), m.max_abs_err);
      EXPECT_EQ((*row)["clipped_frac"].get<double>(), m.clipped_frac);
      EXPECT_EQ((*row)["zero_frac"].get<double>(), m.zero_frac);
      EXPECT_NE((*row)["produced_by"].get<std::string>().find("cpu-reference"), std::string::npos);
    }
  }
}

TEST(CliError, SafetensorsMixedDtypesAndShapes) {
  CliSandbox box;
  const auto w = nibble::testing::fresh_normal_floats(128 * 256, 0.02f);
  const auto b = nibble::testing::fresh_normal_floats(96);
  std::vector<io::Tensor> tensors = {bf16_tensor("layer.0.weight", {128, 256}, w),
                                     io::make_f32_tensor("layer.0.bias", {96}, b),
                                     io::make_f32_tensor("conv", {2, 2, 32}, nibble::testing::fresh_normal_floats(128)),
                                     io::make_u8_tensor("mask", {8}, std::vector<uint8_t>(8, 1))};
  io::Tensor half;
  half.name = "grad";
  half.dtype = io::DType::f16;
  half.shape = {4, 64};
  const auto g = nibble::testing::fresh_normal_floats(256);
  for (float v : g) {
    const uint16_t h = io::encode_f16(v);
    half.bytes.push_back(static_cast<uint8_t>(h));
    half.bytes.push_back(static_cast<uint8_t>(h >> 8));
  }
  tensors.push_back(half);
  io::write_safetensors(box / "model.safetensors", tensors);

  const auto r = box.run("error " + box.path("model.safetensors") + " --recipes mxfp4,fp8-block,bf16 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  EXPECT_EQ(rows.size(), 5u * 3u);
  // bf16 weights are measured from their exact float values.
  std::vector<float> wf(w.size());
  for (size_t i = 0; i < w.size(); ++i) wf[i] = fmt::round_bf16(w[i]);
  const auto m = quant::quantization_error(quant::Recipe::mxfp4, wf.data(), 128, 256);
  EXPECT_EQ((*find_row(rows, "layer.0.weight", "mxfp4"))["rel_mse"].get<double>(), m.rel_mse);
  // bf16 of bf16 values is exact: infinite SNR, written as the string "inf".
  EXPECT_EQ((*find_row(rows, "layer.0.weight", "bf16"))["snr_db"], "inf");
  EXPECT_TRUE((*find_row(rows, "grad", "mxfp4"))["rel_mse"].is_number());
  // 96 columns: fine for mxfp4 (32 | 96), a note for fp8-block (1x128).
  EXPECT_TRUE((*find_row(rows, "layer.0.bias", "mxfp4"))["rel_mse"].is_number());
  const auto& note = *find_row(rows, "layer.0.bias", "fp8-block");
  EXPECT_TRUE(note["rel_mse"].is_null());
  EXPECT_NE(note["note"].get<std::string>().find("128"), std::string::npos) << note.dump();
  // Rank 3 reads as (2*2, 32), as frameworks flatten a linear layer's input: measured like its 2-D view.
  EXPECT_TRUE((*find_row(rows, "conv", "mxfp4"))["rel_mse"].is_number());
  EXPECT_EQ((*find_row(rows, "conv", "mxfp4"))["shape"], "(2, 2, 32)");
  EXPECT_NE((*find_row(rows, "mask", "mxfp4"))["note"].get<std::string>().find("u8"), std::string::npos);

  const auto t = box.run("error " + box.path("model.safetensors") + " --recipes mxfp4,fp8-block");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  for (const char* s : {"layer.0.weight", "layer.0.bias", "note:", "rel_mse", "snr_db", "paths:", "cpu-reference"}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  }
}

TEST(CliError, BadInputFailsCleanly) {
  CliSandbox box;
  io::write_npy(box / "x.npy", io::make_f32_tensor("", {2, 32}, nibble::testing::fresh_normal_floats(64)));
  io::write_npy(box / "u8.npy", io::make_u8_tensor("", {4}, std::vector<uint8_t>{1, 2, 3, 4}));
  const std::vector<io::Tensor> ints = {io::make_u8_tensor("m", {4}, std::vector<uint8_t>{1, 2, 3, 4})};
  io::write_safetensors(box / "ints.safetensors", ints);
  const std::vector<io::Tensor> good = {io::make_f32_tensor("w", {2, 32}, nibble::testing::fresh_normal_floats(64))};
  auto bytes = io::encode_safetensors(good);
  bytes.resize(bytes.size() - 8);
  io::write_file_atomic(box / "trunc.safetensors", bytes);
  io::write_file_atomic(box / "notes.txt", std::vector<uint8_t>{'h', 'i', '\n'});
  io::write_file_atomic(box / "empty.npy", std::vector<uint8_t>{});
  // A BF16 tensor whose data (a hole in a sparse file) is a quarter of this machine's RAM: the
  // measurement would need ~20 bytes per element, so it is refused from the header's shape.
  const uint64_t ram = io::host_memory_bytes();
  ASSERT_GT(ram, 0u);
  const int64_t big_rows = static_cast<int64_t>(ram / 8 / 1024);
  const std::string big_header =
      nlohmann::json{{"w", {{"dtype", "BF16"}, {"shape", {big_rows, 1024}}, {"data_offsets", {0, big_rows * 2048}}}}}
          .dump();
  std::vector<uint8_t> big(8 + big_header.size());
  for (int i = 0; i < 8; ++i) big[i] = static_cast<uint8_t>(static_cast<uint64_t>(big_header.size()) >> (8 * i));
  std::memcpy(big.data() + 8, big_header.data(), big_header.size());
  io::write_file_atomic(box / "big.safetensors", big);
  std::filesystem::resize_file(box / "big.safetensors", big.size() + static_cast<uint64_t>(big_rows) * 2048);
  const std::string before = box.listing();
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"error " + box.path("x.npy") + " --recipes mxfp4,fp6", "valid recipes"},
      {"error " + box.path("x.npy") + " --role q", "valid roles"},
      {"error " + box.path("x.npy") + " --format xml", "format"},
      {"error " + box.path("u8.npy"), "not floating-point"},
      {"error " + box.path("ints.safetensors"), "no floating-point tensors"},
      {"error " + box.path("trunc.safetensors"), "trunc.safetensors"},
      {"error " + box.path("notes.txt"), "neither"},
      {"error " + box.path("empty.npy"), "magic"},
      {"error " + box.path("missing.safetensors"), "no such file"},
      {"error " + box.path("big.safetensors"), "GiB of RAM"},
  };
  for (const auto& c : cases) {
    const auto r = box.run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\nstderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\nstdout: " << r.out;
  }
  EXPECT_EQ(box.listing(), before);
}

// A tensor with some non-finite values is measured on the finite ones; the note saying so has a line of its
// own under the row, so the row's numbers stay in their columns.
TEST(CliError, PartlyNonFiniteNoteOnItsOwnLine) {
  CliSandbox box;
  auto x = nibble::testing::fresh_normal_floats(4 * 32);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  io::write_npy(box / "part.npy", io::make_f32_tensor("", {4, 32}, x));
  for (const char* extra : {"", " --details"}) {  // the compact default and the wide table
    const auto r = box.run("error " + box.path("part.npy") + " --recipes fp8-current" + extra);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line, previous;
    bool seen = false;
    while (std::getline(lines, line)) {
      if (line.find("1 non-finite inputs left out") != std::string::npos) {
        seen = true;
        EXPECT_EQ(line.find("fp8-current"), std::string::npos) << "the note shares its row's line: " << line;
        EXPECT_EQ(line.find("e-0"), std::string::npos) << "the note shares a line with numbers: " << line;
        EXPECT_NE(previous.find("fp8-current"), std::string::npos) << "the note follows its row: " << previous;
      }
      previous = line;
    }
    EXPECT_TRUE(seen) << extra << "\n" << r.out;
  }
}
