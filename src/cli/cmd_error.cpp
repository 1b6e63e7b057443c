// `nibble error`: how much each recipe changes each tensor of a .npy or .safetensors file (metric
// definitions in include/nibble/quant/error_metrics.hpp). Tensors are read one at a time, so a
// multi-gigabyte checkpoint never has to fit in memory twice.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_registry.hpp"
#include "tensor_input.hpp"
#include "usage.hpp"
#include "nibble/workload/model_cli.hpp"
#include "nibble/io.hpp"
#include "nibble/quant.hpp"
#include "nibble/quant/error_metrics.hpp"
#include "nibble/report.hpp"

namespace {

namespace fs = std::filesystem;
using nibble::io::Tensor;
using nibble::quant::ErrorMetrics;
using nibble::quant::Recipe;

struct ErrorArgs {
  std::string file;
  std::vector<std::string> recipes;
  std::string role = "x";
  std::string format = "table";
  uint64_t seed = nibble::quant::QuantOptions{}.seed;
  std::string mx_scale_rule = "default";
  bool details = false;  // one wide row per (tensor, recipe) instead of a block per tensor
};

// One line of the report: metrics, or a note saying why this tensor/recipe pair has none.
struct ErrorRow {
  std::string tensor;
  std::string shape;
  std::string recipe;
  std::optional<ErrorMetrics> metrics;
  std::string note;
};

std::vector<Recipe> selected_recipes(const std::vector<std::string>& names) {
  std::vector<Recipe> out;
  if (names.empty()) {
    for (Recipe r : nibble::quant::kAllRecipes) {
      if (r != Recipe::bf16) out.push_back(r);  // default: every recipe that quantizes below 16 bits
    }
    return out;
  }
  for (const auto& n : names) out.push_back(nibble::quant::parse_recipe(n));
  return out;
}

bool is_npy(const fs::path& path) {
  const auto head = nibble::io::read_file_range(path, 0, std::min<uint64_t>(nibble::io::file_size_of(path), 6));
  return head.size() == 6 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0;
}

// Checked before a tensor's data is read: the data (at most 8 bytes per element), its float32 copy,
// one recipe's codes and its dequantized values, about 20 bytes per element in all.
void require_memory_for(const std::string& name, const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);  // the readers checked numel * size fits
  nibble::io::require_host_memory(n > UINT64_MAX / 20 ? UINT64_MAX : 20 * n,
                                  "measuring tensor '" + name + "' " + nibble::io::shape_string(shape) +
                                      " (about 20 bytes per element)");
}

// Rows for one floating tensor: every recipe measured, or a note per recipe whose blocks do not divide the
// shape. A tensor nothing can be measured on (empty, a scalar, no finite value) throws, naming `what`.
void measure_tensor(const Tensor& t, const std::string& what, const std::vector<Recipe>& recipes,
                    const nibble::quant::QuantOptions& options, std::vector<ErrorRow>& rows) {
  const std::string shape = nibble::io::shape_string(t.shape);
  const std::vector<float> x = nibble::cli::quantizable_values(t, what);
  const auto m = nibble::io::as_matrix(t.shape, what);
  for (Recipe r : recipes) {
    ErrorRow row{t.name, shape, nibble::quant::recipe_name(r), std::nullopt, ""};
    try {
      row.metrics = nibble::quant::quantization_error(r, x.data(), m.rows, m.cols, options);
    } catch (const std::invalid_argument& e) {
      row.note = e.what();  // shapes a recipe's blocks do not divide: a note, not a crash
    }
    rows.push_back(std::move(row));
  }
}

// JSON has no infinity: non-finite values are written as the strings "inf", "-inf", "nan".
nlohmann::ordered_json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string to_json(const std::vector<ErrorRow>& rows) {
  // ordered_json keeps the identifying fields first, as a reader scans them.
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json o = {{"tensor", r.tensor}, {"shape", r.shape}, {"recipe", r.recipe}};
    if (r.metrics) {
      const auto& m = *r.metrics;
      o["rel_mse"] = number(m.rel_mse);
      o["snr_db"] = number(m.snr_db);
      o["max_abs_err"] = number(m.max_abs_err);
      o["clipped_frac"] = number(m.clipped_frac);
      o["zero_frac"] = number(m.zero_frac);
      o["elements"] = m.elements;
      o["nonfinite"] = m.nonfinite;
      o["poisoned"] = m.poisoned;
      o["produced_by"] = m.produced_by;
    } else {
      for (const char* k : {"rel_mse", "snr_db", "max_abs_err", "clipped_frac", "zero_frac"}) o[k] = nullptr;
      o["note"] = r.note;
    }
    out.push_back(std::move(o));
  }
  return out.dump(2) + "\n";
}

