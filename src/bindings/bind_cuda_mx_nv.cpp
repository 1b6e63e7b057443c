// CUDA bindings of the two recipes Hopper can only emulate (built when NIBBLE_HAVE_CUDA): thin wrappers
// over nibble::cuda's MXFP8 quantizer and decode (include/nibble/kernels/quantize_fp8.hpp) and NVFP4
// quantizer and decode (include/nibble/kernels/quantize_nvfp4.hpp). docs/spec.md §4: no MXFP8 / NVFP4 GEMM before
// sm_100 and no exact FP8 re-encoding, so the exact emulation decodes both to BF16 (exact) for a BF16
// gemm_cuda (bind_cuda.cpp); python/nibble/backends/decoded.py strings them into nibble.torch.Linear.
//
// Same conventions as bind_cuda.cpp: arrays through DLPack, outputs allocated by the caller, every
// argument checked (dtype, shape, contiguity, alignment; the device last), the GIL released, the call
// asynchronous on `stream`, the kernel path returned. A copy of x [rows, cols] is row-wise (blocks along
// cols, the planes of x) or column-wise (blocks along rows: the planes of x^T [cols, rows]); None skips it.
//  mxfp8: x BF16; codes uint8 [r, c] (E4M3), E8M0 scales uint8 [r, c/32] (the row-major grid).
//  nvfp4: x float32 or BF16; codes uint8 [r, c/2] (two E2M1 per byte, low nibble = even column), UE4M3
//         scales uint8 [r/block_rows, c/16], global decode scale float32 [1] (each copy its own).
// Stochastic rounding uses the CPU reference's keys (seed, quant::kStreamMx / kStreamNvfp4; index of the
// copy being written), so with the same seed each copy equals quant::quantize of x (or x^T) bit for bit.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_args.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/quantize_nvfp4.hpp"
#include "nibble/quant/recipe.hpp"

