// `nibble shapes` end to end: the default model (codonfm-5b, docs/spec.md §5) prints its 12 GEMMs in
// every format with the same numbers, the optional LM head and attention GEMMs appear on request, and
// bad models fail with a message and nothing on stdout.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_runner.hpp"

using nibble::cli::testing::CliSandbox;

namespace {

struct Shape {
  std::string layer, pass;
  int64_t m, k, n;
};

// codonfm-5b: H 4096, F 16384 (non-gated GELU), MHA 32 heads, batch 31 x 512 = T 15872 tokens.
// Forward Y = X W^T: fprop (T, K_in, N_out); dgrad (T, N_out, K_in); wgrad (N_out, T, K_in).
constexpr int64_t T = 15872, H = 4096, F = 16384;
const std::vector<Shape> kCodonfm = {
    {"qkv", "fprop", T, H, 3 * H},      {"qkv", "dgrad", T, 3 * H, H},      {"qkv", "wgrad", H, T, 3 * H},
    {"attn_out", "fprop", T, H, H},     {"attn_out", "dgrad", T, H, H},     {"attn_out", "wgrad", H, T, H},
    {"mlp_up", "fprop", T, H, F},       {"mlp_up", "dgrad", T, F, H},       {"mlp_up", "wgrad", H, T, F},
    {"mlp_down", "fprop", T, F, H},     {"mlp_down", "dgrad", T, H, F},     {"mlp_down", "wgrad", F, T, H},
};

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  return out;
}

