// Every subcommand against every kind of bad input: an unknown flag, a value out of range or not among the
// choices, a missing file, a file that is not what it should be (binary garbage, a folder), tensors nothing can
// be measured on, an unknown recipe. Each must print "nibble: error: ..." and nothing from inside the program
// (no C++ names, no raw bytes), exit 2 for a bad command line and 1 for a failure, and leave no output file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "cli_runner.hpp"
#include "nibble/io.hpp"
#include "test_seed.hpp"

using namespace nibble;
using nibble::cli::testing::CliSandbox;

namespace {

constexpr int kUsage = 2, kFailure = 1;

struct BadCase {
  std::string args;    // after "nibble"; OUT stands for the sandbox's out/ prefix of every output path
  int exit_code;       // kUsage or kFailure
  std::string needle;  // a piece of the message that says what is wrong
};

// Bytes a user must never see raw: control characters (other than the newline) and the .npy magic's 0x93.
bool has_raw_bytes(const std::string& s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\n') || c == 0x7f || c == 0x93 || c == 0xff) return true;
  return false;
}

// Words of the implementation rather than of the product.
const char* const kInternalWords[] = {"pointer", "null", "::", "nlohmann", "json.exception", "what()", "std::",
                                      "Assertion", "terminate"};

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto x = nibble::testing::fresh_normal_floats(4 * 32);
    io::write_npy(box / "good.npy", io::make_f32_tensor("", {4, 32}, x));
    std::vector<float> nan(4 * 32, std::numeric_limits<float>::quiet_NaN());
    nan[5] = std::numeric_limits<float>::infinity();  // NaN and inf: still no finite value
    io::write_npy(box / "nan.npy", io::make_f32_tensor("", {4, 32}, nan));
    io::write_npy(box / "empty.npy", io::make_f32_tensor("", {0, 32}, std::vector<float>{}));
    io::write_npy(box / "scalar.npy", io::make_f32_tensor("", {}, std::vector<float>{1.5f}));
    io::write_npy(box / "u8.npy", io::make_u8_tensor("", {4}, std::vector<uint8_t>{1, 2, 3, 4}));
    // Binary garbage that starts like a .npy file, given where JSON or CSV is expected.
    io::write_file_atomic(box / "garbage.bin", std::vector<uint8_t>{0x93, 'N', 'U', 'M', 0x00, 0x01, 0xff, 0x1b, '['});
    io::write_file_atomic(box / "garbage.json", std::vector<uint8_t>{0x93, 0x01, 0xff});
    std::filesystem::create_directory(box / "folder.json");
    const std::vector<io::Tensor> mixed = {io::make_f32_tensor("w", {4, 32}, x),
                                           io::make_f32_tensor("dead", {4, 32}, nan)};
    io::write_safetensors(box / "mixed.safetensors", mixed);
    inputs = box.listing();
  }

  // Runs one case; every check says which case failed.
  void expect(const BadCase& c) {
    std::string args = c.args;
    for (size_t at; (at = args.find("IN/")) != std::string::npos;) args.replace(at, 3, box.path(""));
    for (size_t at; (at = args.find("OUT/")) != std::string::npos;) args.replace(at, 4, box.path("out-"));
    const auto r = box.run(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << args << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("nibble: error: ", 0), 0u) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << args << "\nwanted: " << c.needle << "\nstderr: " << r.err;
    EXPECT_FALSE(has_raw_bytes(r.err)) << args << "\nstderr: " << r.err;
    for (const char* word : kInternalWords) EXPECT_EQ(r.err.find(word), std::string::npos) << args << ": " << r.err;
    if (c.exit_code == kUsage) {
      EXPECT_TRUE(r.out.empty()) << args << "\nstdout: " << r.out;
    }
    EXPECT_EQ(box.listing(), inputs) << args << ": a failed run left a file behind";
  }

  CliSandbox box;
  std::string inputs;
};

TEST_F(CliBadInput, Shapes) {
  for (const auto& c : std::vector<BadCase>{
           {"shapes --bogus", kUsage, "--bogus"},
           {"shapes --mbs 0", kUsage, "--mbs"},
           {"shapes --seq -4096", kUsage, "--seq"},
           {"shapes --hidden abc", kUsage, "--hidden"},
           {"shapes --format xml", kUsage, "--format"},
           {"shapes --model llama-9b", kUsage, "unknown preset 'llama-9b': known presets are"},
           {"shapes --hf-config IN/missing.json", kFailure, "no such file"},
           {"shapes --hf-config IN/garbage.json", kFailure, "not valid JSON"},
           {"shapes --hf-config IN/folder.json", kFailure, "folder"},
       })
    expect(c);
}