namespace nibble::python {

namespace {
namespace nc = nibble::cuda;

// ---- mxfp8 --------------------------------------------------------------------------------------

// [rows, cols] with both multiples of 32: the kernel's 32x1 column blocks need whole row groups even for
// a row-wise copy alone (quantize_fp8.hpp).
void mx_shape(const ArgCheck& c, const Array& a, const char* what) {
  if (c.dim(0) < 32 || c.dim(0) % 32 != 0 || c.dim(1) < 32 || c.dim(1) % 32 != 0) {
    c.fail("has shape " + shape_name(a) + "; rows and cols must be positive multiples of 32 (" + what + ")");
  }
}

void check_mx_planes(const char* fn, const char* codes_name, const Array& codes, const char* scales_name,
                     const Array& scales, int64_t rows, int64_t cols) {
  ArgCheck(fn, codes_name, codes).dtype({Elem::u8}).shape({rows, cols}).dense();
  ArgCheck(fn, scales_name, scales).dtype({Elem::u8}).shape({rows, cols / 32}).dense(1);
}

std::string quantize_mxfp8(const Array& x, const OptArray& rowwise_codes, const OptArray& rowwise_scales,
                           const OptArray& colwise_codes, const OptArray& colwise_scales, const std::string& scale_rule,
                           bool stochastic, uint64_t seed, uintptr_t stream) {
  constexpr const char* fn = "quantize_mxfp8_cuda";
  const quant::MxScaleRule rule = parse_mx_rule(fn, scale_rule, quant::ElementFormat::e4m3);
  check_copy_request(fn, rowwise_codes, rowwise_scales, colwise_codes, colwise_scales);
  const ArgCheck c(fn, "x", x);
  c.dtype({Elem::bf16}).ndim(2);
  mx_shape(c, x, "1x32 blocks along cols, 32x1 blocks along rows");
  c.dense();
  const int64_t rows = c.dim(0), cols = c.dim(1);
  if (rowwise_codes) {
    check_mx_planes(fn, "rowwise_codes", *rowwise_codes, "rowwise_scales", *rowwise_scales, rows, cols);
  }
  if (colwise_codes) {
    check_mx_planes(fn, "colwise_codes", *colwise_codes, "colwise_scales", *colwise_scales, cols, rows);
  }
  on_cuda(fn, {{"x", &x}}, {{"rowwise_codes", &rowwise_codes}, {"rowwise_scales", &rowwise_scales},
                            {"colwise_codes", &colwise_codes}, {"colwise_scales", &colwise_scales}});
  const nc::Fp8Copies out{bytes(rowwise_codes), bytes(colwise_codes)};
  const quant::SrKey sr{stochastic, seed, quant::kStreamMx};
  nb::gil_scoped_release release;
  return nc::quantize_mxfp8(static_cast<const uint16_t*>(x.data()), rows, cols, rule, out, bytes(rowwise_scales),
                            bytes(colwise_scales), nc::MxScaleLayout::grid, sr, as_stream(stream));
}

std::string decode_mxfp8(const Array& codes, const Array& scales, const Array& out, bool transpose_out,
                         uintptr_t stream) {
  constexpr const char* fn = "decode_mxfp8_bf16_cuda";
  const ArgCheck c(fn, "codes", codes);
  c.dtype({Elem::u8}).ndim(2);
  mx_shape(c, codes, "whole 1x32 blocks; the decode kernels' tiles");
  const int64_t rows = c.dim(0), cols = c.dim(1);
  check_mx_planes(fn, "codes", codes, "scales", scales, rows, cols);
  ArgCheck(fn, "out", out).dtype({Elem::bf16}).shape(transpose_out ? std::vector<int64_t>{cols, rows}
                                                                   : std::vector<int64_t>{rows, cols}).dense();
  on_cuda(fn, {{"codes", &codes}, {"scales", &scales}, {"out", &out}});
  nb::gil_scoped_release release;
  return nc::decode_mxfp8_bf16(bytes(codes), bytes(scales), rows, cols, static_cast<uint16_t*>(out.data()),
                               transpose_out, nc::MxScaleLayout::grid, as_stream(stream));
}

// ---- nvfp4 --------------------------------------------------------------------------------------

void check_block_rows(const char* fn, int64_t block_rows) {
  if (block_rows != 1 && block_rows != 16) {
    throw std::invalid_argument(std::string(fn) + ": block_rows " + std::to_string(block_rows) +
                                " is not supported; use 1 (activations, gradients: 1x16) or 16 (weights: 16x16)");
  }
}

// Codes [rows, cols/2] and UE4M3 scales [rows/block_rows, cols/16] of one NVFP4 tensor [rows, cols].
void check_nv_planes(const char* fn, const char* codes_name, const Array& codes, const char* scales_name,
                     const Array& scales, int64_t rows, int64_t cols, int64_t block_rows) {
  ArgCheck(fn, codes_name, codes).dtype({Elem::u8}).shape({rows, cols / 2}).dense(8);
  ArgCheck(fn, scales_name, scales).dtype({Elem::u8}).shape({rows / block_rows, cols / 16}).dense(1);
}

std::string quantize_nvfp4(const Array& x, const OptArray& rowwise_codes, const OptArray& rowwise_scales,
                           const OptArray& rowwise_global, const OptArray& colwise_codes,
                           const OptArray& colwise_scales, const OptArray& colwise_global, int64_t block_rows,
                           bool stochastic, uint64_t seed, std::optional<uint64_t> colwise_seed, bool rowwise_rht,
                           bool colwise_rht, uintptr_t stream) {
  constexpr const char* fn = "quantize_nvfp4_cuda";
  check_block_rows(fn, block_rows);
  for (const auto& [codes, scales, global] : {std::tuple{&rowwise_codes, &rowwise_scales, &rowwise_global},
                                              std::tuple{&colwise_codes, &colwise_scales, &colwise_global}}) {
    if (codes->has_value() != scales->has_value() || codes->has_value() != global->has_value()) {
      throw std::invalid_argument(std::string(fn) + ": pass codes, scales and global_scale of a copy together (or "
                                  "none of them)");
    }
  }
  check_copy_request(fn, rowwise_codes, rowwise_scales, colwise_codes, colwise_scales);  // at least one copy
  const ArgCheck c(fn, "x", x);
  c.dtype({Elem::f32, Elem::bf16}).ndim(2);
  if (c.dim(0) < 1 || c.dim(1) < 16 || c.dim(1) % 16 != 0) {
    c.fail("has shape " + shape_name(x) + "; rows must be >= 1 and cols a positive multiple of 16 (whole 1x16 NVFP4 "
           "blocks)");
  }
  if ((block_rows == 16 || colwise_codes) && c.dim(0) % 16 != 0) {
    c.fail("has " + std::to_string(c.dim(0)) + " rows; " +
           (block_rows == 16 ? "16x16 weight blocks need" : "the colwise copy (blocks along rows) needs") +
           " a multiple of 16");
  }
  c.dense();
  const int64_t rows = c.dim(0), cols = c.dim(1);
  if (rowwise_codes) {
    check_nv_planes(fn, "rowwise_codes", *rowwise_codes, "rowwise_scales", *rowwise_scales, rows, cols, block_rows);
    ArgCheck(fn, "rowwise_global_scale", *rowwise_global).dtype({Elem::f32}).shape({1}).dense(4);
  }
  if (colwise_codes) {
    check_nv_planes(fn, "colwise_codes", *colwise_codes, "colwise_scales", *colwise_scales, cols, rows, block_rows);
    ArgCheck(fn, "colwise_global_scale", *colwise_global).dtype({Elem::f32}).shape({1}).dense(4);
  }
  if (rowwise_codes && colwise_codes && rowwise_global->data() == colwise_global->data()) {
    throw std::invalid_argument(std::string(fn) + ": rowwise_global_scale and colwise_global_scale are the same "
                                "float; each copy has its own global scale, pass two");
  }
  on_cuda(fn, {{"x", &x}}, {{"rowwise_codes", &rowwise_codes}, {"rowwise_scales", &rowwise_scales},
                            {"rowwise_global_scale", &rowwise_global}, {"colwise_codes", &colwise_codes},
                            {"colwise_scales", &colwise_scales}, {"colwise_global_scale", &colwise_global}});
  nc::Nvfp4Options o;
  o.block_rows = block_rows;
  o.rounding = quant::SrKey{stochastic, seed, quant::kStreamNvfp4};
  o.colwise_seed = colwise_seed;
  o.rowwise_rht = rowwise_rht;
  o.colwise_rht = colwise_rht;
  const nc::Nvfp4Planes row{bytes(rowwise_codes), bytes(rowwise_scales), floats(rowwise_global)};
  const nc::Nvfp4Planes col{bytes(colwise_codes), bytes(colwise_scales), floats(colwise_global)};
  const auto type = is_elem(x.dtype(), Elem::f32) ? nc::Fp4DenseType::fp32 : nc::Fp4DenseType::bf16;
  nb::gil_scoped_release release;
  return nc::quantize_nvfp4(x.data(), type, rows, cols, o, row, col, as_stream(stream));
}

std::string decode_nvfp4(const Array& codes, const Array& scales, const Array& out, int64_t block_rows,
                         uintptr_t stream) {
  constexpr const char* fn = "decode_nvfp4_bf16_cuda";
  check_block_rows(fn, block_rows);
  const ArgCheck c(fn, "codes", codes);
  c.dtype({Elem::u8}).ndim(2);
  const int64_t rows = c.dim(0), cols = 2 * c.dim(1);
  if (rows < 1 || rows % block_rows != 0 || cols < 16 || cols % 16 != 0) {
    c.fail("has shape " + shape_name(codes) + " (an NVFP4 tensor [" + std::to_string(rows) + ", " +
           std::to_string(cols) + "]); cols must be a positive multiple of 16 and rows of block_rows " +
           std::to_string(block_rows));
  }
  check_nv_planes(fn, "codes", codes, "scales", scales, rows, cols, block_rows);
  ArgCheck(fn, "out", out).dtype({Elem::bf16}).shape({rows, cols}).dense();
  on_cuda(fn, {{"codes", &codes}, {"scales", &scales}, {"out", &out}});
  nb::gil_scoped_release release;
  return nc::decode_nvfp4_bf16({bytes(codes), bytes(scales)}, rows, cols, block_rows,
                               static_cast<uint16_t*>(out.data()), as_stream(stream));
}
}  // namespace

void bind_cuda_mx_nv(nb::module_& m) {
  using namespace nb::literals;
  const uint64_t default_seed = quant::QuantOptions{}.seed;  // the CPU reference's default
  m.def("quantize_mxfp8_cuda", &quantize_mxfp8, "x"_a, "rowwise_codes"_a = nb::none(), "rowwise_scales"_a = nb::none(),
        "colwise_codes"_a = nb::none(), "colwise_scales"_a = nb::none(), nb::kw_only(), "scale_rule"_a = "default",
        "stochastic"_a = false, "seed"_a = default_seed, "stream"_a = 0,
        "MXFP8 quantizer (quantize_fp8.hpp) of x [rows, cols] (bfloat16, rows and cols multiples of 32) into the "
        "row-wise copy (E4M3 codes [rows, cols], E8M0 scales [rows, cols/32]) and/or the column-wise copy (the planes "
        "of x^T [cols, rows]) from one read; scale_rule default (te) | te | ocp. Each copy equals the CPU reference's "
        "quantize(x or x^T, 'mxfp8', rounding, seed=seed, mx_scale_rule=scale_rule). Returns the kernel path.");
  m.def("decode_mxfp8_bf16_cuda", &decode_mxfp8, "codes"_a, "scales"_a, "out"_a, nb::kw_only(),
        "transpose_out"_a = false, "stream"_a = 0,
        "Exact MXFP8 -> BF16 decode of codes [rows, cols] with E8M0 scales [rows, cols/32] into out (bfloat16 "
        "[rows, cols], or [cols, rows] with transpose_out). Exact unless a product leaves BF16's normal range "
        "(block scales below 2^-112). Returns the kernel path.");
  m.def("quantize_nvfp4_cuda", &quantize_nvfp4, "x"_a, "rowwise_codes"_a = nb::none(), "rowwise_scales"_a = nb::none(),
        "rowwise_global_scale"_a = nb::none(), "colwise_codes"_a = nb::none(), "colwise_scales"_a = nb::none(),
        "colwise_global_scale"_a = nb::none(), nb::kw_only(), "block_rows"_a = 1, "stochastic"_a = false,
        "seed"_a = default_seed, "colwise_seed"_a = nb::none(), "rowwise_rht"_a = false, "colwise_rht"_a = true,
        "stream"_a = 0,
        "NVFP4 quantizer (quantize_nvfp4.hpp) of x [rows, cols] (float32 or bfloat16, cols % 16 == 0) into the "
        "row-wise copy and/or the column-wise copy (planes of x^T): E2M1 codes [r, c/2], UE4M3 scales "
        "[r/block_rows, c/16] (block_rows 1: 1x16, 16: 16x16), FP32 global decode scale [1] = amax/(6*448) of the "
        "copy (after its rotation); the 16-point fixed-sign random Hadamard on a copy with its *_rht flag; nearest "
        "or stochastic rounding. Each copy equals the CPU reference's quantize(x or x^T, 'nvfp4', role, rounding, "
        "seed=seed, nvfp4_rht=flag); colwise_seed (default: seed) rounds the column-wise copy with its own seed, so "
        "dY and dY^T with the reference's two seeds come from one launch. Returns the kernel path.");
  m.def("decode_nvfp4_bf16_cuda", &decode_nvfp4, "codes"_a, "scales"_a, "out"_a, nb::kw_only(), "block_rows"_a = 1,
        "stream"_a = 0,
        "Exact NVFP4 -> BF16 decode: out [rows, cols] = E2M1 code * UE4M3 block scale, WITHOUT the FP32 global "
        "scale (not exact in BF16: the GEMM's output takes s_a * s_b). Returns the kernel path.");
}

}  // namespace nibble::python
