// Refusing a benchmark row before allocating: the bytes a row needs at least, against what the GPU
// has free, with the numbers and the fix in the message, so that a row too large is refused before
// any allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nibble::engine {

// The message refusing `what` when `need` bytes exceed `free_bytes`; empty when they fit.
inline std::string memory_refusal(const std::string& what, int64_t need, size_t free_bytes, size_t total_bytes) {
  if (need <= 0 || static_cast<uint64_t>(need) <= free_bytes) return {};
  const auto mib = [](uint64_t b) { return std::to_string(b >> 20); };
  return "out of GPU memory (refused before allocating): " + what + " needs at least " +
         mib(static_cast<uint64_t>(need)) + " MiB, " + mib(free_bytes) + " MiB free of " + mib(total_bytes) +
         " MiB; try a smaller --mbs or --seq, or a larger --tp";
}

}  // namespace nibble::engine
