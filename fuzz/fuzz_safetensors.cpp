// .safetensors images: the 8-byte length, the header JSON (offsets, dtypes, shapes whose byte size
// overflows or exceeds the buffer, overlaps and holes) and the data buffer. Accepted files must
// re-encode and re-parse to the same tensors.
// The harness itself is in parser_harnesses.hpp (shared with tests/reliability's replay test).
#include "parser_harnesses.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::exercise_safetensors(data, size) ? 0 : -1;
}
