// The bench result JSON as `nibble report` reads it: result_from_json, then every rendering the
// command can produce from it (terminal table, CSV, HTML, and a comparison with itself).
#include "nibble/bench/result.hpp"
#include "nibble/report/render.hpp"
#include "parser_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nibble::fuzz::parse_json_or_discard(data, size);
  if (j.is_discarded()) return -1;
  nibble::fuzz::expect_clean_rejection([&] {
    const auto r = nibble::bench::result_from_json(j);
    (void)nibble::report::render_terminal(r);
    (void)nibble::report::to_csv(r);
    (void)nibble::report::to_html(r);
    (void)nibble::report::render_comparison(r, r);
  });
  return 0;
}
