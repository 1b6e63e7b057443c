// A scaling-law fit JSON as `nibble law plan|map --fit` reads it, and its round trip.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_law_fit(data, size) ? 0 : -1;
}
