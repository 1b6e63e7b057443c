// Preset files (data/presets/*.json, the `model` object of `nibble shapes --format json`): any JSON
// document through model_from_json, then the GEMM derivation, then the to_json -> model_from_json
// round trip, which must give the same model.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_preset(data, size) ? 0 : -1;
}
