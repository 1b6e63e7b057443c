// Hugging Face config.json: any JSON document. An accepted config must also derive its GEMM list
// (the next thing `nibble shapes` / `nibble bench` do with it) without overflow or a crash.
#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_sources.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nibble::fuzz::parse_json_or_discard(data, size);
  if (j.is_discarded()) return -1;  // not JSON: keep it out of the corpus
  nibble::fuzz::expect_clean_rejection([&] {
    nibble::workload::ModelConfig base;
    base.micro_batch = 2;
    base.seq_len = 128;
    const auto model = nibble::workload::hf_config_from_json(j, "fuzz config.json", base);
    const auto w = nibble::workload::derive_workload(model, {.lm_head = true, .attention = true});
    (void)nibble::workload::to_table(w);
    (void)nibble::workload::to_json(w).dump();
  });
  return 0;
}
