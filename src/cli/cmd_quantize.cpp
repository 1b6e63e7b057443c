// `nibble quantize`: one tensor through one recipe's CPU reference, written back as float32 in the
// original domain (rotations undone), optionally with its raw codes and scales. Every output is
// staged and renamed into place only after all of them are complete, so a failed run leaves none.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
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

struct QuantizeArgs {
  std::string recipe;
  std::string role = "x";
  std::string in;
  std::string out;
  std::string codes;
  std::string scales;
  uint64_t seed = nibble::quant::QuantOptions{}.seed;
  std::string mx_scale_rule = "default";
};

// The block grid of a 1-D input stays 1-D; any other input's is 2-D, (rows, cols) of its matrix view.
std::vector<int64_t> grid_shape(const Tensor& in, int64_t rows, int64_t cols) {
  if (in.shape.size() == 1) return {cols};
  return {rows, cols};
}

// Codes one per byte (E2M1 unpacked: bit 3 sign, bits 2-1 exponent, bit 0 mantissa), row-major, in the
// input's shape.
Tensor codes_tensor(const nibble::quant::QuantizedTensor& q, const Tensor& in) {
  std::vector<uint8_t> codes(static_cast<size_t>(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) codes[static_cast<size_t>(r * q.cols + c)] = q.code_at(r, c);
  }
  return nibble::io::make_u8_tensor("codes", in.shape, codes);
}

// Decoded block scales (exact float32 of the stored FP32 / E8M0 / UE4M3 value) over the block grid;
// per-tensor recipes give a single entry, their per-tensor decode scale.
Tensor scales_tensor(const nibble::quant::QuantizedTensor& q, const Tensor& in) {
  using nibble::quant::ScaleFormat;
  if (q.scale_format == ScaleFormat::none) {
    const float s = q.tensor_scale;
    return nibble::io::make_f32_tensor("scales", grid_shape(in, 1, 1), std::span(&s, 1));
  }
  const int64_t gr = q.block_grid_rows(), gc = q.block_grid_cols();
  std::vector<float> s(static_cast<size_t>(gr * gc));
  for (int64_t r = 0; r < gr; ++r) {
    for (int64_t c = 0; c < gc; ++c) s[static_cast<size_t>(r * gc + c)] = q.block_scale_at(r * q.block_rows, c * q.block_cols);
  }
  return nibble::io::make_f32_tensor("scales", grid_shape(in, gr, gc), s);
}

void check_distinct_paths(const QuantizeArgs& a) {
  std::vector<std::pair<std::string, std::string>> outs = {{"--out", a.out}};
  if (!a.codes.empty()) outs.emplace_back("--codes", a.codes);
  if (!a.scales.empty()) outs.emplace_back("--scales", a.scales);
  const auto same = [](const std::string& x, const std::string& y) {
    std::error_code ec;
    return fs::weakly_canonical(x, ec) == fs::weakly_canonical(y, ec);
  };
  for (size_t i = 0; i < outs.size(); ++i) {
    if (same(outs[i].second, a.in)) {
      throw nibble::cli::UsageError(outs[i].first + " '" + outs[i].second + "' is the input file; choose another path");
    }
    for (size_t j = i + 1; j < outs.size(); ++j) {
      if (same(outs[i].second, outs[j].second)) {
        throw nibble::cli::UsageError(outs[i].first + " and " + outs[j].first + " name the same file '" +
                                    outs[i].second + "'; give each output its own path");
      }
    }
  }
}

