// What each fuzz target does with one input, shared by the libFuzzer entry point (fuzz_targets.cpp) and
// the regression test that replays every stored finding and seed (tests/reliability). Each harness
// returns false for inputs it does not consider (non-JSON for the JSON parsers), calls std::abort()
// on a broken round trip, and lets any exception outside the contract (below) escape.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "nibble/results/result.hpp"
#include "nibble/io/tensor.hpp"
#include "nibble/law/bench_speedups.hpp"
#include "nibble/law/fit.hpp"
#include "nibble/law/planner.hpp"
#include "nibble/report.hpp"
#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_config.hpp"

// The contract every fuzz target checks: a parser handed arbitrary bytes either returns a value or
// throws std::invalid_argument / std::runtime_error (the two exceptions the CLI turns into
// "nibble: error: ..."). Anything else (a crash, a sanitizer report, a leak, a hang, or an exception
// of another type such as nlohmann::json::type_error, whose message names no field) is a finding.
namespace nibble::fuzz {

// Runs `parse`; swallows only the exceptions the contract allows, so libFuzzer sees every other one
// as an uncaught exception (a crash with a reproducer).
template <class F>
void expect_clean_rejection(F&& parse) {
  try {
    parse();
  } catch (const std::invalid_argument&) {
  } catch (const std::runtime_error&) {
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// JSON parsers are handed documents, not bytes: the JSON syntax itself is nlohmann's job, so inputs
// that are not JSON are discarded (returning a discarded value) and the fuzzer spends its time on
// valid JSON with hostile contents.
inline nlohmann::json parse_json_or_discard(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
}

}  // namespace nibble::fuzz

namespace nibble::fuzz {

// .npy: anything accepted converts to float32 and survives encode_npy -> parse_npy unchanged.
inline bool exercise_npy(const uint8_t* data, size_t size) {
  expect_clean_rejection([&] {
    const io::Tensor t = io::parse_npy({data, size}, "fuzz.npy");
    (void)io::to_float32(t);
    const io::Tensor again = io::parse_npy(io::encode_npy(t), "roundtrip.npy");
    if (again.shape != t.shape || again.dtype != t.dtype || again.bytes != t.bytes) std::abort();
  });
  return true;
}

// .safetensors: the whole image, then the header parser alone with a data size taken from the first
// 8 bytes (buffer sizes a real file of this length could not have).
inline bool exercise_safetensors(const uint8_t* data, size_t size) {
  expect_clean_rejection([&] {
    const auto contents = io::parse_safetensors({data, size}, "fuzz.safetensors");
    for (const auto& t : contents.tensors) (void)io::to_float32(t);
    const auto again = io::parse_safetensors(io::encode_safetensors(contents.tensors), "roundtrip");
    if (again.tensors.size() != contents.tensors.size()) std::abort();
    for (size_t i = 0; i < again.tensors.size(); ++i) {
      const auto& a = again.tensors[i];
      const auto& b = contents.tensors[i];
      if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.bytes != b.bytes) std::abort();
    }
  });
  if (size >= 8) {
    uint64_t data_size = 0;
    for (int i = 0; i < 8; ++i) data_size |= static_cast<uint64_t>(data[i]) << (8 * i);
    expect_clean_rejection(
        [&] { (void)io::parse_safetensors_header(as_text(data + 8, size - 8), data_size, "fuzz header"); });
  }
  return true;
}

// config.json: an accepted config also derives its GEMM list (what `nibble shapes` does next).
inline bool exercise_hf_config(const uint8_t* data, size_t size) {
  const nlohmann::json j = parse_json_or_discard(data, size);
  if (j.is_discarded()) return false;
  expect_clean_rejection([&] {
    workload::ModelConfig base;
    base.micro_batch = 2;
    base.seq_len = 128;
    const auto model = workload::hf_config_from_json(j, "fuzz config.json", base);
    const auto w = workload::derive_workload(model, {.lm_head = true, .attention = true});
    (void)workload::to_table(w);
    (void)workload::to_json(w).dump();
  });
  return true;
}

// Preset: model_from_json, the GEMM derivation (which validates, as load_preset's callers do), and
// the to_json -> model_from_json round trip.
inline bool exercise_preset(const uint8_t* data, size_t size) {
  const nlohmann::json j = parse_json_or_discard(data, size);
  if (j.is_discarded()) return false;
  expect_clean_rejection([&] {
    const auto model = workload::model_from_json(j, "fuzz preset");
    const auto w = workload::derive_workload(model, {.lm_head = true, .attention = true});
    (void)workload::describe(model);
    (void)workload::to_csv(w);
    if (!(workload::model_from_json(workload::to_json(model), "roundtrip") == model)) std::abort();
  });
  return true;
}

// The scaling-law runs CSV.
inline bool exercise_runs_csv(const uint8_t* data, size_t size) {
  expect_clean_rejection([&] {
    std::istringstream in{std::string(as_text(data, size))};
    (void)law::parse_runs_csv(in, "fuzz runs.csv");
  });
  return true;
}

// The bench result JSON as `nibble report` reads it, then every rendering the command produces.
inline bool exercise_bench_result(const uint8_t* data, size_t size) {
  const nlohmann::json j = parse_json_or_discard(data, size);
  if (j.is_discarded()) return false;
  expect_clean_rejection([&] {
    const auto r = bench::result_from_json(j);
    (void)report::render_terminal(r);
    (void)report::render_summary(r, "nibble report FILE --details");
    (void)report::to_csv(r);
    (void)report::to_html(r);
    (void)report::render_comparison(r, r);
  });
  return true;
}

// The bench JSON as `nibble law plan|map --speedups` reads it: speedups_from_bench_json under each kind
// of option the CLI passes (defaults; another FP8 recipe, FP4 recipe and mode), then the planner on
// what it returns (published law and efficiencies), its explanation and its JSON.
inline bool exercise_bench_speedups(const uint8_t* data, size_t size) {
  const nlohmann::json j = parse_json_or_discard(data, size);
  if (j.is_discarded()) return false;
  const law::BenchSpeedupOptions options[] = {{}, {"fp8-delayed", "mxfp4", "per-gemm"}, {"", "nvfp4", "pre-quantized"}};
  for (const auto& o : options) {
    expect_clean_rejection([&] {
      const law::BenchSpeedups s = law::speedups_from_bench_json(j, o, "fuzz bench.json");
      const law::Plan plan = law::plan_precision(law::published_constants(), law::published_quartet_efficiency(),
                                                 s.speedups, 1e9, 2e10);
      (void)law::explain_plan(plan);
      (void)law::plan_to_json(plan).dump();
      (void)law::fp4_fp4_threshold(law::published_constants(), law::published_quartet_efficiency(), s.speedups, 1e9);
    });
  }
  return true;
}

// A scaling-law fit JSON as `nibble law plan|map --fit` reads it: fit_from_json, a loss prediction
// with every scheme it holds, and the fit_to_json -> fit_from_json round trip.
inline bool exercise_law_fit(const uint8_t* data, size_t size) {
  const nlohmann::json j = parse_json_or_discard(data, size);
  if (j.is_discarded()) return false;
  expect_clean_rejection([&] {
    const law::FitResult fit = law::fit_from_json(j, "fuzz fit.json");
    for (const auto& [name, scheme] : fit.schemes) (void)law::predict_loss(fit.law, 1e9, 2e10, scheme.eff);
    const law::FitResult again = law::fit_from_json(law::fit_to_json(fit), "roundtrip");
    if (again.schemes.size() != fit.schemes.size()) std::abort();
  });
  return true;
}

}  // namespace nibble::fuzz