TEST_F(CliBadInput, Bench) {
  for (const auto& c : std::vector<BadCase>{
           {"bench --bogus --json OUT/b.json", kUsage, "--bogus"},
           {"bench --repeat -2 --json OUT/b.json", kUsage, "--repeat"},
           {"bench --iters 0 --html OUT/b.html", kUsage, "--iters"},
           {"bench --recipes mxfp4,quartett --json OUT/b.json", kUsage, "unknown recipe 'quartett'; valid recipes: bf16"},
           {"bench --baseline fp5 --csv OUT/b.csv", kUsage, "valid recipes"},
           {"bench --recipes bf16,mxfp4 --baseline nvfp4 --json OUT/b.json", kUsage, "not among the recipes"},
           {"bench --gpu H900 --json OUT/b.json", kUsage, "known GPUs"},
           {"bench --keep-bf16 first:x --json OUT/b.json", kUsage, "--keep-bf16"},
           {"bench --moe both --json OUT/b.json", kUsage, "--moe both"},
           {"bench --hf-config IN/garbage.json --json OUT/b.json", kFailure, "not valid JSON"},
           {"bench --json IN/nodir/b.json", kFailure, "nodir"},
       })
    expect(c);
}

TEST_F(CliBadInput, Report) {
  for (const auto& c : std::vector<BadCase>{
           {"report", kUsage, "result"},
           {"report IN/missing.json --html OUT/r.html", kFailure, "no such file"},
           {"report IN/good.npy --html OUT/r.html --csv OUT/r.csv", kFailure, "not valid JSON"},
           {"report IN/garbage.json --csv OUT/r.csv", kFailure, "not valid JSON"},
           {"report IN/folder.json", kFailure, "folder"},
           {"report IN/missing.json --bogus", kUsage, "--bogus"},
       })
    expect(c);
}

TEST_F(CliBadInput, Quantize) {
  const std::string to = " --recipe mxfp4 --out OUT/q.npy --codes OUT/c.npy --scales OUT/s.npy";
  for (const auto& c : std::vector<BadCase>{
           {"quantize IN/good.npy --recipe quartett --out OUT/q.npy", kUsage, "valid recipes"},
           {"quantize IN/good.npy --recipe mxfp4 --role q --out OUT/q.npy", kUsage, "valid roles"},
           {"quantize IN/good.npy --recipe mxfp4 --out OUT/q.npy --bogus", kUsage, "--bogus"},
           {"quantize IN/good.npy --recipe mxfp4 --seed -1 --out OUT/q.npy", kUsage, "--seed"},
           {"quantize IN/good.npy --recipe mxfp4", kUsage, "--out"},
           {"quantize IN/nan.npy" + to, kFailure, "nan.npy' (4, 32) has no finite value"},
           {"quantize IN/empty.npy" + to, kFailure, "empty.npy' is empty (shape (0, 32)"},
           {"quantize IN/scalar.npy" + to, kFailure, "scalar.npy' is a scalar"},
           {"quantize IN/u8.npy" + to, kFailure, "not floating-point"},
           {"quantize IN/missing.npy" + to, kFailure, "no such file"},
           {"quantize IN/garbage.bin" + to, kFailure, "magic"},
           {"quantize IN/folder.json" + to, kFailure, "not a regular file"},
       })
    expect(c);
}

TEST_F(CliBadInput, Error) {
  for (const auto& c : std::vector<BadCase>{
           {"error IN/good.npy --recipes mxfp4,quartett", kUsage, "valid recipes"},
           {"error IN/good.npy --format xml", kUsage, "--format"},
           {"error IN/good.npy --mx-scale-rule up", kUsage, "--mx-scale-rule"},
           {"error", kUsage, "file"},
           {"error IN/nan.npy", kFailure, "nan.npy' (4, 32) has no finite value"},
           {"error IN/empty.npy", kFailure, "empty.npy' is empty (shape (0, 32)"},
           {"error IN/scalar.npy --format json", kFailure, "scalar.npy' is a scalar"},
           {"error IN/u8.npy", kFailure, "not floating-point"},
           {"error IN/missing.npy", kFailure, "no such file"},
           {"error IN/garbage.bin", kFailure, "neither a .npy file"},
       })
    expect(c);
}