// A note every recipe shares (dtype, rank) is said once for the tensor: when rows[i] opens a tensor whose rows
// all carry the same note, the index after them; else i.
size_t shared_note_end(const std::vector<ErrorRow>& rows, size_t i) {
  const ErrorRow& r = rows[i];
  if (r.metrics) return i;
  size_t j = i;
  while (j < rows.size() && rows[j].tensor == r.tensor && !rows[j].metrics && rows[j].note == r.note) ++j;
  return j == rows.size() || rows[j].tensor != r.tensor ? j : i;
}

std::string to_table(const std::vector<ErrorRow>& rows, const std::string& header) {
  size_t wt = 6, ws = 5, wr = 6;
  for (const auto& r : rows) {
    wt = std::max(wt, r.tensor.size());
    ws = std::max(ws, r.shape.size());
    wr = std::max(wr, r.recipe.size());
  }
  std::string out = header + "\n\n";
  out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>10}  {:>8}  {:>11}  {:>9}  {:>9}\n", "tensor", wt, "shape", ws,
                     "recipe", wr, "rel_mse", "snr_db", "max_abs_err", "clipped%", "zero%");
  std::vector<std::string> paths;
  std::string last_tensor;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ErrorRow& r = rows[i];
    // The tensor name and shape once per group keeps a long checkpoint readable.
    const bool first = r.tensor != last_tensor;
    last_tensor = r.tensor;
    if (const size_t j = first ? shared_note_end(rows, i) : i; j > i) {
      out += fmt::format("{:<{}}  {:<{}}  {:<{}}  note: {}\n", r.tensor, wt, r.shape, ws, "(all)", wr, r.note);
      i = j - 1;
      continue;
    }
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  ", first ? r.tensor : "", wt, first ? r.shape : "", ws, r.recipe, wr);
    if (!r.metrics) {
      out += "note: " + r.note + "\n";
      continue;
    }
    const auto& m = *r.metrics;
    out += fmt::format("{:>10.3e}  {:>8.2f}  {:>11.3e}  {:>9.4f}  {:>9.4f}", m.rel_mse, m.snr_db, m.max_abs_err,
                       100.0 * m.clipped_frac, 100.0 * m.zero_frac);
    out += "\n";
    // On its own line: the row's numbers stay in their columns, and the note stays whole.
    if (const std::string note = nibble::quant::nonfinite_note(m); !note.empty())
      out += fmt::format("{:<{}}  note: {}\n", "", wt + ws + wr + 4, note);  // under rel_mse
    if (std::find(paths.begin(), paths.end(), m.produced_by) == paths.end()) paths.push_back(m.produced_by);
  }
  if (!paths.empty()) {
    out += "\npaths:\n";
    for (const auto& p : paths) out += "  " + p + "\n";
  }
  return out;
}

// The default table: each tensor's name and shape on a line of their own, then one indented row per recipe, so
// long checkpoint names keep the table within a terminal's width.
std::string to_compact_table(const std::vector<ErrorRow>& rows, const std::string& header) {
  size_t wr = 6;
  for (const auto& r : rows) wr = std::max(wr, r.recipe.size());
  std::string out = nibble::report::wrap_text(header) + "\n";
  out += fmt::format("  {:<{}}  {:>10}  {:>8}  {:>11}  {:>9}  {:>9}\n", "recipe", wr, "rel_mse", "snr_db",
                     "max_abs_err", "clipped%", "zero%");
  std::vector<std::string> paths;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ErrorRow& r = rows[i];
    if (i == 0 || rows[i - 1].tensor != r.tensor) {
      out += nibble::report::wrap_text(r.tensor + " " + r.shape);
      if (const size_t j = shared_note_end(rows, i); j > i) {
        out += nibble::report::wrap_text("note: " + r.note, "  ", "    ");
        i = j - 1;
        continue;
      }
    }
    if (!r.metrics) {
      out += nibble::report::wrap_text(fmt::format("{:<{}}  note: {}", r.recipe, wr, r.note), "  ", "    ");
      continue;
    }
    const auto& m = *r.metrics;
    out += fmt::format("  {:<{}}  {:>10.3e}  {:>8.2f}  {:>11.3e}  {:>9.4f}  {:>9.4f}\n", r.recipe, wr, m.rel_mse,
                       m.snr_db, m.max_abs_err, 100.0 * m.clipped_frac, 100.0 * m.zero_frac);
    if (const std::string note = nibble::quant::nonfinite_note(m); !note.empty())
      out += nibble::report::wrap_text("(" + note + ")", "    ", "    ");
    if (std::find(paths.begin(), paths.end(), m.produced_by) == paths.end()) paths.push_back(m.produced_by);
  }
  if (!paths.empty()) {
    out += "\npaths:\n";
    for (const auto& p : paths) out += nibble::report::wrap_text(p, "  ", "    ");
  }
  return out;
}

