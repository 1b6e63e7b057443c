// The shared model flags: preset, then --hf-config, then explicit flags, later ones winning.
#include <gtest/gtest.h>

#include "workload_test_support.hpp"

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

std::string fixture(const char* name) { return std::string(NIBBLE_WORKLOAD_FIXTURES) + "/" + name; }

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
  EXPECT_THROW((void)parse({"--model", "gpt-17"}), std::invalid_argument);
  EXPECT_THROW((void)parse({"--hidden", "many"}), CLI::ParseError);
}

}  // namespace
}  // namespace nibble::workload