// A checkpoint with one dead tensor: the others are measured and printed, the run still fails naming it.
TEST_F(CliBadInput, ErrorOnACheckpointWithADeadTensor) {
  const auto r = box.run("error " + box.path("mixed.safetensors") + " --recipes mxfp4 --format json");
  EXPECT_EQ(r.exit_code, kFailure) << r.err;
  EXPECT_NE(r.out.find("\"tensor\": \"w\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tensor\": \"dead\""), std::string::npos) << "no row for a tensor with nothing measured";
  EXPECT_EQ(r.err.rfind("nibble: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("1 floating-point tensor could not be measured"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tensor 'dead' (4, 32) has no finite value"), std::string::npos) << r.err;
}

TEST_F(CliBadInput, Law) {
  for (const auto& c : std::vector<BadCase>{
           {"law", kUsage, "a command is needed: one of fit, predict, plan, map, reach"},
           {"law fit", kUsage, "runs"},
           {"law fit IN/missing.csv --json OUT/f.json", kFailure, "no such file"},
           {"law fit IN/garbage.bin --json OUT/f.json", kFailure, "missing column"},
           {"law fit data/law/example_runs.csv --starts 0 --json OUT/f.json", kUsage, "--starts"},
           {"law fit data/law/example_runs.csv --solver newton --json OUT/f.json", kUsage, "--solver"},
           {"law fit data/law/example_runs.csv --hold-base IN/garbage.json --json OUT/f.json", kFailure,
            "not valid JSON"},
           {"law predict --n 1e9", kUsage, "--d"},
           {"law predict --n 1e9 --d abc", kUsage, "--d"},
           {"law predict --n -1e9 --d 2e10", kUsage, "--n"},
           {"law predict --n 1e9 --d 2e10 --format xml", kUsage, "--format"},
           {"law predict --n 1e9 --d 2e10 --fit IN/missing.json", kFailure, "no such file"},
           {"law plan --n 1e9 --d 2e10 --fp4-recipe quartett", kUsage, "valid recipes"},
           {"law plan --n 1e9 --d 2e10 --sp-fwd 2", kUsage, "--sp-bwd"},
           {"law plan --n 1e9 --d 2e10 --speedups IN/missing.json", kFailure, "no such file"},
           {"law plan --n 1e9 --d 2e10 --speedups IN/good.npy", kFailure, "not valid JSON"},
           {"law map", kUsage, "nothing to write"},
           {"law map --svg OUT/m.svg --csv OUT/m.csv --steps 1", kUsage, "--steps"},
           {"law map --svg OUT/m.svg --csv OUT/m.csv --fit IN/garbage.json", kFailure, "not valid JSON"},
           {"law map --svg OUT/m.svg --csv IN/nodir/m.csv", kFailure, "nodir"},
           {"law reach --n 1e9 --loss 3", kUsage, "--fit"},
           {"law reach --n 1e9 --loss 3 --fit IN/missing.json --speedups IN/missing.json", kFailure, "no such file"},
       })
    expect(c);
}

TEST_F(CliBadInput, Predict) {
  for (const auto& c : std::vector<BadCase>{
           {"predict --gpu H900 --json OUT/p.json", kUsage, "known GPUs"},
           {"predict --recipes quartett --json OUT/p.json", kUsage, "valid recipes"},
           {"predict --baseline fp5 --html OUT/p.html", kUsage, "valid recipes"},
           {"predict --moe some --json OUT/p.json", kUsage, "--moe"},
           {"predict --mbs 0 --json OUT/p.json", kUsage, "--mbs"},
           {"predict --against IN/missing.json --json OUT/p.json", kFailure, "no such file"},
           {"predict --calibrate-on IN/good.npy --json OUT/p.json --csv OUT/p.csv", kFailure, "not valid JSON"},
       })
    expect(c);
}

TEST_F(CliBadInput, UnknownSubcommandAndHelp) {
  expect({"bogus", kUsage, "unknown command 'bogus'; the commands are bench, error, law, predict"});
  expect({"", kUsage, "a command is needed: one of bench, error, law"});
  expect({"law bogus --n 1", kUsage, "unknown command 'bogus'; the commands are fit, predict, plan, map, reach"});
  for (const char* sub : {"", "shapes", "bench", "report", "quantize", "error", "law", "law fit", "law plan",
                          "law map", "law reach", "law predict", "predict"}) {
    const auto r = box.run(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
}

}  // namespace
