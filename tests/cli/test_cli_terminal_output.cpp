// What a person reads in a terminal: every command's default output fits 100 columns, `nibble bench` and
// `nibble report` open with the answer in one screen (the wide tables behind --details), predictions say
// PREDICTED and carry evenly formatted intervals, and every file a command writes is named on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "nibble/io.hpp"
#include "test_seed.hpp"

namespace {

using nibble::cli::testing::CliResult;
using nibble::cli::testing::CliSandbox;

constexpr size_t kColumns = 100;
const std::vector<std::string> kRecipes = {"bf16",  "fp8-delayed", "fp8-current", "fp8-block",
                                           "mxfp8", "nvfp4",       "mxfp4",       "quartet"};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Columns a terminal shows (UTF-8 continuation bytes take none).
size_t columns(const std::string& line) {
  return static_cast<size_t>(std::count_if(line.begin(), line.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The lines wider than the terminal, for the failure message; empty when all fit.
std::string too_wide(const std::string& text) {
  std::string out;
  for (const auto& line : lines_of(text))
    if (columns(line) > kColumns) out += std::to_string(columns(line)) + " columns: " + line + "\n";
  return out;
}

// The summary row of `recipe`: the line that starts with its name followed by a space.
std::string row_of(const std::string& text, const std::string& recipe) {
  for (const auto& line : lines_of(text))
    if (line.rfind(recipe + " ", 0) == 0) return line;
  return "";
}

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

double speedup_in(const nlohmann::json& result, const std::string& recipe, const std::string& mode) {
  for (const auto& s : result.at("summary"))
    if (s.at("recipe") == recipe && s.at("mode") == mode) return s.at("speedup_vs_bf16").get<double>();
  ADD_FAILURE() << "no summary for " << recipe << " " << mode;
  return 0;
}

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

// Every "v [lo, hi]" in `text` has the same number of decimals at all three places.
void expect_even_intervals(const std::string& text, size_t at_least) {
  const std::regex interval(R"((\d+(?:\.(\d+))?)[kMx]?(?: ms)? \[(\d+(?:\.(\d+))?)[kM]?, (\d+(?:\.(\d+))?)[kM]?\])");
  size_t seen = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), interval); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    ++seen;
    EXPECT_TRUE(m[2].length() == m[4].length() && m[4].length() == m[6].length())
        << "uneven precision: " << m.str();
  }
  EXPECT_GE(seen, at_least) << text;
}

TEST(CliTerminalOutput, BenchDefaultIsOneScreenWithTheSpeedupsOfEveryRecipe) {
  CliSandbox box;
  const auto r = box.run("bench --gpu 'H200 SXM' --quiet --json " + box.path("b.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(too_wide(r.out), "") << r.out;
  EXPECT_LE(lines_of(r.out).size(), 45u) << r.out;
  EXPECT_NE(r.out.find("PREDICTED for H200 SXM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--details"), std::string::npos) << "the summary names the command that prints everything";
  EXPECT_EQ(r.out.find("fprop [pre-quantized]"), std::string::npos) << "per-GEMM tables are --details only";
  const auto json = load(box.path("b.json"));
  for (const auto& recipe : kRecipes) {
    const std::string row = row_of(r.out, recipe);
    ASSERT_NE(row, "") << recipe << " has no row:\n" << r.out;
    if (recipe == "bf16") continue;  // its row holds its time, the reference of the speedups
    EXPECT_NE(row.find(two_decimals(speedup_in(json, recipe, "pre-quantized"))), std::string::npos) << row;
    EXPECT_NE(row.find(two_decimals(speedup_in(json, recipe, "step"))), std::string::npos) << row;
  }
  EXPECT_NE(r.out.find("what this means"), std::string::npos) << r.out;
}

// Every option that changes what the summary shows keeps it within the terminal, with one speedup column per
// mode shown on every row.
TEST(CliTerminalOutput, BenchSummaryFitsUnderEveryOption) {
  CliSandbox box;
  for (const std::string args :
       {"--pre-quantize", "--mode all", "--mode per-gemm --gpu B200",
        "--model llama-3-8b --keep-bf16 first:2,last:2 --grad-accum 8 --gpu GB200",
        "--hf-config tests/workload/fixtures/mixtral-8x7b.config.json --mbs 1 --seq 4096 --moe both "
        "--token-imbalance 2",
        "--gpu 'RTX 5090' --recipes fp8-block,mxfp4"}) {
    const bool gpu_given = args.find("--gpu") != std::string::npos;
    const auto r = box.run("bench --quiet " + std::string(gpu_given ? "" : "--gpu 'H200 SXM' ") + args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    EXPECT_EQ(too_wide(r.out), "") << args << "\n" << r.out;
    EXPECT_LE(lines_of(r.out).size(), 45u) << args << "\n" << r.out;
    const auto header = lines_of(r.out.substr(r.out.find("\nrecipe ") + 1)).front();
    const auto fields = [](const std::string& line) {
      std::istringstream in(line);
      size_t n = 0;
      for (std::string word; in >> word;) ++n;
      return n;
    };
    // fp8-block's row: recipe, path (one word when native), one cell per shown mode, tokens/s
    const bool pre_only = args == "--pre-quantize";
    const std::string row = row_of(r.out, "fp8-block");
    if (row.find("native") != std::string::npos && row.find('[') == std::string::npos)
      EXPECT_EQ(fields(row), pre_only ? 4u : 5u) << args << "\n" << header << "\n" << row;
  }
}

// A recipe whose blocks do not divide the model (fp8-block's 128 at hidden 4160) fails: its row says FAILED and
// the first "what this means" line names it.
TEST(CliTerminalOutput, FailedRecipeIsNamedFirst) {
  CliSandbox box;
  const auto r = box.run("bench --quiet --gpu 'H200 SXM' --hidden 4160 --heads 32 --ffn 16640");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(row_of(r.out, "fp8-block").find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("what this means\n  FAILED: fp8-block pre-quantized (12 GEMMs)"), std::string::npos) << r.out;
  EXPECT_EQ(row_of(r.out, "fp8-delayed").find("FAILED"), std::string::npos) << r.out;
}

TEST(CliTerminalOutput, BenchDetailsHasTheFullTables) {
  CliSandbox box;
  const auto r = box.run("bench --gpu 'H200 SXM' --quiet --details");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* table : {"fprop [pre-quantized]", "dgrad [step]", "wgrad [step]", "per layer (ms;", "per model, one",
                            "quantization overhead per layer", "fprop vs dgrad per shape", "memory per recipe",
                            "what this means", "copy-speed"})
    EXPECT_NE(r.out.find(table), std::string::npos) << table;
  EXPECT_GT(lines_of(r.out).size(), 100u);
}

// A Blackwell prediction puts its interval on every row, the same precision at both ends of each.
TEST(CliTerminalOutput, BlackwellPredictionRowsCarryEvenIntervals) {
  CliSandbox box;
  const auto r = box.run("bench --gpu B200 --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(too_wide(r.out), "") << r.out;
  EXPECT_LE(lines_of(r.out).size(), 45u) << r.out;
  for (const auto& recipe : kRecipes) {
    const std::string row = row_of(r.out, recipe);
    // pre-quantized, step and tokens/s: three intervals per row
    EXPECT_EQ(std::count(row.begin(), row.end(), '['), 3) << row;
  }
  expect_even_intervals(r.out, 3 * kRecipes.size());
  const auto d = box.run("bench --gpu B200 --quiet --details");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  // per-layer table (layer and model) and per-model table (blocks and tokens/s), 16 rows each
  expect_even_intervals(d.out, 4 * 2 * kRecipes.size());
}

TEST(CliTerminalOutput, EveryWrittenFileIsNamedOnStderr) {
  CliSandbox box;
  const std::string json = box.path("b.json"), csv = box.path("b.csv"), html = box.path("b.html");
  auto r = box.run("bench --gpu 'H200 SXM' --quiet --recipes fp8-delayed --json " + json + " --csv " + csv +
                   " --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + json + ", " + csv + ", " + html), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << "file names go to stderr, the answer to stdout";

  r = box.run("report " + json + " --html " + box.path("r.html"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + box.path("r.html")), std::string::npos) << r.err;

  r = box.run("predict --gpu 'H100 SXM' --recipes bf16 --json " + box.path("p.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + box.path("p.json")), std::string::npos) << r.err;

  const auto x = nibble::testing::fresh_normal_floats(64 * 64, 1.0f);
  nibble::io::write_npy(box / "x.npy", nibble::io::make_f32_tensor("", {64, 64}, x));
  r = box.run("quantize --recipe mxfp4 --in " + box.path("x.npy") + " --out " + box.path("q.npy") + " --codes " +
              box.path("c.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + box.path("q.npy") + ", " + box.path("c.npy")), std::string::npos) << r.err;

  r = box.run("law fit data/law/example_runs.csv --starts 2 --bootstrap 0 --json " + box.path("fit.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + box.path("fit.json")), std::string::npos) << r.err;

  r = box.run("law map --steps 4 --svg " + box.path("m.svg") + " --csv " + box.path("m.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + box.path("m.svg") + ", " + box.path("m.csv")), std::string::npos) << r.err;
}

TEST(CliTerminalOutput, ReportDefaultIsTheSummaryAndComparisonsFit) {
  CliSandbox box;
  const std::string measured = "docs/results/h100-2026-12-06/bench-codonfm-5b.json";  // cwd: the repository
  auto r = box.run("report " + measured);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(too_wide(r.out), "") << r.out;
  EXPECT_LE(lines_of(r.out).size(), 45u) << r.out;
  EXPECT_EQ(r.out.find("PREDICTED"), std::string::npos) << "a measurement is not labelled predicted";
  EXPECT_NE(row_of(r.out, "quartet"), "") << r.out;
  const auto d = box.run("report " + measured + " --details");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("fprop [pre-quantized]"), std::string::npos);
  ASSERT_EQ(box.run("bench --gpu 'H100 SXM' --quiet --json " + box.path("p.json")).exit_code, 0);
  r = box.run("report " + box.path("p.json") + " --compare " + measured);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(too_wide(r.out), "") << r.out;
}

TEST(CliTerminalOutput, ErrorDefaultFitsEvenWithLongTensorNames) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(128 * 256, 0.1f);
  std::vector<nibble::io::Tensor> tensors;
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight.with.a.long.checkpoint.prefix",
                           "model.layers.31.mlp.down_proj.weight"})
    tensors.push_back(nibble::io::make_f32_tensor(name, {128, 256}, x));
  nibble::io::write_safetensors(box / "ckpt.safetensors", tensors);
  const auto r = box.run("error " + box.path("ckpt.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(too_wide(r.out), "") << r.out;
  EXPECT_NE(r.out.find("model.layers.31.mlp.down_proj.weight"), std::string::npos) << r.out;
  for (const auto& recipe : kRecipes)
    if (recipe != "bf16") EXPECT_NE(r.out.find("  " + recipe + " "), std::string::npos) << recipe;
  const auto d = box.run("error " + box.path("ckpt.safetensors") + " --details");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(too_wide(d.out), "") << "--details keeps the wide table: one row per tensor and recipe";
}

TEST(CliTerminalOutput, LawShapesPredictAndQuantizeDefaultsFit) {
  CliSandbox box;
  const auto x = nibble::testing::fresh_normal_floats(64 * 1024, 1.0f);
  nibble::io::write_npy(box / "x.npy", nibble::io::make_f32_tensor("", {64, 1024}, x));
  const std::string bench = box.path("bench.json");  // a current file: law reach reads its tokens/s speedups
  ASSERT_EQ(box.run("bench --gpu 'H100 SXM' --quiet --json " + bench).exit_code, 0);
  const std::vector<std::string> commands = {
      "quantize --recipe quartet --in " + box.path("x.npy") + " --out " + box.path("q.npy"),
      "law fit data/law/example_runs.csv --starts 4 --bootstrap 10 --json " + box.path("fit.json"),
      "law predict --n 1e9 --d 2e10",
      "law plan --n 1e9 --d 2e10 --speedups " + bench,
      "law map --steps 4 --svg " + box.path("m.svg") + " --speedups " + bench,
      "law reach --n 1e8 --loss 3.3 --fit " + box.path("fit.json") + " --speedups " + bench,
      "predict --list-gpus",
      "shapes --model llama-3-8b --mbs 1 --seq 4096",
  };
  for (const auto& c : commands) {
    const auto r = box.run(c);
    ASSERT_EQ(r.exit_code, 0) << c << "\n" << r.err;
    EXPECT_NE(r.out, "") << c;
    EXPECT_EQ(too_wide(r.out), "") << c << "\n" << r.out;
  }
}

}  // namespace
