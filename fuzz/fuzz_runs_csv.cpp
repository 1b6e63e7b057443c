// The scaling-law runs CSV (`nibble law fit --runs`): arbitrary text, quoted fields, odd line endings.
#include <sstream>
#include <string>

#include "nibble/law/runs.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble::fuzz::expect_clean_rejection([&] {
    std::istringstream in{std::string(nibble::fuzz::as_text(data, size))};
    (void)nibble::law::parse_runs_csv(in, "fuzz runs.csv");
  });
  return 0;
}
