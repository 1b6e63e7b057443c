// CUDA bindings of the mxfp4 recipe's quantizers (built when NIBBLE_HAVE_CUDA): thin wrappers over
// nibble::cuda::quantize_mxfp4 and quantize_mxfp4_rowcol (include/nibble/kernels/quantize_fp4.hpp).
// Together with reencode_mxfp4_e4m3_cuda, decode_mxfp4_bf16_cuda and gemm_cuda (bind_cuda.cpp) they
// are what python/nibble/backends/mxfp4.py strings into the autograd of nibble.torch.Linear(recipe="mxfp4").
//
// Same conventions as bind_cuda.cpp: arrays through DLPack, outputs allocated by the caller, every
// argument checked (dtype, shape, contiguity, alignment; the device last), the GIL released, the call
// asynchronous on `stream`, the kernel path returned. x is float32 or bfloat16 [rows, cols]; a copy is
// MXFP4 planes: codes [r, c/2] (uint8, two E2M1 per byte, low nibble = even column) and E8M0 scales
// [r, c/32] (uint8), with [r, c] = [rows, cols] for the row-wise copy and [cols, rows] (x^T) for the
// column-wise one. Stochastic rounding uses the CPU reference's key (seed, quant::kStreamMx), so with
// the same seed the planes equal quant::quantize(x, "mxfp4", rounding) bit for bit.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <utility>

#include "cuda_args.hpp"
#include "nibble/kernels/quantize_fp4.hpp"
#include "nibble/quant/recipe.hpp"

