// The bench JSON as `nibble law plan|map --speedups` reads it, then the planner on its speedups.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_bench_speedups(data, size) ? 0 : -1;
}
