// CUDA bindings of the FP8 recipes (built when NIBBLE_HAVE_CUDA): thin wrappers over nibble::cuda's
// per-tensor quantizers (fp8-current, fp8-delayed with its amax history) and fp8-block quantizers
// (include/nibble/kernels/quantize_fp8.hpp). Together with gemm_cuda (bind_cuda.cpp) they are what
// python/nibble/backends/fp8.py strings into the autograd of nibble.torch.Linear for those recipes.
//
// Same conventions as bind_cuda.cpp: arrays through DLPack, outputs allocated by the caller, every
// argument checked (dtype, shape, contiguity, alignment; the device last), the GIL released, the call
// asynchronous on `stream`, the kernel path returned. The kernels read BF16 only (x: torch.bfloat16
// or its uint16 bits); FP8 copies are uint8 codes: row-wise [rows, cols] and column-wise [cols, rows]
// (the transpose, what Hopper's TN-only FP8 GEMM needs for dgrad and wgrad); None skips a copy.
// Rounding is round-to-nearest-even, as the reference's fp8 recipes (rounding by-recipe).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "cuda_args.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace nibble::python {

namespace {
namespace nc = nibble::cuda;
namespace sl = nibble::cuda::scale_layout;

quant::ElementFormat parse_format(const char* fn, const std::string& s) {
  if (s == "e4m3") return quant::ElementFormat::e4m3;
  if (s == "e5m2") return quant::ElementFormat::e5m2;
  throw std::invalid_argument(std::string(fn) + ": format '" + s + "' is unknown; use e4m3 (X, W) or e5m2 (dY, "
                              "hybrid recipes)");
}

nc::BlockScaleLayout parse_layout(const char* fn, const std::string& s) {
  if (s == "cublaslt") return nc::BlockScaleLayout::cublaslt;
  if (s == "grid") return nc::BlockScaleLayout::grid;
  throw std::invalid_argument(std::string(fn) + ": layout '" + s + "' is unknown; use cublaslt (what the GEMM "
                              "reads) or grid (row-major block grid, as the CPU reference stores it)");
}

enum class Block { b1x128, b128x128 };

Block parse_block(const char* fn, const std::string& s) {
  if (s == "1x128") return Block::b1x128;
  if (s == "128x128") return Block::b128x128;
  throw std::invalid_argument(std::string(fn) + ": block '" + s + "' is unknown; use 1x128 (X, dY) or 128x128 (W)");
}

// FP32 scales of one copy of an fp8-block quantization of x [rows, cols]: the row-wise copy is the
// operand [rows, cols], the column-wise copy the operand [cols, rows] (quantize_fp8.hpp).
int64_t block_scale_count(Block b, int64_t rows, int64_t cols, bool colwise, nc::BlockScaleLayout layout) {
  const int64_t r = colwise ? cols : rows, k = colwise ? rows : cols;  // the operand this copy is
  if (layout == nc::BlockScaleLayout::cublaslt) {
    return b == Block::b1x128 ? sl::vec128_count(r, k) : sl::blk128_count(r, k);
  }
  return b == Block::b1x128 ? r * sl::ceil_div(k, sl::kBlock) : sl::ceil_div(r, sl::kBlock) * sl::ceil_div(k, sl::kBlock);
}

// x [rows, cols] BF16, rows and cols multiples of 16 (the 128x128-tile kernels' 16-byte stores).
std::pair<int64_t, int64_t> bf16_matrix(const char* fn, const Array& x) {
  const ArgCheck c(fn, "x", x);
  c.dtype({Elem::bf16}).ndim(2);
  if (c.dim(0) < 16 || c.dim(0) % 16 != 0 || c.dim(1) < 16 || c.dim(1) % 16 != 0) {
    c.fail("has shape " + shape_name(x) + "; rows and cols must be positive multiples of 16 (the FP8 kernels' "
           "16-byte stores of both copies)");
  }
  c.dense();
  return {c.dim(0), c.dim(1)};
}

void check_copies(const char* fn, const OptArray& rowwise, const OptArray& colwise, int64_t rows, int64_t cols,
                  bool need_one = true) {
  if (need_one && !rowwise && !colwise) {
    throw std::invalid_argument(std::string(fn) + ": rowwise and colwise are both None; ask for at least one copy");
  }
  if (rowwise) ArgCheck(fn, "rowwise", *rowwise).dtype({Elem::u8}).shape({rows, cols}).dense();
  if (colwise) ArgCheck(fn, "colwise", *colwise).dtype({Elem::u8}).shape({cols, rows}).dense();
}

// One device float (amax, s_enc or s_dec) in its own 16-byte slot: cuBLASLt reads s_dec as the
// operand's per-tensor scale and refuses scale pointers that are not 16-byte aligned.
void check_scalar(const char* fn, const char* name, const Array& a, int64_t align = 16) {
  ArgCheck(fn, name, a).dtype({Elem::f32}).shape({1}).dense(align);
}

nc::Fp8Copies copies(const OptArray& rowwise, const OptArray& colwise) { return {bytes(rowwise), bytes(colwise)}; }

int history_window(const char* fn, const Array& h) {
  const ArgCheck c(fn, "amax_history", h);
  c.dtype({Elem::f32}).ndim(1).dense(4);
  if (c.dim(0) < 1 || c.dim(0) > (int64_t{1} << 30)) c.fail("has shape " + shape_name(h) + "; expected [window >= 1]");
  return static_cast<int>(c.dim(0));
}

std::string amax(const Array& x, const Array& amax_out, uintptr_t stream) {
  constexpr const char* fn = "amax_bf16_cuda";
  ArgCheck(fn, "x", x).dtype({Elem::bf16});
  ArgCheck(fn, "x", x).dense();
  const int64_t n = static_cast<int64_t>(x.size());
  if (n < 8 || n % 8 != 0) ArgCheck(fn, "x", x).fail("has " + std::to_string(n) + " elements; need a positive multiple of 8");
  check_scalar(fn, "amax", amax_out, 4);
  on_cuda(fn, {{"x", &x}, {"amax", &amax_out}});
  nb::gil_scoped_release release;
  return nc::amax_bf16(static_cast<const uint16_t*>(x.data()), n, floats(amax_out), as_stream(stream));
}

std::string current(const Array& x, const OptArray& rowwise, const OptArray& colwise, const Array& amax_out,
                    const Array& scale, const Array& scale_inv, const std::string& format, bool single_launch,
                    uintptr_t stream) {
  constexpr const char* fn = "quantize_fp8_current_cuda";
  const quant::ElementFormat f = parse_format(fn, format);
  const auto [rows, cols] = bf16_matrix(fn, x);
  check_copies(fn, rowwise, colwise, rows, cols);
  check_scalar(fn, "amax", amax_out);
  check_scalar(fn, "scale", scale);
  check_scalar(fn, "scale_inv", scale_inv);
  on_cuda(fn, {{"x", &x}, {"amax", &amax_out}, {"scale", &scale}, {"scale_inv", &scale_inv}},
          {{"rowwise", &rowwise}, {"colwise", &colwise}});
  const nc::Fp8TensorScale s{floats(amax_out), floats(scale), floats(scale_inv)};
  const auto path = single_launch ? nc::Fp8CurrentPath::single_launch : nc::Fp8CurrentPath::two_launch;
  nb::gil_scoped_release release;
  return nc::quantize_fp8_current(static_cast<const uint16_t*>(x.data()), rows, cols, f, s, copies(rowwise, colwise),
                                  path, {}, as_stream(stream));
}

std::string cast_transpose(const Array& x, const Array& scale, const OptArray& rowwise, const OptArray& colwise,
                           const OptArray& amax_record, const std::string& format, uintptr_t stream) {
  constexpr const char* fn = "cast_transpose_fp8_cuda";
  const quant::ElementFormat f = parse_format(fn, format);
  const auto [rows, cols] = bf16_matrix(fn, x);
  check_copies(fn, rowwise, colwise, rows, cols, !amax_record);
  check_scalar(fn, "scale", scale, 4);
  if (amax_record) check_scalar(fn, "amax_record", *amax_record, 4);
  on_cuda(fn, {{"x", &x}, {"scale", &scale}}, {{"rowwise", &rowwise}, {"colwise", &colwise}, {"amax_record", &amax_record}});
  nb::gil_scoped_release release;
  return nc::cast_transpose_fp8(static_cast<const uint16_t*>(x.data()), rows, cols, f, floats(scale),
                                copies(rowwise, colwise), floats(amax_record), {}, as_stream(stream));
}

std::string delayed(const Array& x, const Array& history, const Array& scale, const Array& scale_inv,
                    const OptArray& rowwise, const OptArray& colwise, int64_t step, const std::string& format,
                    uintptr_t stream) {
  constexpr const char* fn = "quantize_fp8_delayed_cuda";
  const quant::ElementFormat f = parse_format(fn, format);
  const auto [rows, cols] = bf16_matrix(fn, x);
  check_copies(fn, rowwise, colwise, rows, cols, false);
  const int window = history_window(fn, history);
  check_scalar(fn, "scale", scale, 4);
  check_scalar(fn, "scale_inv", scale_inv);
  if (step < 0) throw std::invalid_argument(std::string(fn) + ": step must be >= 0 (the amax lands in slot step % window)");
  on_cuda(fn, {{"x", &x}, {"amax_history", &history}, {"scale", &scale}, {"scale_inv", &scale_inv}},
          {{"rowwise", &rowwise}, {"colwise", &colwise}});
  const nc::Fp8DelayedState state{floats(history), window, floats(scale), floats(scale_inv)};
  nb::gil_scoped_release release;
  return nc::quantize_fp8_delayed(static_cast<const uint16_t*>(x.data()), rows, cols, f, state, step,
                                  copies(rowwise, colwise), {}, as_stream(stream));
}

std::string update_delayed(const Array& history, const Array& scale, const Array& scale_inv, int64_t step,
                           const std::string& format, int margin, uintptr_t stream) {
  constexpr const char* fn = "update_fp8_delayed_scale_cuda";
  const quant::ElementFormat f = parse_format(fn, format);
  const int window = history_window(fn, history);
  check_scalar(fn, "scale", scale, 4);
  check_scalar(fn, "scale_inv", scale_inv);
  on_cuda(fn, {{"amax_history", &history}, {"scale", &scale}, {"scale_inv", &scale_inv}});
  const nc::Fp8DelayedState state{floats(history), window, floats(scale), floats(scale_inv)};
  nb::gil_scoped_release release;
  return nc::update_fp8_delayed_scale(state, step, f, margin, as_stream(stream));
}

std::string block(Block b, const Array& x, const OptArray& rowwise, const OptArray& colwise,
                  const OptArray& scale_inv_rowwise, const OptArray& scale_inv_colwise, const std::string& layout,
                  uintptr_t stream) {
  const char* fn = b == Block::b1x128 ? "quantize_fp8_block_1x128_cuda" : "quantize_fp8_block_128x128_cuda";
  const nc::BlockScaleLayout l = parse_layout(fn, layout);
  const auto [rows, cols] = bf16_matrix(fn, x);
  check_copies(fn, rowwise, colwise, rows, cols);
  for (const auto& [copy, scales, name, col] : {std::tuple{&rowwise, &scale_inv_rowwise, "scale_inv_rowwise", false},
                                                std::tuple{&colwise, &scale_inv_colwise, "scale_inv_colwise", true}}) {
    if (copy->has_value() != scales->has_value()) {
      throw std::invalid_argument(std::string(fn) + ": pass " + name + " exactly when its copy is requested");
    }
    if (*scales) {
      ArgCheck(fn, name, **scales).dtype({Elem::f32}).shape({block_scale_count(b, rows, cols, col, l)}).dense();
    }
  }
  on_cuda(fn, {{"x", &x}}, {{"rowwise", &rowwise}, {"colwise", &colwise}, {"scale_inv_rowwise", &scale_inv_rowwise},
                            {"scale_inv_colwise", &scale_inv_colwise}});
  const auto* xp = static_cast<const uint16_t*>(x.data());
  nb::gil_scoped_release release;
  if (b == Block::b1x128) {
    return nc::quantize_fp8_block_1x128(xp, rows, cols, copies(rowwise, colwise), floats(scale_inv_rowwise),
                                        floats(scale_inv_colwise), l, {}, as_stream(stream));
  }
  return nc::quantize_fp8_block_128x128(xp, rows, cols, copies(rowwise, colwise), floats(scale_inv_rowwise),
                                        floats(scale_inv_colwise), l, {}, as_stream(stream));
}
}  // namespace

