// .npy images: parse_npy must reject every malformed header (lengths, dtypes, shapes that overflow
// or disagree with the bytes present) with an exception, and anything it accepts must survive the
// round trip encode_npy -> parse_npy unchanged and convert to float32 without reading out of bounds.
#include <cstdlib>

#include "nibble/io/npy.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble::fuzz::expect_clean_rejection([&] {
    const nibble::io::Tensor t = nibble::io::parse_npy({data, size}, "fuzz.npy");
    (void)nibble::io::to_float32(t);
    if (t.dtype == nibble::io::DType::bf16) return;  // .npy has no bf16 (never produced by the reader)
    const auto again = nibble::io::parse_npy(nibble::io::encode_npy(t), "roundtrip.npy");
    if (again.shape != t.shape || again.dtype != t.dtype || again.bytes != t.bytes) std::abort();
  });
  return 0;
}
