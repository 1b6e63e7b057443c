// CPU reference bindings: `quantize` by recipe/role/options (docs/spec.md §2-3), the Hadamard rotation and
// Quartet's backward epilogue. Every result names the path that produced it ("produced_by").
#include <nanobind/stl/string.h>
#include <nanobind/stl/optional.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "array_io.hpp"
#include "nibble/quant.hpp"

namespace nibble::python {

namespace {
using namespace nibble::quant;

Rounding parse_rounding(const std::string& s) {
  if (s == "by-recipe" || s == "by_recipe") return Rounding::by_recipe;
  if (s == "nearest") return Rounding::nearest;
  if (s == "stochastic") return Rounding::stochastic;
  throw std::invalid_argument("rounding '" + s + "' is unknown; use by-recipe, nearest or stochastic");
}
// "default" (or None from Python) = the recipe's default_mx_scale_rule.
std::optional<MxScaleRule> parse_mx_rule(const std::string& s) {
  if (s == "default") return std::nullopt;
  return parse_mx_scale_rule(s);
}
DelayedFirstStep parse_first_step(const std::string& s) {
  if (s == "te") return DelayedFirstStep::te;
  if (s == "own_amax" || s == "own-amax") return DelayedFirstStep::own_amax;
  throw std::invalid_argument("first_step '" + s + "' is unknown; use te (scale 1, Transformer Engine) or own_amax");
}
ForwardQuantizer parse_forward(const std::string& s) {
  if (s == "quest") return ForwardQuantizer::quest;
  if (s == "absmax") return ForwardQuantizer::absmax;
  throw std::invalid_argument("forward_quantizer '" + s + "' is unknown; use quest or absmax");
}
Rotation parse_rotation(int size, const std::string& signs, uint64_t seed) {
  if (!valid_hadamard_size(size)) {
    throw std::invalid_argument("hadamard size " + std::to_string(size) + " is not supported; use 16, 32, 64 or 128");
  }
  if (signs == "none") return Rotation{size, SignKind::none, 0};
  if (signs == "seeded") return Rotation{size, SignKind::seeded, seed};
  if (signs == "nvfp4") return Rotation{size, SignKind::nvfp4_fixed, 0};
  throw std::invalid_argument("signs '" + signs + "' is unknown; use none, seeded or nvfp4");
}
std::vector<float> copy_matrix(const HostMatrix& x) {
  return std::vector<float>(x.data(), x.data() + x.shape(0) * x.shape(1));
}

nb::dict quantize_py(const HostMatrix& x, const std::string& recipe, const std::string& role, uint64_t seed,
                     const std::string& rounding, const std::string& mx_scale_rule, int hadamard_size, bool rotate,
                     const std::string& forward_quantizer, bool nvfp4_rht, int margin,
                     std::optional<nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>> amax_history,
                     int window, const std::string& first_step) {
  const int64_t rows = static_cast<int64_t>(x.shape(0)), cols = static_cast<int64_t>(x.shape(1));
  QuantOptions o;
  const Recipe r = parse_recipe(recipe);
  o.role = parse_role(role);
  o.seed = seed;
  o.rounding = parse_rounding(rounding);
  o.mx_scale_rule = parse_mx_rule(mx_scale_rule);
  o.hadamard_size = hadamard_size;
  o.rotate = rotate;
  o.forward_quantizer = parse_forward(forward_quantizer);
  o.nvfp4_rht = nvfp4_rht;
  o.margin = margin;
  // Delayed scaling: the Python module keeps the history (in its state_dict); rebuild the reference
  // ring from it, oldest first, so the scale is exactly AmaxHistory's.
  std::optional<AmaxHistory> history;
  if (amax_history) {
    if (r != Recipe::fp8_delayed) throw std::invalid_argument("amax_history is only used by recipe fp8-delayed; pass None");
    if (window < 1) throw std::invalid_argument("window must be >= 1 (steps of amax history)");
    history.emplace(window, margin, parse_first_step(first_step));
    const float fmax = element_max(o.role == Role::dy ? ElementFormat::e5m2 : ElementFormat::e4m3);
    const float* h = amax_history->data();
    for (size_t i = 0; i < amax_history->shape(0); ++i) history->record(h[i], fmax);
    o.history = &*history;
  }
  float amax;
  {
    nb::gil_scoped_release release;  // the reference is single-threaded C++; let Python threads run
    amax = amax_of(x.data(), rows * cols);
  }
  QuantizedTensor q;
  std::vector<float> values, original;
  std::vector<uint8_t> mask;
  {
    nb::gil_scoped_release release;
    q = quantize(r, x.data(), rows, cols, o);
    values = dequantize(q);
    original = dequantize_original(q);
    if (q.has_mask()) mask = unpack_mask(q);
  }
  nb::dict d;
  d["values"] = to_numpy(std::move(values), rows, cols);      // quantized domain (rotated, prescaled)
  d["original"] = to_numpy(std::move(original), rows, cols);  // back in x's domain
  if (q.has_mask()) {
    d["mask"] = nb::cast(to_numpy(std::move(mask), rows, cols));
  } else {
    d["mask"] = nb::none();
  }
  if (q.element != ElementFormat::bf16) {
    // The element codes one per byte (E2M1 unpacked: sign in bit 3) and the raw scale codes of the
    // block grid (E8M0 / UE4M3; empty for FP32 scales), so a caller can compare codes, not only values.
    std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) codes[static_cast<size_t>(r * cols + c)] = q.code_at(r, c);
    }
    d["codes"] = nb::cast(to_numpy(std::move(codes), rows, cols));
  } else {
    d["codes"] = nb::none();
  }
  std::vector<uint8_t> scale_codes = q.scale_codes;
  const int64_t n_scale_codes = static_cast<int64_t>(scale_codes.size());
  d["scale_codes"] = nb::cast(to_numpy(std::move(scale_codes), 1, n_scale_codes));
  d["prescale"] = q.prescale;
  d["tensor_scale"] = q.tensor_scale;
  d["rotation_size"] = q.rotation.size;
  d["amax"] = amax;  // what a delayed-scaling history records for this step
  d["produced_by"] = q.produced_by;
  return d;
}

