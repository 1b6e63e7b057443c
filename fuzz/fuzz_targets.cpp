// The libFuzzer entry point of every fuzz target. fuzz/CMakeLists.txt builds this file once per
// target (fuzz_npy, fuzz_safetensors, ...) with NIBBLE_FUZZ_HARNESS naming the harness of
// parser_harnesses.hpp it drives; the harnesses are shared with tests/reliability's replay test.
#include "parser_harnesses.hpp"

#ifndef NIBBLE_FUZZ_HARNESS
#error "NIBBLE_FUZZ_HARNESS must name a harness of parser_harnesses.hpp (fuzz/CMakeLists.txt sets it)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // -1 keeps inputs the harness does not consider (non-JSON for JSON parsers) out of the corpus.
  return nibble::fuzz::NIBBLE_FUZZ_HARNESS(data, size) ? 0 : -1;
}
