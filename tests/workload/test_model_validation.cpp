// Bad models are rejected with a message that names the field and says how to fix it.
#include <gtest/gtest.h>

#include <functional>

#include "workload_test_support.hpp"

namespace nibble::workload {
namespace {
using testing::codonfm_by_hand;

// Expects validate() to throw std::invalid_argument whose message contains every fragment.
void expect_rejected(const std::function<void(ModelConfig&)>& edit, std::initializer_list<const char*> fragments) {
  ModelConfig m = codonfm_by_hand();
  edit(m);
  try {
    validate(m);
    ADD_FAILURE() << "accepted: " << describe(m);
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
  EXPECT_THROW(derive_workload(m), std::invalid_argument);
}

TEST(ModelValidation, ReferenceModelIsValid) { EXPECT_NO_THROW(validate(codonfm_by_hand())); }

TEST(ModelValidation, HeadsMustDivideHiddenWithoutHeadDim) {
  expect_rejected([](ModelConfig& m) { m.hidden = 4100; }, {"hidden 4100", "heads 32", "--head-dim"});
  ModelConfig ok = codonfm_by_hand();
  ok.hidden = 4100;
  ok.head_dim = 128;  // explicit head_dim: hidden need not be a multiple of heads
  EXPECT_NO_THROW(validate(ok));
}

TEST(ModelValidation, KvHeadsMustDivideHeads) {
  expect_rejected([](ModelConfig& m) { m.kv_heads = 5; }, {"kv_heads 5", "heads 32", "--kv-heads"});
  expect_rejected([](ModelConfig& m) { m.kv_heads = 64; }, {"kv_heads 64"});
}

TEST(ModelValidation, TpMustDivideHeadsKvHeadsAndFfn) {
  expect_rejected([](ModelConfig& m) { m.tp = 3; }, {"tp 3", "heads 32", "--tp"});
  expect_rejected([](ModelConfig& m) { m.kv_heads = 2; m.tp = 4; }, {"tp 4", "kv_heads 2"});
  expect_rejected([](ModelConfig& m) { m.ffn = 16386; m.tp = 4; }, {"tp 4", "ffn 16386"});
  expect_rejected([](ModelConfig& m) { m.experts = 8; m.top_k = 2; m.moe_ffn = 1410; m.tp = 4; },
                  {"tp 4", "moe_ffn 1410"});
}

TEST(ModelValidation, SizesMustBePositive) {
  expect_rejected([](ModelConfig& m) { m.hidden = 0; }, {"hidden", "> 0", "--hidden"});
  expect_rejected([](ModelConfig& m) { m.ffn = -4; }, {"ffn", "-4", "--ffn"});
  expect_rejected([](ModelConfig& m) { m.heads = 0; }, {"heads", "--heads"});
  expect_rejected([](ModelConfig& m) { m.layers = -1; }, {"layers", "--layers"});
  expect_rejected([](ModelConfig& m) { m.vocab = 0; }, {"vocab", "--vocab"});
  expect_rejected([](ModelConfig& m) { m.micro_batch = 0; }, {"micro_batch", "--mbs"});
  expect_rejected([](ModelConfig& m) { m.seq_len = -512; }, {"seq_len", "--seq"});
  expect_rejected([](ModelConfig& m) { m.tp = 0; }, {"tp", "--tp"});
  expect_rejected([](ModelConfig& m) { m.kv_heads = -8; }, {"kv_heads", "-8"});
  expect_rejected([](ModelConfig& m) { m.head_dim = -1; }, {"head_dim"});
  expect_rejected([](ModelConfig& m) { m.experts = -2; }, {"experts"});
}

TEST(ModelValidation, ExpertSettingsMustBeConsistent) {
  expect_rejected([](ModelConfig& m) { m.experts = 8; m.top_k = 0; }, {"top_k 0", "--top-k"});
  expect_rejected([](ModelConfig& m) { m.experts = 8; m.top_k = 9; }, {"top_k 9", "8 experts"});
  expect_rejected([](ModelConfig& m) { m.top_k = 2; }, {"top_k 2", "--experts"});
  expect_rejected([](ModelConfig& m) { m.shared_experts = 1; }, {"shared_experts 1"});
}

TEST(ModelValidation, TokenProductMustFit) {
  expect_rejected([](ModelConfig& m) { m.micro_batch = int64_t{1} << 40; m.seq_len = int64_t{1} << 40; },
                  {"overflows", "--mbs"});
}

TEST(ModelValidation, ModelJsonNamesMissingWrongAndUnknownFields) {
  nlohmann::json j = to_json(codonfm_by_hand());
  auto expect_json_error = [](const nlohmann::json& doc, const char* fragment) {
    try {
      (void)model_from_json(doc, "test document");
      ADD_FAILURE() << "accepted " << doc.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("test document"), std::string::npos) << e.what();
    }
  };
  nlohmann::json missing = j;
  missing.erase("heads");
  expect_json_error(missing, "missing required field 'heads'");
  nlohmann::json wrong = j;
  wrong["ffn"] = "16384";
  expect_json_error(wrong, "'ffn' must be an integer");
  nlohmann::json typo = j;
  typo["hiden"] = 4096;
  expect_json_error(typo, "unknown field 'hiden'");
  expect_json_error(nlohmann::json::array(), "expected a JSON object");
}

}  // namespace
}  // namespace nibble::workload
