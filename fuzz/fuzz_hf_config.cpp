// Hugging Face config.json: any JSON document. An accepted config must also derive its GEMM list
// (the next thing `nibble shapes` / `nibble bench` do with it) without overflow or a crash.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_hf_config(data, size) ? 0 : -1;
}
