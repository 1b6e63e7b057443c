// report::grouped_notes: per-layer path notes that repeat across layers, as one line each.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nibble/report/notes.hpp"

namespace nibble::report {
namespace {

struct Group {
  std::string recipe, text;  // text: what follows "<recipe> <layer>: "
  std::vector<std::string> layers;  // empty: a note that is not per-layer, kept as `text`
};

// The layer a note names after "<recipe> ", when "<recipe> <layer>: " opens it (the longest such layer).
const std::string* layer_of(const std::string& note, const std::string& recipe, const std::set<std::string>& layers) {
  const std::string* best = nullptr;
  for (const std::string& layer : layers) {
    const std::string head = recipe + " " + layer + ": ";
    if (note.size() > head.size() && note.compare(0, head.size(), head) == 0 &&
        (best == nullptr || layer.size() > best->size()))
      best = &layer;
  }
  return best;
}

}  // namespace

std::vector<std::string> grouped_notes(const bench::BenchResult& result) {
  std::set<std::string> recipes, layers;
  for (const bench::Row& r : result.rows) {
    recipes.insert(r.recipe);
    layers.insert(r.layer);
  }
  std::vector<Group> groups;
  for (const std::string& note : result.notes) {
    const std::string* recipe = nullptr;
    const std::string* layer = nullptr;
    for (const std::string& rc : recipes) {
      const std::string* l = layer_of(note, rc, layers);
      if (l != nullptr && (recipe == nullptr || rc.size() > recipe->size())) recipe = &rc, layer = l;
    }
    if (layer == nullptr) {
      groups.push_back({"", note, {}});
      continue;
    }
    const std::string text = note.substr(recipe->size() + 1 + layer->size() + 2);
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return !g.layers.empty() && g.recipe == *recipe && g.text == text; });
    if (same == groups.end()) {
      groups.push_back({*recipe, text, {*layer}});
    } else if (std::find(same->layers.begin(), same->layers.end(), *layer) == same->layers.end()) {
      same->layers.push_back(*layer);
    }
  }
  std::vector<std::string> out;
  out.reserve(groups.size());
  for (const Group& g : groups) {
    if (g.layers.empty()) {
      out.push_back(g.text);
      continue;
    }
    out.push_back(fmt::format("{} {}: {}", g.recipe, fmt::join(g.layers, ", "), g.text));
  }
  return out;
}

}  // namespace nibble::report
