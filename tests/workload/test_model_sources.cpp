// Presets and Hugging Face configs: every shipped preset round-trips, configs of several families
// read into the shapes their published architectures have, and bad files are explained; then the
// shared model flags that combine them (preset, then --hf-config, then explicit flags).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "scratch_file.hpp"
#include "test_seed.hpp"
#include "workload_test_support.hpp"

namespace nibble::workload {
namespace {
using testing::expect_linear;

std::string fixture(const char* name) { return std::string(NIBBLE_WORKLOAD_FIXTURES) + "/" + name; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(Presets, AllRequiredPresetsShip) {
  const auto names = list_presets();
  for (const char* want : {"codonfm-5b", "llama-3-8b", "llama-3-70b", "qwen-2.5-7b", "mixtral-8x7b", "esm2-15b"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST(Presets, EveryPresetRoundTripsThroughJson) {
  for (const std::string& name : list_presets()) {
    SCOPED_TRACE(name);
    const ModelConfig m = load_preset(name);
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.source.empty()) << "a preset must say where its numbers come from";
    EXPECT_EQ(model_from_json(to_json(m), "round trip"), m);
    const Workload w = derive_workload(m, {.lm_head = true, .attention = true});
    const nlohmann::json j = nlohmann::json::parse(to_json(w).dump());
    // The JSON's model is the resolved one: no 0 = "derive it" left, and it derives the same GEMMs.
    const ModelConfig back = model_from_json(j["model"], "round trip");
    EXPECT_EQ(back, resolved(m));
    EXPECT_EQ(back.head_dim, m.effective_head_dim());
    EXPECT_EQ(back.kv_heads, m.effective_kv_heads());
    EXPECT_GT(back.head_dim, 0);
    EXPECT_GT(back.kv_heads, 0);
    EXPECT_EQ(to_json(derive_workload(back, {.lm_head = true, .attention = true}))["gemms"], j["gemms"]);
    EXPECT_EQ(j["gemms"].size(), w.gemms.size());
    EXPECT_GT(w.model_totals().total(), 0);
  }
}

TEST(Presets, CodonFmIsTheSpecReference) {
  const Workload w = derive_workload(load_preset("codonfm-5b"));
  EXPECT_EQ(w.tokens, 15872);
  EXPECT_EQ(w.layer_totals().total(), int64_t{19172734009344});
}

TEST(Presets, PublishedShapes) {
  const Workload llama = derive_workload(load_preset("llama-3-70b"));
  expect_linear(llama, "qkv", 8192, 8192, 8192 + 2 * 8 * 128);
  expect_linear(llama, "mlp_up", 8192, 8192, 2 * 28672);
  const Workload qwen = derive_workload(load_preset("qwen-2.5-7b"));
  expect_linear(qwen, "qkv", 4096, 3584, 3584 + 2 * 4 * 128);
  const Workload esm = derive_workload(load_preset("esm2-15b"));
  expect_linear(esm, "mlp_up", 8 * 1024, 5120, 20480);
}

TEST(Presets, UnknownPresetListsKnownOnes) {
  const std::string msg = error_of([] { (void)load_preset("llama-9"); });
  EXPECT_NE(msg.find("unknown preset 'llama-9'"), std::string::npos) << msg;
  for (const std::string& name : list_presets()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
}

TEST(Presets, DataDirEnvironmentOverrideWins) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const auto dir = std::filesystem::temp_directory_path() / ("nibble-data-" + std::to_string(rng()));
  std::filesystem::create_directories(dir / "presets");
  nlohmann::json tiny = to_json(testing::codonfm_by_hand());
  tiny["name"] = "tiny";
  tiny["hidden"] = 256;
  std::ofstream(dir / "presets" / "tiny.json") << tiny.dump();
  std::ofstream(dir / "presets" / "misnamed.json") << tiny.dump();
  std::ofstream(dir / "presets" / "broken.json") << "{ not json";
  ::setenv("NIBBLE_DATA_DIR", dir.c_str(), 1);
  EXPECT_EQ(data_dir(), dir);
  EXPECT_EQ(load_preset("tiny").hidden, 256);
  EXPECT_NE(error_of([] { (void)load_preset("misnamed"); }).find("must match the file name"), std::string::npos);
  EXPECT_NE(error_of([] { (void)load_preset("broken"); }).find("not valid JSON"), std::string::npos);
  ::setenv("NIBBLE_DATA_DIR", (dir / "nope").c_str(), 1);
  EXPECT_NE(error_of([] { (void)data_dir(); }).find("NIBBLE_DATA_DIR"), std::string::npos);
  ::unsetenv("NIBBLE_DATA_DIR");
  std::filesystem::remove_all(dir);
  EXPECT_NO_THROW(load_preset("codonfm-5b"));
}

TEST(HfConfig, LlamaIsGatedGqa) {
  ModelConfig base;
  base.micro_batch = 2;
  base.seq_len = 4096;
  const ModelConfig m = load_hf_config(fixture("llama-3-8b.config.json"), base);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.ffn, 14336);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.effective_kv_heads(), 8);
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_TRUE(m.gated);
  EXPECT_EQ(m.tokens(), 8192);  // the batch comes from the base, not the config
  const ModelConfig preset = load_preset("llama-3-8b");
  expect_linear(derive_workload(m), "qkv", 8192, 4096, 6144);
  // Same architecture as the shipped preset.
  EXPECT_EQ(derive_workload(m).layer_totals().total(),
            derive_workload([&] { ModelConfig p = preset; p.micro_batch = 1; p.seq_len = 8192; return p; }())
                .layer_totals().total());
}

TEST(HfConfig, Qwen2) {
  const ModelConfig m = load_hf_config(fixture("qwen2.5-7b.config.json"), load_preset("qwen-2.5-7b"));
  ModelConfig preset = load_preset("qwen-2.5-7b");
  EXPECT_EQ(derive_workload(m).gemms.size(), derive_workload(preset).gemms.size());
  for (size_t i = 0; i < derive_workload(m).gemms.size(); ++i)
    EXPECT_EQ(derive_workload(m).gemms[i].flops_exact(), derive_workload(preset).gemms[i].flops_exact());
}

TEST(HfConfig, MixtralIsMoe) {
  const ModelConfig m = load_hf_config(fixture("mixtral-8x7b.config.json"), load_preset("mixtral-8x7b"));
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.effective_moe_ffn(), 14336);
  expect_linear(derive_workload(m), "mlp_up", 4096 * 2 / 8, 4096, 2 * 14336, 8, "expert");
}

TEST(HfConfig, Qwen2MoeHasASharedExpert) {
  ModelConfig base;
  base.seq_len = 4096;
  const ModelConfig m = load_hf_config(fixture("qwen1.5-moe-a2.7b.config.json"), base);
  EXPECT_EQ(m.experts, 60);
  EXPECT_EQ(m.top_k, 4);
  EXPECT_EQ(m.moe_ffn, 1408);
  EXPECT_EQ(m.shared_experts, 1);
  const Workload w = derive_workload(m);
  // 16384 routed tokens = 128 units of 128 over 60 experts: 8 experts 384, 52 experts 256 (whole units, the
  // total exact).
  expect_linear(w, "mlp_up", 384, 2048, 2 * 1408, 8, "expert");
  int64_t experts = 0;
  for (const Gemm& g : w.gemms)
    if (g.layer == "mlp_up" && g.pass == "fprop" && g.role == "expert") {
      experts += g.count;
      EXPECT_TRUE(g.m == 384 || g.m == 256) << g.m;
    }
  EXPECT_EQ(experts, 60);
  EXPECT_EQ(w.expert_tokens.routed, 4096 * 4);
  expect_linear(w, "mlp_down", 4096, 5632, 2048, 1, "shared_expert");
}

TEST(HfConfig, EsmIsAnUngatedEncoder) {
  ModelConfig base;
  base.seq_len = 1024;
  const ModelConfig m = load_hf_config(fixture("esm2-15b.config.json"), base);
  EXPECT_FALSE(m.gated);
  EXPECT_EQ(m.name, "facebook/esm2_t48_15B_UR50D");
  expect_linear(derive_workload(m), "mlp_up", 1024, 5120, 20480);
  expect_linear(derive_workload(m), "qkv", 1024, 5120, 3 * 5120);
}

TEST(HfConfig, GemmaHeadDimIsKept) {
  ModelConfig base;
  base.seq_len = 1024;
  const ModelConfig m = load_hf_config(fixture("gemma-7b.config.json"), base);
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_TRUE(m.gated);  // GeGLU, although hidden_act says gelu
  expect_linear(derive_workload(m), "attn_out", 1024, 4096, 3072);
}

TEST(HfConfig, BadFilesAreExplained) {
  ModelConfig base;
  base.seq_len = 1024;
  const nibble::testing::ScratchFile not_json(".config.json", "{\n  \"hidden_size\": 4096,\n  oops this is not json\n");
  std::string msg = error_of([&] { (void)load_hf_config(not_json.str(), base); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  nlohmann::json missing_hidden = nlohmann::json::parse(std::ifstream(fixture("llama-3-8b.config.json")));
  missing_hidden.erase("hidden_size");
  const nibble::testing::ScratchFile no_hidden(".config.json", missing_hidden.dump(2));
  msg = error_of([&] { (void)load_hf_config(no_hidden.str(), base); });
  EXPECT_NE(msg.find("missing field 'hidden_size'"), std::string::npos) << msg;
  msg = error_of([&] { (void)load_hf_config(fixture("does-not-exist.json"), base); });
  EXPECT_NE(msg.find("--hf-config"), std::string::npos) << msg;

  nlohmann::json j = nlohmann::json::parse(std::ifstream(fixture("mixtral-8x7b.config.json")));
  j.erase("num_experts_per_tok");
  msg = error_of([&] { (void)hf_config_from_json(j, "mixtral", base); });
  EXPECT_NE(msg.find("num_experts_per_tok"), std::string::npos) << msg;
  j = nlohmann::json::parse(std::ifstream(fixture("llama-3-8b.config.json")));
  j["num_hidden_layers"] = 32.5;
  msg = error_of([&] { (void)hf_config_from_json(j, "llama", base); });
  EXPECT_NE(msg.find("'num_hidden_layers' must be an integer"), std::string::npos) << msg;
  j["num_hidden_layers"] = 32;
  j["kv_lora_rank"] = 512;
  msg = error_of([&] { (void)hf_config_from_json(j, "deepseek", base); });
  EXPECT_NE(msg.find("not modelled"), std::string::npos) << msg;
  j.erase("kv_lora_rank");
  j["num_key_value_heads"] = 7;  // reads fine; validation names the field
  msg = error_of([&] { (void)derive_workload(hf_config_from_json(j, "llama", base)); });
  EXPECT_NE(msg.find("kv_heads 7"), std::string::npos) << msg;
}

}  // namespace
}  // namespace nibble::workload

// The shared model flags: preset, then --hf-config, then explicit flags, later ones winning.
namespace nibble::workload {
namespace {

ModelConfig parse(std::vector<std::string> args, WorkloadOptions* wo = nullptr) {
  CLI::App app;
  ModelCliOptions o;
  WorkloadOptions w;
  add_model_options(app, o);
  add_workload_options(app, w);
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from the back
  app.parse(args);
  if (wo) *wo = w;
  return resolve_model(o);
}

TEST(ModelCli, DefaultIsCodonFm) {
  const ModelConfig m = parse({});
  EXPECT_EQ(m, load_preset("codonfm-5b"));
}

TEST(ModelCli, FlagsOverrideThePreset) {
  WorkloadOptions wo;
  const ModelConfig m =
      parse({"--model", "llama-3-8b", "--kv-heads", "4", "--tp", "2", "--mbs", "3", "--seq", "2048", "--lm-head"}, &wo);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.tokens(), 3 * 2048);
  EXPECT_TRUE(wo.lm_head);
  EXPECT_FALSE(wo.attention);
  EXPECT_NE(m.name.find("modified"), std::string::npos);
  EXPECT_NE(m.source.find("--kv-heads"), std::string::npos);
  // Batch and layout flags alone do not rename the model.
  EXPECT_EQ(parse({"--model", "llama-3-8b", "--tp", "8"}).name, "llama-3-8b");
  EXPECT_TRUE(parse({"--model", "codonfm-5b", "--gated"}).gated);
  EXPECT_FALSE(parse({"--model", "llama-3-8b", "--no-gated"}).gated);
  EXPECT_TRUE(parse({"--model", "llama-3-8b"}).gated);
}

// Every preset's source ends with the batch it comes with ("; batch MB x SEQ ..."): the clause --mbs/--seq
// replace, so that the source never contradicts the batch the output is for.
TEST(ModelCli, EveryPresetStatesItsBatchWhichTheFlagsReplace) {
  for (const auto& name : list_presets()) {
    const ModelConfig m = load_preset(name);
    const std::string own = fmt::format("; batch {} x {}", m.micro_batch, m.seq_len);
    EXPECT_NE(m.source.find(own), std::string::npos) << name << ": " << m.source;
    const ModelConfig f = parse({"--model", name, "--seq", "128"});
    EXPECT_EQ(f.seq_len, 128);
    EXPECT_NE(f.source.find(fmt::format("; batch {} x 128", m.micro_batch)), std::string::npos) << f.source;
    EXPECT_EQ(f.source.find(own), std::string::npos) << name << ": the preset's batch is still claimed: " << f.source;
  }
}

TEST(ModelCli, HfConfigOverridesPresetArchitectureButKeepsItsBatch) {
  const ModelConfig m = parse({"--model", "codonfm-5b", "--hf-config", fixture("mixtral-8x7b.config.json")});
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.tokens(), 15872);
  const ModelConfig alone = parse({"--hf-config", fixture("esm2-15b.config.json"), "--heads", "20"});
  EXPECT_EQ(alone.heads, 20);
  EXPECT_EQ(alone.hidden, 5120);
  EXPECT_GT(alone.tokens(), 0);
}

TEST(ModelCli, BadFlagsNameTheFlag) {
  try {
    (void)parse({"--heads", "30"});
    ADD_FAILURE() << "accepted 30 heads for hidden 4096";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--head-dim"), std::string::npos) << e.what();
  }
  // Values no model can have fail the parse itself (a usage error), naming the flag.
  for (const auto& args : std::vector<std::vector<std::string>>{{"--model", "gpt-17"}, {"--hidden", "many"},
                                                                 {"--mbs", "0"}, {"--experts", "-1"},
                                                                 {"--token-imbalance", "0.5"}}) {
    try {
      (void)parse(args);
      ADD_FAILURE() << args[0] << " " << args[1] << " was accepted";
    } catch (const CLI::ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(args[0]), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nibble::workload
