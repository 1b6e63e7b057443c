// .npy images: parse_npy must reject every malformed header (lengths, dtypes, shapes that overflow
// or disagree with the bytes present) with an exception, and anything it accepts must survive the
// round trip encode_npy -> parse_npy unchanged and convert to float32 without reading out of bounds.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_npy(data, size) ? 0 : -1;
}