int run_quantize(const QuantizeArgs& a) {
  using namespace nibble::quant;
  // Validate everything the user typed before touching any file.
  const Recipe recipe = parse_recipe(a.recipe);
  QuantOptions options;
  options.role = parse_role(a.role);
  options.seed = a.seed;
  if (a.mx_scale_rule != "default") options.mx_scale_rule = parse_mx_scale_rule(a.mx_scale_rule);
  if (recipe == Recipe::bf16 && (!a.codes.empty() || !a.scales.empty())) {
    throw nibble::cli::UsageError(std::string(a.codes.empty() ? "--scales" : "--codes") +
                                  ": recipe bf16 has no low-precision codes or scales (its --out is the bf16 tensor "
                                  "itself); drop --codes and --scales");
  }
  check_distinct_paths(a);

  // The header first: dtype, shape and the memory the run needs are checked before the data is read.
  const std::string what = "'" + a.in + "'";
  const Tensor header = nibble::io::read_npy_header(a.in);
  nibble::cli::require_floating(header.dtype, what);
  const auto m = nibble::io::as_matrix(header.shape, what);
  // The data, its float32 copy, codes, dequantized values and the encoded outputs: about 20 bytes
  // per element.
  const uint64_t n = static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
  nibble::io::require_host_memory(n > UINT64_MAX / 20 ? UINT64_MAX : 20 * n,
                                  "quantizing '" + a.in + "' " + nibble::io::shape_string(header.shape) +
                                      " (about 20 bytes per element)");
  const Tensor in = nibble::io::read_npy(a.in);
  const std::vector<float> x = nibble::cli::quantizable_values(in, what);
  const QuantizedTensor q = quantize(recipe, x.data(), m.rows, m.cols, options);
  const std::vector<float> xq = dequantize_original(q);

  std::vector<nibble::io::StagedFile> staged;
  staged.reserve(3);
  staged.emplace_back(a.out);
  staged.back().write(nibble::io::encode_npy(nibble::io::make_f32_tensor("out", in.shape, xq)));
  if (!a.codes.empty()) {
    staged.emplace_back(a.codes);
    staged.back().write(nibble::io::encode_npy(codes_tensor(q, in)));
  }
  if (!a.scales.empty()) {
    staged.emplace_back(a.scales);
    staged.back().write(nibble::io::encode_npy(scales_tensor(q, in)));
  }
  // All outputs are complete; only renames remain. If one fails, take back the ones already made.
  size_t committed = 0;
  try {
    for (auto& f : staged) {
      f.commit();
      ++committed;
    }
  } catch (...) {
    for (size_t i = 0; i < committed; ++i) {
      std::error_code ec;
      fs::remove(staged[i].final_path(), ec);
    }
    throw;
  }

  const ErrorMetrics e = measure_quantization_error(x.data(), q);
  std::printf("%s", nibble::report::wrap_text(fmt::format("{}: {} x {} with {} role {} -> {}", a.in, m.rows, m.cols,
                                                         recipe_name(recipe), role_name(options.role), a.out),
                                             "", "  ")
                         .c_str());
  std::printf("%s", nibble::report::wrap_text("path: " + q.produced_by, "  ", "    ").c_str());
  if (q.tensor_scale != 1.0f && q.scale_format != ScaleFormat::none) {
    // nvfp4's global FP32 scale is not in --scales (which holds the UE4M3 block scales exactly).
    std::printf("  tensor_scale: %.9g (value = code * block_scale * tensor_scale)\n", q.tensor_scale);
  }
  std::printf("  rel_mse %.4e  snr_db %.2f  max_abs_err %.4e\n  clipped_frac %.4e  zero_frac %.4e\n", e.rel_mse,
              e.snr_db, e.max_abs_err, e.clipped_frac, e.zero_frac);
  if (const std::string note = nibble::quant::nonfinite_note(e); !note.empty())
    std::printf("%s", nibble::report::wrap_text(note, "  ", "    ").c_str());
  std::fflush(stdout);
  nibble::report::say_written({a.out, a.codes, a.scales});
  return 0;
}

std::function<int()> setup_quantize(CLI::App& sub) {
  auto a = std::make_shared<QuantizeArgs>();
  sub.add_option("--recipe", a->recipe, std::string("recipe: ") + nibble::quant::recipe_name_list())
      ->required()
      ->check(nibble::cli::recipe_check());
  sub.add_option("--role", a->role, "tensor role: x (activation), w (weight), dy (gradient)")
      ->check(nibble::cli::value_check(nibble::quant::parse_role, "ROLE"))
      ->capture_default_str();
  sub.add_option("input,--in", a->in,
                 "input .npy (f32, f16; f64 rounded to float32): 1-D is one row, 2-D rows x cols (blocks along "
                 "cols), N-D (prod of leading dims) x last dim")
      ->required();
  sub.add_option("--out", a->out, "output .npy: the dequantized float32 tensor in the original domain")->required();
  sub.add_option("--codes", a->codes, "optional .npy of the raw element codes, uint8, one per element");
  sub.add_option("--scales", a->scales, "optional .npy of the decoded block scales, float32, over the block grid");
  sub.add_option("--seed", a->seed, "seed of stochastic rounding and random Hadamard signs")
      ->check(nibble::workload::non_negative_number())
      ->capture_default_str();
  sub.add_option("--mx-scale-rule", a->mx_scale_rule,
                 "mxfp8/mxfp4 block scale rule: default (te for mxfp8, ocp for mxfp4), te (Transformer Engine: "
                 "E8M0 of amax * fl(1/fmax) rounded up, never clips; alias round-up) or ocp (floor(log2 amax) - emax)")
      ->check(nibble::cli::mx_scale_rule_check())
      ->capture_default_str();
  return [a] { return run_quantize(*a); };
}

const bool registered = nibble::cli::register_command(
    {"quantize", "quantize a .npy tensor with a recipe and write it back dequantized (float32)", setup_quantize});

}  // namespace
