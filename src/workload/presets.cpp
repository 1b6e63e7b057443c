// Shipped presets: data/presets/<name>.json, one model per file with its source written in it. The
// data folder is found at run time so an installed or moved binary still finds it.
#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/workload/model_sources.hpp"

namespace nibble::workload {
namespace fs = std::filesystem;

fs::path data_dir() {
  if (const char* env = std::getenv("NIBBLE_DATA_DIR"); env != nullptr && *env != '\0') {
    if (!fs::is_directory(env))
      throw std::runtime_error(fmt::format("NIBBLE_DATA_DIR={} is not a folder: point it at nibble's data/ folder "
                                           "(the one holding presets/) or unset it", env));
    return env;
  }
  std::vector<fs::path> tried;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    // Build tree (binary in build-*/), install tree (bin/ next to share/nibble/data), or data beside it.
    for (const fs::path& c : {dir / "data", dir.parent_path() / "data", dir.parent_path() / "share" / "nibble" / "data"}) {
      tried.push_back(c);
      if (fs::is_directory(c / "presets")) return c;
    }
  }
#ifdef NIBBLE_DATA_DIR
  tried.emplace_back(NIBBLE_DATA_DIR);
  if (fs::is_directory(fs::path(NIBBLE_DATA_DIR) / "presets")) return NIBBLE_DATA_DIR;
#endif
  std::string places;
  for (const auto& p : tried) places += (places.empty() ? "" : ", ") + p.string();
  throw std::runtime_error(fmt::format("cannot find nibble's data folder (tried {}): set NIBBLE_DATA_DIR to the "
                                       "folder holding presets/", places.empty() ? "nothing" : places));
}

std::vector<std::string> list_presets() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(data_dir() / "presets"))
    if (entry.is_regular_file() && entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

ModelConfig load_preset(std::string_view name) {
  const auto names = list_presets();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument(fmt::format("unknown preset '{}': known presets are {} (or describe the model with "
                                            "--hf-config / flags)", name, fmt::join(names, ", ")));
  const fs::path path = data_dir() / "presets" / (std::string(name) + ".json");
  const nlohmann::json j = io::read_json_file(path.string(), "preset file");
  ModelConfig m = model_from_json(j, "preset " + path.string());
  if (m.name != name)
    throw std::invalid_argument(fmt::format("preset file {} says name '{}': the name must match the file name '{}'",
                                            path.string(), m.name, name));
  validate(m);
  return m;
}

}  // namespace nibble::workload
