// Memory accounting per operand and the per-recipe block memory that the measured and the predicted
// `nibble bench` report (predict::recipe_memory), on fresh random shapes, counted here by hand.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "nibble/quant/recipe_list.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/predict.hpp"
#include "nibble/predict/operand_memory.hpp"
#include "test_seed.hpp"

namespace nibble::predict {
namespace {

using nibble::testing::fresh_rng;

TEST(MemoryAccounting, MatchesHandCountsOnARandomShape) {
  auto rng = fresh_rng();
  const int64_t t = 128 * (1 + rng() % 64), i = 128 * (1 + rng() % 32), o = 128 * (1 + rng() % 32);
  const int64_t nx = t * i, nw = o * i;

  const auto bf = linear_layer_memory("bf16", t, i, o);
  EXPECT_EQ(bf.activation.bytes.total(), 2 * nx);
  EXPECT_DOUBLE_EQ(bf.activation.ratio_vs_bf16(), 1.0);
  EXPECT_EQ(bf.saved_for_backward, bf.bf16_saved_for_backward);

  const auto cur = operand_memory("fp8-current", TensorRole::activation, t, i);
  EXPECT_EQ(cur.bytes.total(), 2 * nx + 4);  // row-wise and transposed copies + one scale
  EXPECT_EQ(cur.saved_for_backward, nx);     // wgrad reads only the transposed copy
  const auto del = operand_memory("fp8-delayed", TensorRole::weight, o, i);
  EXPECT_EQ(del.bytes.scales, 4 + 4 * 1024);
  // Blackwell's FP8 GEMMs take any layout: one copy, which the backward GEMMs read too.
  const auto one = operand_memory("fp8-current", TensorRole::activation, t, i, /*fp8_tn_only=*/false);
  EXPECT_EQ(one.bytes.total(), nx + 4);
  EXPECT_EQ(one.saved_for_backward, nx + 4);
  EXPECT_EQ(operand_memory("fp8-block", TensorRole::activation, t, i, false).bytes.total(),
            operand_memory("fp8-block", TensorRole::activation, t, i).bytes.total());  // scales along K: both copies

  const auto blk = operand_memory("fp8-block", TensorRole::weight, o, i);
  EXPECT_EQ(blk.bytes.scales, 4 * (o / 128) * cuda::scale_layout::round_up(i / 128, 4));
  const auto blk_x = operand_memory("fp8-block", TensorRole::activation, t, i);
  EXPECT_EQ(blk_x.bytes.scales, 4 * (i / 128) * t);
  EXPECT_EQ(blk_x.bytes.transposed_scales, 4 * (t / 128) * i);

  const auto mx4 = operand_memory("mxfp4", TensorRole::activation, t, i);
  EXPECT_EQ(mx4.bytes.codes, nx / 2);
  EXPECT_EQ(mx4.bytes.scales, nx / 32);

  const auto q = linear_layer_memory("quartet", t, i, o);
  EXPECT_EQ(q.activation.bytes.masks, nx / 8);
  EXPECT_EQ(q.weight.bytes.masks, nw / 8);
  EXPECT_EQ(q.activation.bytes.transposed_codes, nx / 2);  // the transient re-quantized copy of backward
  EXPECT_EQ(q.saved_for_backward, (nx / 2 + nx / 32 + nx / 8) + (nw / 2 + nw / 32 + nw / 8));
  EXPECT_LT(q.saved_for_backward, bf.saved_for_backward / 3);  // ~0.33 of BF16
  EXPECT_EQ(q.gradient.saved_for_backward, 0);

  const auto nv = operand_memory("nvfp4", TensorRole::gradient, t, o);
  EXPECT_EQ(nv.bytes.scales, t * o / 16 + 4);
}

TEST(MemoryAccounting, RejectsUnknownRecipesAndListsTheKnownOnes) {
  try {
    (void)operand_memory("fp6", TensorRole::weight, 128, 128);
    ADD_FAILURE() << "accepted recipe fp6";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("quartet"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)operand_memory("bf16", TensorRole::weight, 0, 128), std::invalid_argument);
  EXPECT_EQ(quant::recipe_names().size(), 8u);
  for (const auto& r : quant::recipe_names()) EXPECT_NO_THROW((void)linear_layer_memory(r, 15872, 4096, 12288));
}

bench::Row fprop_row(const std::string& layer, int64_t t, int64_t i, int64_t o, int64_t count,
                     const std::string& recipe, bench::Mode mode, std::string path) {
  bench::Row r;
  r.layer = layer;
  r.pass = "fprop";
  r.m = t, r.k = i, r.n = o;
  r.count = count;
  r.recipe = recipe;
  r.mode = mode;
  r.path = std::move(path);
  r.total_ms = 1;
  return r;
}

// The long way: X, W, dY operands of one layer plus the emulated path's buffers.
int64_t operands_by_hand(const std::string& recipe, int64_t t, int64_t i, int64_t o, bool emulated) {
  const auto l = linear_layer_memory(recipe, t, i, o);
  int64_t sum = l.activation.bytes.total() + l.weight.bytes.total() + l.gradient.bytes.total();
  if (emulated) {
    for (auto [r, c] : {std::pair{t, i}, std::pair{o, i}, std::pair{t, o}}) {
      sum += (recipe == "nvfp4" || recipe == "mxfp8") ? 4 * r * c : 2 * r * c + 4 * (r + c);
    }
  }
  return sum;
}

TEST(RecipeMemory, LargestLayerSavedOverTheBlockAndThePeak) {
  auto rng = fresh_rng();
  for (const std::string recipe : {"bf16", "fp8-current", "fp8-block", "mxfp8", "nvfp4", "mxfp4", "quartet"}) {
    const bool emulated = recipe == "mxfp8" || recipe == "nvfp4" || recipe == "mxfp4" || recipe == "quartet";
    const std::string path = recipe == "mxfp8" || recipe == "nvfp4" ? "emulated-exact (bf16)"
                             : emulated                           ? "emulated-exact (fp8)"
                                                                  : "native";
    const int64_t t = 128 * (1 + rng() % 32);
    const int64_t h = 128 * (1 + rng() % 16), f = 128 * (1 + rng() % 32);
    std::vector<bench::Row> rows = {fprop_row("qkv", t, h, 3 * h, 1, recipe, bench::Mode::step, path),
                                    fprop_row("mlp_up", t, h, f, 2, recipe, bench::Mode::step, path),
                                    fprop_row("mlp_down", t, f, h, 1, recipe, bench::Mode::step, path)};
    // Ignored: another mode of the same layers, another recipe, a failed row, the once-per-model lm_head.
    rows.push_back(fprop_row("qkv", t, h, 3 * h, 1, recipe, bench::Mode::pre_quantized, path));
    rows.push_back(fprop_row("qkv", 4 * t, h, 3 * h, 1, recipe == "bf16" ? "mxfp4" : "bf16", bench::Mode::step, path));
    rows.push_back(fprop_row("attn_out", 8 * t, 8 * h, h, 1, recipe, bench::Mode::step, path));
    rows.back().error = "out of memory";
    rows.push_back(fprop_row("lm_head", 8 * t, h, 64 * h, 1, recipe, bench::Mode::step, "native"));
    rows.back().per_model = true;

    const bench::MemoryUsage m = recipe_memory(recipe, rows);
    EXPECT_EQ(m.recipe, recipe);
    EXPECT_EQ(m.measured_bytes, 0);
    int64_t largest = 0, largest_unsaved = 0, saved = 0;
    for (int k = 0; k < 3; ++k) {
      const auto& r = rows[k];
      const int64_t ops = operands_by_hand(recipe, r.m, r.k, r.n, emulated);
      const int64_t keep = linear_layer_memory(recipe, r.m, r.k, r.n).saved_for_backward;
      saved += keep * r.count;
      if (ops > largest) largest = ops, largest_unsaved = ops - keep;
    }
    EXPECT_EQ(m.operand_bytes, largest) << recipe;
    EXPECT_EQ(m.saved_bytes, saved) << recipe;
    EXPECT_EQ(m.peak_bytes, saved + largest_unsaved) << recipe;
    EXPECT_GT(m.peak_bytes, m.saved_bytes);
  }
}

TEST(RecipeMemory, PredictedPathCountsLikeTheMeasuredOne) {
  auto rng = fresh_rng();
  const int64_t t = 128 * (1 + rng() % 32), i = 128 * (1 + rng() % 16), o = 128 * (1 + rng() % 16);
  for (const std::string recipe : {"mxfp4", "nvfp4", "quartet", "mxfp8"}) {
    const std::string path = recipe == "mxfp4" || recipe == "quartet" ? "emulated-exact (fp8)" : "emulated-exact (bf16)";
    auto measured = fprop_row("qkv", t, i, o, 1, recipe, bench::Mode::step, path);
    auto predicted = measured;
    predicted.path = "predicted";
    predicted.predicted_path = path;
    auto native = predicted;
    native.predicted_path = "native";  // e.g. a Blackwell prediction: no emulation buffers
    const auto a = recipe_memory(recipe, {measured});
    const auto b = recipe_memory(recipe, {predicted});
    const auto c = recipe_memory(recipe, {native});
    EXPECT_EQ(a.operand_bytes, b.operand_bytes) << recipe;
    EXPECT_EQ(a.peak_bytes, b.peak_bytes) << recipe;
    EXPECT_EQ(b.operand_bytes - c.operand_bytes,
              emulation_bytes(recipe, path, t, i) + emulation_bytes(recipe, path, o, i) +
                  emulation_bytes(recipe, path, t, o))
        << recipe;
    EXPECT_GT(emulation_bytes(recipe, path, t, i), 0);
    EXPECT_EQ(emulation_bytes(recipe, "native", t, i), 0);
  }
  EXPECT_EQ(recipe_memory("mxfp4", {}).operand_bytes, 0);  // no rows: nothing modelled
}

}  // namespace
}  // namespace nibble::predict