int run_error(const ErrorArgs& a) {
  const std::vector<Recipe> recipes = selected_recipes(a.recipes);
  nibble::quant::QuantOptions options;
  options.role = nibble::quant::parse_role(a.role);
  options.seed = a.seed;
  if (a.mx_scale_rule != "default") options.mx_scale_rule = nibble::quant::parse_mx_scale_rule(a.mx_scale_rule);

  const fs::path path(a.file);
  std::vector<ErrorRow> rows;
  std::string kind;
  size_t measured_tensors = 0;
  std::vector<std::string> unmeasured;  // a .safetensors file's floating tensors nothing could be measured on
  if (is_npy(path) || path.extension() == ".npy") {  // a broken .npy gets the reader's precise message
    kind = ".npy";
    const std::string what = "'" + a.file + "'";
    const Tensor header = nibble::io::read_npy_header(path);
    nibble::cli::require_floating(header.dtype, what);
    require_memory_for(path.filename().string(), header.shape);
    Tensor t = nibble::io::read_npy(path);
    t.name = path.filename().string();
    measure_tensor(t, what, recipes, options, rows);
    measured_tensors = 1;
  } else if (path.extension() == ".safetensors") {
    kind = ".safetensors";
    const auto index = nibble::io::read_safetensors_index(path);
    for (const auto& e : index.entries) {
      const std::string shape = nibble::io::shape_string(e.shape);
      if (!e.dtype || !nibble::io::is_floating(*e.dtype)) {  // integer buffers of a checkpoint: listed, not measured
        const std::string note = !e.dtype ? "dtype " + e.dtype_tag + " is not loaded; skipped"
                                          : "dtype " + std::string(nibble::io::dtype_name(*e.dtype)) +
                                                " is not a floating-point tensor; skipped";
        for (Recipe r : recipes) rows.push_back({e.name, shape, nibble::quant::recipe_name(r), std::nullopt, note});
        continue;
      }
      require_memory_for(e.name, e.shape);
      const Tensor t = nibble::io::read_safetensors_tensor(path, index, e);
      try {
        measure_tensor(t, "tensor '" + nibble::io::printable(e.name) + "'", recipes, options, rows);
        ++measured_tensors;
      } catch (const std::invalid_argument& err) {
        unmeasured.push_back(err.what());
      }
    }
    if (measured_tensors == 0 && unmeasured.empty()) {
      throw std::invalid_argument("'" + a.file + "' has no floating-point tensors (F32, F16, BF16, F64) to measure");
    }
  } else {
    throw std::invalid_argument("'" + a.file + "' is neither a .npy file (no \\x93NUMPY magic) nor named "
                                "*.safetensors; pass a NumPy .npy or a .safetensors checkpoint");
  }

  if (a.format == "json") {
    const std::string s = to_json(rows);
    std::fwrite(s.data(), 1, s.size(), stdout);
  } else {
    const std::string header = fmt::format("{} ({}, {} tensor{}), role {}, seed {}", a.file, kind, measured_tensors,
                                           measured_tensors == 1 ? "" : "s", a.role, a.seed);
    const std::string s = a.details ? to_table(rows, header) : to_compact_table(rows, header);
    std::fwrite(s.data(), 1, s.size(), stdout);
  }
  if (!unmeasured.empty()) {
    // The measured tensors are printed above; the run still fails, so a script cannot take it for complete.
    std::string list;
    for (const auto& u : unmeasured) list += "\n  " + u;
    throw std::invalid_argument(fmt::format("'{}': {} floating-point tensor{} could not be measured:{}", a.file,
                                            unmeasured.size(), unmeasured.size() == 1 ? "" : "s", list));
  }
  return 0;
}

std::function<int()> setup_error(CLI::App& sub) {
  auto a = std::make_shared<ErrorArgs>();
  sub.add_option("file", a->file,
                 ".npy or .safetensors file (f32, f16, bf16; f64 rounded to float32): 1-D is one row, 2-D rows x "
                 "cols (blocks along cols), N-D (prod of leading dims) x last dim")
      ->required();
  sub.add_option("--recipes", a->recipes,
                 std::string("comma-separated recipes (default: every one but bf16): ") + nibble::quant::recipe_name_list())
      ->delimiter(',')
      ->check(nibble::cli::recipe_check());
  sub.add_option("--role", a->role, "quantize as role x (activation), w (weight) or dy (gradient)")
      ->check(nibble::cli::value_check(nibble::quant::parse_role, "ROLE"))
      ->capture_default_str();
  sub.add_option("--format", a->format, "output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  sub.add_option("--seed", a->seed, "seed of stochastic rounding and random Hadamard signs")
      ->check(nibble::workload::non_negative_number())
      ->capture_default_str();
  sub.add_option("--mx-scale-rule", a->mx_scale_rule,
                 "mxfp8/mxfp4 block scale rule: default (te for mxfp8, ocp for mxfp4), te (alias round-up) or ocp")
      ->check(nibble::cli::mx_scale_rule_check())
      ->capture_default_str();
  sub.add_flag("--details", a->details,
               "one wide row per tensor and recipe (the tensor's name and shape on every first row) instead of a "
               "block per tensor");
  return [a] { return run_error(*a); };
}

const bool registered = nibble::cli::register_command(
    {"error", "quantization error of every tensor in a .npy or .safetensors file, per recipe", setup_error});

}  // namespace
