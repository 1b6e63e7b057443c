// .safetensors images: the 8-byte length, the header JSON (offsets, dtypes, shapes whose byte size
// overflows or exceeds the buffer, overlaps and holes) and the data buffer. Accepted files must
// re-encode and re-parse to the same tensors.
#include <cstdlib>

#include "nibble/io/safetensors.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble::fuzz::expect_clean_rejection([&] {
    const auto contents = nibble::io::parse_safetensors({data, size}, "fuzz.safetensors");
    for (const auto& t : contents.tensors) (void)nibble::io::to_float32(t);
    const auto again = nibble::io::parse_safetensors(nibble::io::encode_safetensors(contents.tensors), "roundtrip");
    if (again.tensors.size() != contents.tensors.size()) std::abort();
    for (size_t i = 0; i < again.tensors.size(); ++i) {
      const auto& a = again.tensors[i];
      const auto& b = contents.tensors[i];
      if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.bytes != b.bytes) std::abort();
    }
  });
  // The header parser alone, with a data size taken from the first 8 bytes: reaches offset checks
  // with buffer sizes a real file of this size could not have.
  if (size >= 8) {
    uint64_t data_size = 0;
    for (int i = 0; i < 8; ++i) data_size |= static_cast<uint64_t>(data[i]) << (8 * i);
    nibble::fuzz::expect_clean_rejection([&] {
      (void)nibble::io::parse_safetensors_header(nibble::fuzz::as_text(data + 8, size - 8), data_size, "fuzz header");
    });
  }
  return 0;
}
