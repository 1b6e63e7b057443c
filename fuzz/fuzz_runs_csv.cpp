// The scaling-law runs CSV (`nibble law fit --runs`): arbitrary text, quoted fields, odd line endings.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_runs_csv(data, size) ? 0 : -1;
}