nlohmann::json shapes_json(const CliSandbox& box, const std::string& flags) {
  const auto r = box.run("shapes --format json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST(CliShapes, DefaultTableListsTheTwelveCodonfmGemms) {
  CliSandbox box;
  const auto r = box.run("shapes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("codonfm-5b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("15872 tokens"), std::string::npos) << r.out;
  // Table rows: layer role pass M K N count GFLOP share.
  std::vector<Shape> rows;
  for (const auto& line : lines_of(r.out)) {
    const auto w = words_of(line);
    if (w.size() != 9 || (w[2] != "fprop" && w[2] != "dgrad" && w[2] != "wgrad")) continue;
    rows.push_back({w[0], w[2], std::stoll(w[3]), std::stoll(w[4]), std::stoll(w[5])});
  }
  ASSERT_EQ(rows.size(), kCodonfm.size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(kCodonfm[i].layer + " " + kCodonfm[i].pass);
    EXPECT_EQ(rows[i].layer, kCodonfm[i].layer);
    EXPECT_EQ(rows[i].pass, kCodonfm[i].pass);
    EXPECT_EQ(std::tie(rows[i].m, rows[i].k, rows[i].n), std::tie(kCodonfm[i].m, kCodonfm[i].k, kCodonfm[i].n));
  }
  EXPECT_EQ(r.out, box.run("shapes --model codonfm-5b").out) << "codonfm-5b is the default";
}

TEST(CliShapes, JsonParsesAndLayerFlopsAreTwiceSumOfMkn) {
  CliSandbox box;
  const auto j = shapes_json(box, "");
  EXPECT_EQ(j.at("tokens").get<int64_t>(), T);
  const auto& gemms = j.at("gemms");
  ASSERT_EQ(gemms.size(), kCodonfm.size());
  int64_t sum_mkn = 0;
  for (size_t i = 0; i < gemms.size(); ++i) {
    const auto& g = gemms[i];
    SCOPED_TRACE(kCodonfm[i].layer + " " + kCodonfm[i].pass);
    EXPECT_EQ(g.at("layer"), kCodonfm[i].layer);
    EXPECT_EQ(g.at("pass"), kCodonfm[i].pass);
    const int64_t m = g.at("m"), k = g.at("k"), n = g.at("n");
    EXPECT_EQ(std::tie(m, k, n), std::tie(kCodonfm[i].m, kCodonfm[i].k, kCodonfm[i].n));
    EXPECT_EQ(g.at("count").get<int64_t>(), 1);
    EXPECT_EQ(g.at("flops").get<int64_t>(), 2 * m * k * n);
    sum_mkn += m * k * n;
  }
  EXPECT_EQ(2 * sum_mkn, INT64_C(19172734009344));
  const auto& per_layer = j.at("totals").at("per_layer");
  EXPECT_EQ(per_layer.at("total").get<int64_t>(), INT64_C(19172734009344));
  EXPECT_EQ(per_layer.at("fprop").get<int64_t>() * 3, INT64_C(19172734009344)) << "fprop = dgrad = wgrad";
  EXPECT_EQ(j.at("totals").at("per_model").at("total").get<int64_t>(), 24 * INT64_C(19172734009344));
}

TEST(CliShapes, CsvHasHeaderAndTwelveRowsMatchingJson) {
  CliSandbox box;
  const auto r = box.run("shapes --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1 + kCodonfm.size()) << r.out;
  EXPECT_EQ(lines[0], "layer,pass,m,k,n,count,flops,role,per_model");
  for (size_t i = 0; i < kCodonfm.size(); ++i) {
    const auto f = csv_fields(lines[i + 1]);
    ASSERT_EQ(f.size(), 9u) << lines[i + 1];
    const auto& s = kCodonfm[i];
    EXPECT_EQ(f[0], s.layer);
    EXPECT_EQ(f[1], s.pass);
    EXPECT_EQ(std::stoll(f[2]), s.m);
    EXPECT_EQ(std::stoll(f[3]), s.k);
    EXPECT_EQ(std::stoll(f[4]), s.n);
    EXPECT_EQ(std::stoll(f[6]), 2 * s.m * s.k * s.n);
    EXPECT_EQ(f[8], "0") << "no per-model GEMM by default";
  }
}

TEST(CliShapes, LmHeadAddsVocabGemmsOncePerModel) {
  CliSandbox box;
  const auto base = shapes_json(box, "");
  const auto j = shapes_json(box, "--lm-head");
  std::vector<nlohmann::json> head;
  for (const auto& g : j.at("gemms"))
    if (g.at("layer") == "lm_head") head.push_back(g);
  ASSERT_EQ(head.size(), 3u) << j.at("gemms").dump();
  for (const auto& g : head) {
    EXPECT_TRUE(g.at("per_model").get<bool>());
    EXPECT_TRUE(g.at("n") == 69 || g.at("k") == 69) << g.dump();
  }
  EXPECT_EQ(j.at("gemms").size(), base.at("gemms").size() + 3);
  EXPECT_EQ(j.at("totals").at("per_layer"), base.at("totals").at("per_layer")) << "the head is not a layer GEMM";
  EXPECT_EQ(j.at("totals").at("once_per_model").at("total").get<int64_t>(), 3 * 2 * T * H * 69);
  // --vocab reaches the head.
  int head_1000 = 0;
  const auto wide = shapes_json(box, "--lm-head --vocab 1000");
  for (const auto& g : wide.at("gemms")) {
    if (g.at("layer") != "lm_head") continue;
    ++head_1000;
    EXPECT_TRUE(g.at("n") == 1000 || g.at("k") == 1000) << g.dump();
  }
  EXPECT_EQ(head_1000, 3);
}

TEST(CliShapes, AttentionAddsBatchedScoreAndValueGemms) {
  CliSandbox box;
  const auto j = shapes_json(box, "--attention");
  int attention = 0;
  for (const auto& g : j.at("gemms")) {
    const std::string layer = g.at("layer");
    if (layer != "attn_scores" && layer != "attn_values") continue;
    ++attention;
    EXPECT_EQ(g.at("role"), "attention");
    EXPECT_EQ(g.at("count").get<int64_t>(), 31 * 32) << "one per (sequence, head)";
    // Every attention GEMM multiplies seq x seq by seq x head_dim in some order.
    std::array<int64_t, 3> dims = {g.at("m"), g.at("k"), g.at("n")};
    std::sort(dims.begin(), dims.end());
    EXPECT_EQ(dims, (std::array<int64_t, 3>{128, 512, 512})) << g.dump();
  }
  EXPECT_EQ(attention, 6);
  EXPECT_EQ(j.at("gemms").size(), kCodonfm.size() + 6);
  const auto r = box.run("shapes --attention");
  EXPECT_NE(r.out.find("attn_scores"), std::string::npos);
  EXPECT_EQ(box.run("shapes").out.find("attn_scores"), std::string::npos) << "attention only on request";
}

TEST(CliShapes, UnknownPresetListsValidOnesAndPrintsNothing) {
  CliSandbox box;
  const auto r = box.run("shapes --model no-such-model");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
  for (const char* preset : {"codonfm-5b", "esm2-15b", "llama-3-70b", "llama-3-8b", "mixtral-8x7b", "qwen-2.5-7b"})
    EXPECT_NE(r.err.find(preset), std::string::npos) << preset << " missing from: " << r.err;
  EXPECT_EQ(box.listing(), "");
}

TEST(CliShapes, HiddenNotDivisibleByHeadsFailsNamingBoth) {
  CliSandbox box;
  // 4000 = 32 x 125 divides; 4100 / 32 does not.
  const auto ok = box.run("shapes --hidden 4000 --heads 32 --format csv");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const auto r = box.run("shapes --hidden 4100 --heads 32");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("hidden 4100"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("heads 32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not divisible"), std::string::npos) << r.err;
}

// The header and the source line say the same batch, and the flags given win over the preset's own.
TEST(CliShapes, BatchFlagsReplaceThePresetsBatchEverywhere) {
  CliSandbox box;
  const auto r = box.run("shapes --model llama-3-8b --mbs 1 --seq 4096");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("8192"), std::string::npos) << "the preset's batch 1 x 8192 is still shown:\n" << r.out;
  EXPECT_NE(r.out.find("batch 1 x 4096"), std::string::npos) << r.out;
  // T = 1 x 4096 tokens in the GEMMs themselves.
  const auto j = nlohmann::json::parse(box.run("shapes --model llama-3-8b --mbs 2 --seq 1024 --format json").out);
  EXPECT_EQ(j["model"]["micro_batch"], 2);
  EXPECT_EQ(j["model"]["seq_len"], 1024);
  const std::string source = j["model"]["source"];
  EXPECT_NE(source.find("batch 2 x 1024"), std::string::npos) << source;
  EXPECT_EQ(source.find("8192"), std::string::npos) << source;
  // Without batch flags the preset's own batch and its reason stay.
  const auto plain = box.run("shapes --model llama-3-8b");
  EXPECT_NE(plain.out.find("batch 1 x 8192 (its training context)"), std::string::npos) << plain.out;
}
