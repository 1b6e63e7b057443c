// bench::PathNotes: one note line per (recipe, layer) and path, naming the modes only when they differ.
#include "nibble/results/path_notes.hpp"

#include <algorithm>

namespace nibble::bench {

void PathNotes::add(Mode mode, const std::string& path) {
  if (path.empty()) return;
  auto same = std::find_if(paths_.begin(), paths_.end(), [&](const auto& p) { return p.first == path; });
  if (same == paths_.end()) {
    paths_.push_back({path, {mode}});
  } else if (std::find(same->second.begin(), same->second.end(), mode) == same->second.end()) {
    same->second.push_back(mode);
  }
}

std::vector<std::string> PathNotes::lines(const std::string& recipe, const std::string& layer) const {
  std::vector<std::string> out;
  for (const auto& [path, modes] : paths_) {
    std::string which;
    if (paths_.size() > 1) {
      for (Mode m : modes) which += (which.empty() ? "[" : ", ") + std::string(to_string(m));
      which += "] ";
    }
    out.push_back(recipe + " " + layer + ": " + which + path);
  }
  return out;
}

}  // namespace nibble::bench
