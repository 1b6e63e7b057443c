// Preset files (data/presets/*.json, the `model` object of `nibble shapes --format json`): any JSON
// document through model_from_json, then the GEMM derivation, then the to_json -> model_from_json
// round trip, which must give the same model.
#include <cstdlib>

#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_config.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nibble::fuzz::parse_json_or_discard(data, size);
  if (j.is_discarded()) return -1;
  nibble::fuzz::expect_clean_rejection([&] {
    const auto model = nibble::workload::model_from_json(j, "fuzz preset");
    // derive_workload validates first, as load_preset's callers do; describe() assumes a valid model.
    const auto w = nibble::workload::derive_workload(model, {.lm_head = true, .attention = true});
    (void)nibble::workload::describe(model);
    (void)nibble::workload::to_csv(w);
    const auto again = nibble::workload::model_from_json(nibble::workload::to_json(model), "roundtrip");
    if (!(again == model)) std::abort();
  });
  return 0;
}
