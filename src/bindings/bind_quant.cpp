// CPU reference bindings: `quantize` by recipe/role/options (SPEC 2-3), the Hadamard rotation and
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
MxScaleRule parse_mx_rule(const std::string& s) {
  if (s == "ocp") return MxScaleRule::ocp;
  if (s == "round-up" || s == "round_up") return MxScaleRule::round_up;
  throw std::invalid_argument("mx_scale_rule '" + s + "' is unknown; use ocp or round-up");
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
                     int window) {
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
    history.emplace(window, margin);
    const float* h = amax_history->data();
    for (size_t i = 0; i < amax_history->shape(0); ++i) history->record(h[i]);
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
  m.attr("quartet_gemm_rescale") = kQuartetGemmRescale;
  m.def("quantize", &quantize_py, nb::arg("x"), nb::arg("recipe"), nb::arg("role") = "x",
        nb::arg("seed") = QuantOptions{}.seed, nb::arg("rounding") = "by-recipe", nb::arg("mx_scale_rule") = "ocp",
        nb::arg("hadamard_size") = 32, nb::arg("rotate") = true, nb::arg("forward_quantizer") = "quest",
        nb::arg("nvfp4_rht") = false, nb::arg("margin") = 0, nb::arg("amax_history") = nb::none(),
        nb::arg("window") = 1024,
        "CPU reference quantization of a float32 matrix (blocks along columns). Returns a dict: values "
        "(quantized domain: rotated/prescaled as the GEMM sees them), original (decoded back to x's domain), "
        "mask (uint8 trust mask or None), prescale, tensor_scale, rotation_size, amax, produced_by.");
  m.def("hadamard", &hadamard_py, nb::arg("x"), nb::arg("size") = 32, nb::arg("signs") = "none",
        nb::arg("seed") = 0, nb::arg("inverse") = false,
        "Block-wise normalised Hadamard along columns: forward (x*s)H or inverse yH*s (signs: none|seeded|nvfp4).");
  m.def("quartet_epilogue", &epilogue_py, nb::arg("g"), nb::arg("mask"), nb::arg("size") = 32,
        nb::arg("signs") = "none", nb::arg("seed") = 0,
        "Quartet backward epilogue: inverse rotation along columns of (g * 16/9) masked by the forward trust mask.");
}

}  // namespace nibble::python
