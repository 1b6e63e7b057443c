// The bench result JSON as `nibble report` reads it: result_from_json, then every rendering the
// command can produce from it (terminal table, CSV, HTML, and a comparison with itself).
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_bench_result(data, size) ? 0 : -1;
}