nb::ndarray<nb::numpy, float, nb::ndim<2>> hadamard_py(const HostMatrix& x, int size, const std::string& signs,
                                                       uint64_t seed, bool inverse) {
  const Rotation rot = parse_rotation(size, signs, seed);
  std::vector<float> y = copy_matrix(x);
  hadamard_transform(y.data(), static_cast<int64_t>(x.shape(0)), static_cast<int64_t>(x.shape(1)), rot, inverse);
  return to_numpy(std::move(y), static_cast<int64_t>(x.shape(0)), static_cast<int64_t>(x.shape(1)));
}

nb::ndarray<nb::numpy, float, nb::ndim<2>> epilogue_py(const HostMatrix& g, const HostMask& mask, int size,
                                                       const std::string& signs, uint64_t seed) {
  const int64_t rows = static_cast<int64_t>(g.shape(0)), cols = static_cast<int64_t>(g.shape(1));
  if (mask.shape(0) != g.shape(0) || mask.shape(1) != g.shape(1)) {
    throw std::invalid_argument("quartet_epilogue: mask shape must equal g's [" + std::to_string(rows) + ", " +
                                std::to_string(cols) + "]");
  }
  // Pack as QuantizedTensor does: bit (i % 8) of byte i / 8, 1 = trusted.
  std::vector<uint8_t> packed(static_cast<size_t>((rows * cols + 7) / 8), 0);
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (mask.data()[i]) packed[static_cast<size_t>(i / 8)] |= static_cast<uint8_t>(1u << (i % 8));
  }
  std::vector<float> out = quartet_dgrad_epilogue(g.data(), rows, cols, packed, parse_rotation(size, signs, seed));
  return to_numpy(std::move(out), rows, cols);
}
}  // namespace

void bind_quant(nb::module_& m) {
  m.attr("recipes") = nb::str(recipe_name_list().c_str());
  // The recipe names in recipe_list.hpp's order: nibble.torch's list of recipes.
  nb::list recipe_names;
  for (std::string_view n : kRecipeNames) recipe_names.append(nb::str(n.data(), n.size()));
  m.attr("recipe_names") = nb::tuple(recipe_names);
  m.attr("quartet_gemm_rescale") = kQuartetGemmRescale;
  m.def("quantize", &quantize_py, nb::arg("x"), nb::arg("recipe"), nb::arg("role") = "x",
        nb::arg("seed") = QuantOptions{}.seed, nb::arg("rounding") = "by-recipe", nb::arg("mx_scale_rule") = "default",
        nb::arg("hadamard_size") = 32, nb::arg("rotate") = true, nb::arg("forward_quantizer") = "quest",
        nb::arg("nvfp4_rht") = false, nb::arg("margin") = 0, nb::arg("amax_history") = nb::none(),
        nb::arg("window") = 1024, nb::arg("first_step") = "te",
        "CPU reference quantization of a float32 matrix (blocks along columns). mx_scale_rule: default (te for "
        "mxfp8, ocp for mxfp4) | te | ocp. fp8-delayed: amax_history (oldest first; empty = first step, "
        "scale 1 with first_step te or the own amax with own_amax) or None (steady state: own amax). "
        "Returns a dict: values "
        "(quantized domain: rotated/prescaled as the GEMM sees them), original (decoded back to x's domain), "
        "mask (uint8 trust mask or None), codes (uint8 element codes, one per element, or None for bf16), "
        "scale_codes (uint8 [1, n] raw block scale codes, row-major over the block grid), prescale, tensor_scale, "
        "rotation_size, amax, produced_by.");
  m.def("hadamard", &hadamard_py, nb::arg("x"), nb::arg("size") = 32, nb::arg("signs") = "none",
        nb::arg("seed") = 0, nb::arg("inverse") = false,
        "Block-wise normalised Hadamard along columns: forward (x*s)H or inverse yH*s (signs: none|seeded|nvfp4).");
  m.def("quartet_epilogue", &epilogue_py, nb::arg("g"), nb::arg("mask"), nb::arg("size") = 32,
        nb::arg("signs") = "none", nb::arg("seed") = 0,
        "Quartet backward epilogue: inverse rotation along columns of (g * 16/9) masked by the forward trust mask.");
}

}  // namespace nibble::python