void bind_cuda_fp8(nb::module_& m) {
  using namespace nb::literals;
  m.def("amax_bf16_cuda", &amax, "x"_a, "amax"_a, nb::kw_only(), "stream"_a = 0,
        "amax = max |x| over a dense BF16 tensor into amax (float32 [1]; NaN propagates). Returns the kernel path.");
  m.def("quantize_fp8_current_cuda", &current, "x"_a, "rowwise"_a, "colwise"_a, "amax"_a, "scale"_a, "scale_inv"_a,
        nb::kw_only(), "format"_a, "single_launch"_a = false, "stream"_a = 0,
        "fp8-current: amax of x [rows, cols] (BF16), s_enc = fmax / amax (amax 0/inf/NaN: 1), then the cast into the "
        "row-wise [rows, cols] and/or column-wise [cols, rows] uint8 copies (format e4m3 | e5m2). Writes amax, scale "
        "(s_enc) and scale_inv (s_dec, the GEMM's per-tensor scale), each float32 [1], 16-byte aligned. Two launches "
        "(single_launch: one cooperative kernel). Equals the CPU reference's quantize(x, 'fp8-current', role). "
        "Returns the kernel path.");
  m.def("cast_transpose_fp8_cuda", &cast_transpose, "x"_a, "scale"_a, "rowwise"_a = nb::none(), "colwise"_a = nb::none(),
        "amax_record"_a = nb::none(), nb::kw_only(), "format"_a, "stream"_a = 0,
        "Cast x (BF16) with the device-side s_enc in scale (float32 [1]) into the row-wise / column-wise copies; "
        "amax_record (float32 [1], optional) is max-combined with this tensor's amax. Returns the kernel path.");
  m.def("quantize_fp8_delayed_cuda", &delayed, "x"_a, "amax_history"_a, "scale"_a, "scale_inv"_a, "rowwise"_a = nb::none(),
        "colwise"_a = nb::none(), nb::kw_only(), "step"_a, "format"_a, "stream"_a = 0,
        "fp8-delayed, one pass: cast x (BF16) with s_enc = *scale (from update_fp8_delayed_scale_cuda) and max-combine "
        "its amax into amax_history[step % window] (float32 [window], that slot zeroed beforehand). Returns the "
        "kernel path.");
  m.def("update_fp8_delayed_scale_cuda", &update_delayed, "amax_history"_a, "scale"_a, "scale_inv"_a, nb::kw_only(),
        "step"_a, "format"_a, "margin"_a = 0, "stream"_a = 0,
        "fp8-delayed scale from the history: s_enc = fmax 2^-margin / max over the finite entries of amax_history "
        "(0: 1), scale_inv = 1 / s_enc; then zeroes slot (step + 1) % window. Returns the kernel path.");
  m.def("quantize_fp8_block_1x128_cuda",
        [](const Array& x, const OptArray& r, const OptArray& c, const OptArray& rs, const OptArray& cs,
           const std::string& layout, uintptr_t stream) { return block(Block::b1x128, x, r, c, rs, cs, layout, stream); },
        "x"_a, "rowwise"_a, "colwise"_a, "scale_inv_rowwise"_a, "scale_inv_colwise"_a, nb::kw_only(),
        "layout"_a = "cublaslt", "stream"_a = 0,
        "fp8-block for X and dY: E4M3 with power-of-two FP32 decode scales per 1x128 block; the row-wise copy has "
        "blocks along cols, the column-wise copy [cols, rows] blocks along rows (1x128 along the transposed tensor's "
        "inner dimension). Scales in the cuBLASLt VEC128 layout of each copy (fp8_block_scale_count). Equals the CPU "
        "reference's quantize(x, 'fp8-block', 'x') (and of x^T). Returns the kernel path.");
  m.def("quantize_fp8_block_128x128_cuda",
        [](const Array& x, const OptArray& r, const OptArray& c, const OptArray& rs, const OptArray& cs,
           const std::string& layout, uintptr_t stream) { return block(Block::b128x128, x, r, c, rs, cs, layout, stream); },
        "x"_a, "rowwise"_a, "colwise"_a, "scale_inv_rowwise"_a, "scale_inv_colwise"_a, nb::kw_only(),
        "layout"_a = "cublaslt", "stream"_a = 0,
        "fp8-block for W: E4M3 with one power-of-two FP32 decode scale per 128x128 block, shared by the row-wise "
        "and column-wise copies (BLK128x128 layout of each). Equals quantize(x, 'fp8-block', 'w'). Returns the path.");
  m.def("fp8_block_scale_count",
        [](const std::string& b, int64_t rows, int64_t cols, const std::string& copy, const std::string& layout) {
          constexpr const char* fn = "fp8_block_scale_count";
          if (copy != "rowwise" && copy != "colwise") {
            throw std::invalid_argument(std::string(fn) + ": copy '" + copy + "' is unknown; use rowwise or colwise");
          }
          if (rows < 1 || cols < 1) throw std::invalid_argument(std::string(fn) + ": rows and cols must be positive");
          return block_scale_count(parse_block(fn, b), rows, cols, copy == "colwise", parse_layout(fn, layout));
        },
        "block"_a, "rows"_a, "cols"_a, "copy"_a = "rowwise", "layout"_a = "cublaslt",
        "Number of FP32 scales (padding included) of one copy of an fp8-block quantization of x [rows, cols].");
}

}  // namespace nibble::python