namespace nibble::python {

namespace {
namespace nc = nibble::cuda;

// x [rows, cols], float32 or bfloat16, dense; cols a multiple of 32 (whole 1x32 blocks), and rows too
// when a column-wise copy (blocks along rows) is asked for.
std::pair<int64_t, int64_t> dense_input(const char* fn, const Array& x, bool colwise) {
  const ArgCheck c(fn, "x", x);
  c.dtype({Elem::f32, Elem::bf16}).ndim(2);
  if (c.dim(0) < 1 || c.dim(1) < 32 || c.dim(1) % 32 != 0) {
    c.fail("has shape " + shape_name(x) + "; rows must be >= 1 and cols a positive multiple of 32 (whole 1x32 "
           "MXFP4 blocks)");
  }
  if (colwise && c.dim(0) % 32 != 0) {
    c.fail("has " + std::to_string(c.dim(0)) + " rows; the colwise copy (blocks along rows) needs a multiple of 32");
  }
  c.dense();
  return {c.dim(0), c.dim(1)};
}

nc::Fp4DenseType dense_type(const Array& x) {
  return is_elem(x.dtype(), Elem::f32) ? nc::Fp4DenseType::fp32 : nc::Fp4DenseType::bf16;
}

// Codes [rows, cols/2] and E8M0 scales [rows, cols/32] of one MXFP4 tensor [rows, cols].
void check_planes(const char* fn, const char* codes_name, const Array& codes, const char* scales_name,
                  const Array& scales, int64_t rows, int64_t cols) {
  ArgCheck(fn, codes_name, codes).dtype({Elem::u8}).shape({rows, cols / 2}).dense();
  ArgCheck(fn, scales_name, scales).dtype({Elem::u8}).shape({rows, cols / 32}).dense(1);
}

quant::SrKey rounding_key(bool stochastic, uint64_t seed) { return quant::SrKey{stochastic, seed, quant::kStreamMx}; }

std::string quantize(const Array& x, const Array& codes, const Array& scales, const std::string& scale_rule,
                     bool stochastic, uint64_t seed, uintptr_t stream) {
  constexpr const char* fn = "quantize_mxfp4_cuda";
  const quant::MxScaleRule rule = parse_mx_rule(fn, scale_rule, quant::ElementFormat::e2m1);
  const auto [rows, cols] = dense_input(fn, x, false);
  check_planes(fn, "codes", codes, "scales", scales, rows, cols);
  on_cuda(fn, {{"x", &x}, {"codes", &codes}, {"scales", &scales}});
  const nc::Mxfp4Planes out{bytes(codes), bytes(scales), nullptr};
  nb::gil_scoped_release release;
  return nc::quantize_mxfp4(x.data(), dense_type(x), rows, cols, rule, rounding_key(stochastic, seed), out,
                            as_stream(stream));
}

std::string quantize_rowcol(const Array& x, const OptArray& rowwise_codes, const OptArray& rowwise_scales,
                            const OptArray& colwise_codes, const OptArray& colwise_scales,
                            const std::string& scale_rule, bool stochastic, uint64_t seed, uintptr_t stream) {
  constexpr const char* fn = "quantize_mxfp4_rowcol_cuda";
  const quant::MxScaleRule rule = parse_mx_rule(fn, scale_rule, quant::ElementFormat::e2m1);
  check_copy_request(fn, rowwise_codes, rowwise_scales, colwise_codes, colwise_scales);
  // The row+column tile needs rows % 32 == 0 even for a row-wise copy alone (quantize_fp4.hpp).
  const auto [rows, cols] = dense_input(fn, x, true);
  if (rowwise_codes) check_planes(fn, "rowwise_codes", *rowwise_codes, "rowwise_scales", *rowwise_scales, rows, cols);
  if (colwise_codes) check_planes(fn, "colwise_codes", *colwise_codes, "colwise_scales", *colwise_scales, cols, rows);
  on_cuda(fn, {{"x", &x}}, {{"rowwise_codes", &rowwise_codes}, {"rowwise_scales", &rowwise_scales},
                            {"colwise_codes", &colwise_codes}, {"colwise_scales", &colwise_scales}});
  const nc::Mxfp4Planes row{bytes(rowwise_codes), bytes(rowwise_scales), nullptr};
  const nc::Mxfp4Planes col{bytes(colwise_codes), bytes(colwise_scales), nullptr};
  nb::gil_scoped_release release;
  return nc::quantize_mxfp4_rowcol(x.data(), dense_type(x), rows, cols, rule, rounding_key(stochastic, seed), row, col,
                                   as_stream(stream));
}
}  // namespace

void bind_cuda_fp4(nb::module_& m) {
  using namespace nb::literals;
  const uint64_t default_seed = quant::QuantOptions{}.seed;  // the CPU reference's default
  m.def("quantize_mxfp4_cuda", &quantize, "x"_a, "codes"_a, "scales"_a, nb::kw_only(), "scale_rule"_a = "ocp",
        "stochastic"_a = false, "seed"_a = default_seed, "stream"_a = 0,
        "MXFP4 quantizer (quantize_fp4.hpp): x [rows, cols] (float32 or bfloat16, cols % 32 == 0) -> codes "
        "[rows, cols/2] (uint8, two E2M1 per byte) and E8M0 scales [rows, cols/32] (uint8), 1x32 blocks along "
        "cols; scale_rule ocp (default) | te (alias round-up); nearest or stochastic rounding. Equals the CPU reference's "
        "quantize(x, 'mxfp4', rounding, seed=seed, mx_scale_rule=scale_rule). Returns the kernel path.");
  m.def("quantize_mxfp4_rowcol_cuda", &quantize_rowcol, "x"_a, "rowwise_codes"_a = nb::none(),
        "rowwise_scales"_a = nb::none(), "colwise_codes"_a = nb::none(), "colwise_scales"_a = nb::none(),
        nb::kw_only(), "scale_rule"_a = "ocp", "stochastic"_a = false, "seed"_a = default_seed, "stream"_a = 0,
        "MXFP4 quantizer of x [rows, cols] (rows and cols multiples of 32) into the row-wise copy (planes of x) "
        "and/or the column-wise copy (planes of x^T [cols, rows]) from one read (a 64x128 shared-memory tile). "
        "Each copy equals quantize_mxfp4_cuda of x or of x^T. Returns the kernel path.");
}

}  // namespace nibble::python
