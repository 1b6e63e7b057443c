// The notes of a result as a reader sees them. The engine writes one path note per (recipe, layer),
// "<recipe> <layer>: <path>", and most layers of a recipe run the same path, so a 4-layer model's
// raw notes repeat each path four times (and a 32-expert MoE's 34 times). Renderings group the
// notes that differ only in the layer into one line, "<recipe> <layer>, <layer>, ...: <path>", in the
// order of first appearance; every other note passes unchanged. The JSON keeps the raw notes.
#pragma once
#include <string>
#include <vector>

#include "nibble/results/result.hpp"

namespace nibble::report {

// `notes` grouped as above; a note is per-layer only when it starts with "<recipe> <layer>: " for a
// recipe and a layer that some row of `result` has.
std::vector<std::string> grouped_notes(const bench::BenchResult& result);

}  // namespace nibble::report
