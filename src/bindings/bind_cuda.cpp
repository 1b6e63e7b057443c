// CUDA bindings (built when NIBBLE_HAVE_CUDA): thin wrappers over nibble::cuda's Quartet kernels, the
// exact MXFP4 -> E4M3 re-encoding, the MXFP4 -> BF16 decode and the cuBLASLt GEMM, i.e. the calls
// src/recipes/quartet_layer.cu makes for one layer. python/nibble/backends/quartet.py strings them into
// the autograd of nibble.torch.Linear.
//
// Arrays come in through DLPack (torch, CuPy, JAX); outputs are allocated by the caller and passed in,
// so this module never links a framework. Every call checks each argument (cuda_args.hpp), releases
// the GIL, runs asynchronously on `stream` (a cudaStream_t as an integer, e.g. torch's
// torch.cuda.current_stream().cuda_stream; 0 = the legacy default stream) on the current CUDA device,
// and returns the path string of what ran. nibble's std::invalid_argument becomes ValueError.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "cuda_args.hpp"
#include "nibble/kernels/gemm.hpp"
#include "nibble/kernels/quantize_fp4.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/quartet_fused.hpp"
#include "nibble/kernels/reencode.hpp"

namespace nibble::python {

namespace {
namespace nc = nibble::cuda;

static_assert(sizeof(nc::ReencodeViolations) == 2 * sizeof(int), "violations are passed as an int32[2] tensor");

nc::Fp4DenseType dense_type(const Array& a) {
  return is_elem(a.dtype(), Elem::f32) ? nc::Fp4DenseType::fp32 : nc::Fp4DenseType::bf16;
}

quant::ForwardQuantizer parse_forward(const char* fn, const std::string& s) {
  if (s == "quest") return quant::ForwardQuantizer::quest;
  if (s == "absmax") return quant::ForwardQuantizer::absmax;
  throw std::invalid_argument(std::string(fn) + ": forward_quantizer '" + s + "' is unknown; use quest or absmax");
}

nc::ReencodeGranularity parse_granularity(const char* fn, const std::string& s) {
  if (s == "row") return nc::ReencodeGranularity::row;
  if (s == "group128") return nc::ReencodeGranularity::group128;
  throw std::invalid_argument(std::string(fn) + ": granularity '" + s + "' is unknown; use row or group128");
}

// A matrix [rows, cols] whose cols hold whole 1x32 MXFP4 groups.
std::pair<int64_t, int64_t> fp4_matrix(const char* fn, const char* name, const Array& a) {
  const ArgCheck c(fn, name, a);
  c.ndim(2);
  if (c.dim(1) % 32 != 0 || c.dim(0) < 1) {
    c.fail("has shape " + shape_name(a) + "; rows must be >= 1 and cols a multiple of 32 (whole 1x32 MXFP4 groups)");
  }
  return {c.dim(0), c.dim(1)};
}

// Codes [rows, cols/2] and E8M0 scales [rows, cols/32] of one MXFP4 tensor [rows, cols].
void check_planes(const char* fn, const char* codes_name, const Array& codes, const char* scales_name,
                  const Array& scales, int64_t rows, int64_t cols) {
  ArgCheck(fn, codes_name, codes).dtype({Elem::u8}).shape({rows, cols / 2}).dense();
  ArgCheck(fn, scales_name, scales).dtype({Elem::u8}).shape({rows, cols / 32}).dense(1);
}

std::string quartet_forward_e4m3(const Array& x, const Array& e4m3, const Array& row_scales, const OptArray& codes,
                                 const OptArray& scales, const OptArray& mask, const OptArray& violating_rows,
                                 int hadamard_size, bool rotate, const std::string& forward_quantizer,
                                 uintptr_t stream) {
  constexpr const char* fn = "quartet_forward_e4m3_cuda";
  ArgCheck(fn, "x", x).dtype({Elem::bf16, Elem::f32});
  const auto [rows, cols] = fp4_matrix(fn, "x", x);
  ArgCheck(fn, "x", x).dense();
  ArgCheck(fn, "e4m3", e4m3).dtype({Elem::u8}).shape({rows, cols}).dense();
  ArgCheck(fn, "row_scales", row_scales).dtype({Elem::f32}).shape({rows}).dense();
  if (codes) ArgCheck(fn, "codes", *codes).dtype({Elem::u8}).shape({rows, cols / 2}).dense();
  if (scales) ArgCheck(fn, "scales", *scales).dtype({Elem::u8}).shape({rows, cols / 32}).dense(1);
  if (mask) ArgCheck(fn, "mask", *mask).dtype({Elem::u8}).shape({rows * cols / 8}).dense(1);
  if (violating_rows) ArgCheck(fn, "violating_rows", *violating_rows).dtype({Elem::i32}).shape({1}).dense(4);
  on_cuda(fn, {{"x", &x}, {"e4m3", &e4m3}, {"row_scales", &row_scales}},
          {{"codes", &codes}, {"scales", &scales}, {"mask", &mask}, {"violating_rows", &violating_rows}});
  nc::QuartetForwardOptions o;
  o.hadamard_size = hadamard_size;
  o.rotate = rotate;
  o.quantizer = parse_forward(fn, forward_quantizer);
  const nc::Mxfp4Planes planes{bytes(codes), bytes(scales), bytes(mask)};
  const nc::Fp8RowOperand fp8{bytes(e4m3), static_cast<float*>(row_scales.data()),
                              violating_rows ? static_cast<int*>(violating_rows->data()) : nullptr};
  nb::gil_scoped_release release;
  return nc::quartet_forward_quantize_e4m3(x.data(), dense_type(x), rows, cols, o, planes, fp8, as_stream(stream));
}

std::string quartet_forward(const Array& x, const Array& codes, const Array& scales, const OptArray& mask,
                            int hadamard_size, bool rotate, const std::string& forward_quantizer, uintptr_t stream) {
  constexpr const char* fn = "quartet_forward_cuda";
  ArgCheck(fn, "x", x).dtype({Elem::bf16, Elem::f32});
  const auto [rows, cols] = fp4_matrix(fn, "x", x);
  ArgCheck(fn, "x", x).dense();
  check_planes(fn, "codes", codes, "scales", scales, rows, cols);
  if (mask) ArgCheck(fn, "mask", *mask).dtype({Elem::u8}).shape({rows * cols / 8}).dense(1);
  on_cuda(fn, {{"x", &x}, {"codes", &codes}, {"scales", &scales}}, {{"mask", &mask}});
  nc::QuartetForwardOptions o;
  o.hadamard_size = hadamard_size;
  o.rotate = rotate;
  o.quantizer = parse_forward(fn, forward_quantizer);
  nb::gil_scoped_release release;
  return nc::quartet_forward_quantize(x.data(), dense_type(x), rows, cols, o, {bytes(codes), bytes(scales), bytes(mask)},
                                      as_stream(stream));
}

nc::QuartetBackwardOptions backward_options(uint64_t seed, bool stochastic, int hadamard_size, bool rotate) {
  // The CPU reference's keys (quant::quantize with recipe quartet, role dy, seed, rounding): signs
  // from `seed`, stochastic bits from (seed, kStreamQuartetBackward), so GPU == CPU bit for bit.
  nc::QuartetBackwardOptions b;
  b.sign_seed = seed;
  b.hadamard_size = hadamard_size;
  b.rotate = rotate;
  b.rounding = quant::SrKey{stochastic, seed, quant::kStreamQuartetBackward};
  return b;
}

std::string quartet_backward(const Array& x, const OptArray& rowwise_codes, const OptArray& rowwise_scales,
                             const OptArray& colwise_codes, const OptArray& colwise_scales, uint64_t seed,
                             bool stochastic, int hadamard_size, bool rotate, uintptr_t stream) {
  constexpr const char* fn = "quartet_backward_cuda";
  ArgCheck(fn, "x", x).dtype({Elem::bf16, Elem::f32});
  const auto [rows, cols] = fp4_matrix(fn, "x", x);
  ArgCheck(fn, "x", x).dense();
  check_copy_request(fn, rowwise_codes, rowwise_scales, colwise_codes, colwise_scales);
  if (rowwise_codes) check_planes(fn, "rowwise_codes", *rowwise_codes, "rowwise_scales", *rowwise_scales, rows, cols);
  if (colwise_codes) {
    if (rows % 32 != 0) {
      ArgCheck(fn, "x", x).fail("has " + std::to_string(rows) + " rows; the colwise copy needs a multiple of 32");
    }
    check_planes(fn, "colwise_codes", *colwise_codes, "colwise_scales", *colwise_scales, cols, rows);
  }
  on_cuda(fn, {{"x", &x}}, {{"rowwise_codes", &rowwise_codes}, {"rowwise_scales", &rowwise_scales},
                            {"colwise_codes", &colwise_codes}, {"colwise_scales", &colwise_scales}});
  const auto o = backward_options(seed, stochastic, hadamard_size, rotate);
  const nc::Mxfp4Planes row{bytes(rowwise_codes), bytes(rowwise_scales), nullptr};
  const nc::Mxfp4Planes col{bytes(colwise_codes), bytes(colwise_scales), nullptr};
  nb::gil_scoped_release release;
  return nc::quartet_backward_quantize(x.data(), dense_type(x), rows, cols, o, row, col, as_stream(stream));
}

std::string quartet_backward_mxfp4_transposed(const Array& codes, const Array& scales, const Array& colwise_codes,
                                              const Array& colwise_scales, uint64_t seed, bool stochastic,
                                              int hadamard_size, bool rotate, uintptr_t stream) {
  constexpr const char* fn = "quartet_backward_mxfp4_transposed_cuda";
  ArgCheck(fn, "codes", codes).dtype({Elem::u8}).ndim(2);
  const int64_t rows = ArgCheck(fn, "codes", codes).dim(0), cols = 2 * ArgCheck(fn, "codes", codes).dim(1);
  if (rows % 32 != 0 || cols % 32 != 0 || rows < 1) {
    ArgCheck(fn, "codes", codes).fail("has shape " + shape_name(codes) + " (an MXFP4 tensor [" + std::to_string(rows) +
                                      ", " + std::to_string(cols) + "]); rows and cols must be multiples of 32");
  }
  check_planes(fn, "codes", codes, "scales", scales, rows, cols);
  check_planes(fn, "colwise_codes", colwise_codes, "colwise_scales", colwise_scales, cols, rows);
  on_cuda(fn, {{"codes", &codes}, {"scales", &scales}, {"colwise_codes", &colwise_codes},
              {"colwise_scales", &colwise_scales}});
  const auto o = backward_options(seed, stochastic, hadamard_size, rotate);
  nb::gil_scoped_release release;
  return nc::quartet_backward_quantize_mxfp4_transposed({bytes(codes), bytes(scales), nullptr}, rows, cols, o,
                                                        {bytes(colwise_codes), bytes(colwise_scales), nullptr},
                                                        as_stream(stream));
}

std::string reencode(const Array& codes, const Array& scales, const Array& e4m3, const Array& set_scales,
                     const OptArray& violations, const std::string& granularity, uintptr_t stream) {
  constexpr const char* fn = "reencode_mxfp4_e4m3_cuda";
  const nc::ReencodeGranularity g = parse_granularity(fn, granularity);
  ArgCheck(fn, "codes", codes).dtype({Elem::u8}).ndim(2);
  const int64_t rows = ArgCheck(fn, "codes", codes).dim(0), cols = 2 * ArgCheck(fn, "codes", codes).dim(1);
  if (cols % (g == nc::ReencodeGranularity::row ? 32 : 128) != 0) {
    ArgCheck(fn, "codes", codes).fail("has shape " + shape_name(codes) + " (an MXFP4 tensor with " +
                                      std::to_string(cols) + " cols); granularity " + granularity + " needs cols % " +
                                      (g == nc::ReencodeGranularity::row ? "32" : "128") + " == 0");
  }
  check_planes(fn, "codes", codes, "scales", scales, rows, cols);
  ArgCheck(fn, "e4m3", e4m3).dtype({Elem::u8}).shape({rows, cols}).dense();
  ArgCheck(fn, "set_scales", set_scales).dtype({Elem::f32}).shape({nc::reencode_scale_count(g, rows, cols)}).dense();
  if (violations) ArgCheck(fn, "violations", *violations).dtype({Elem::i32}).shape({2}).dense(4);
  on_cuda(fn, {{"codes", &codes}, {"scales", &scales}, {"e4m3", &e4m3}, {"set_scales", &set_scales}},
          {{"violations", &violations}});
  auto* counts = violations ? static_cast<nc::ReencodeViolations*>(violations->data()) : nullptr;
  nb::gil_scoped_release release;
  return nc::reencode_mxfp4_e4m3({bytes(codes), bytes(scales), nullptr}, rows, cols, g, bytes(e4m3),
                                 static_cast<float*>(set_scales.data()), counts, as_stream(stream));
}

std::string decode_bf16(const Array& codes, const Array& scales, const Array& out, uintptr_t stream) {
  constexpr const char* fn = "decode_mxfp4_bf16_cuda";
  ArgCheck(fn, "codes", codes).dtype({Elem::u8}).ndim(2);
  const int64_t rows = ArgCheck(fn, "codes", codes).dim(0), cols = 2 * ArgCheck(fn, "codes", codes).dim(1);
  if (cols % 32 != 0) ArgCheck(fn, "codes", codes).fail("has " + std::to_string(cols) + " cols of elements; need % 32");
  check_planes(fn, "codes", codes, "scales", scales, rows, cols);
  ArgCheck(fn, "out", out).dtype({Elem::bf16}).shape({rows, cols}).dense();
  on_cuda(fn, {{"codes", &codes}, {"scales", &scales}, {"out", &out}});
  nb::gil_scoped_release release;
  return nc::decode_mxfp4_bf16({bytes(codes), bytes(scales), nullptr}, rows, cols, static_cast<uint16_t*>(out.data()),
                               as_stream(stream));
}

std::string epilogue(const Array& g, const Array& mask, const Array& out, float scale, int hadamard_size, bool rotate,
                     uintptr_t stream) {
  constexpr const char* fn = "quartet_epilogue_cuda";
  ArgCheck(fn, "g", g).dtype({Elem::bf16, Elem::f32});
  const auto [rows, cols] = fp4_matrix(fn, "g", g);
  ArgCheck(fn, "g", g).dense();
  ArgCheck(fn, "mask", mask).dtype({Elem::u8}).shape({rows * cols / 8}).dense(1);
  ArgCheck(fn, "out", out).dtype({Elem::bf16, Elem::f32}).shape({rows, cols}).dense();
  on_cuda(fn, {{"g", &g}, {"mask", &mask}, {"out", &out}});
  nc::QuartetEpilogueOptions o;
  o.scale = scale;
  o.hadamard_size = hadamard_size;
  o.rotate = rotate;
  nb::gil_scoped_release release;
  return nc::quartet_epilogue(g.data(), dense_type(g), rows, cols, bytes(mask), o, out.data(), dense_type(out),
                              as_stream(stream));
}

nc::DType parse_dtype(const char* fn, const char* which, const std::string& s) {
  if (s == "e4m3") return nc::DType::e4m3;
  if (s == "e5m2") return nc::DType::e5m2;
  if (s == "bf16") return nc::DType::bf16;
  throw std::invalid_argument(std::string(fn) + ": " + which + " '" + s + "' is unknown; use e4m3, e5m2 or bf16");
}
nc::ScaleMode parse_scale_mode(const char* fn, const char* which, const std::string& s) {
  if (s == "none") return nc::ScaleMode::none;
  if (s == "per_tensor") return nc::ScaleMode::per_tensor;
  if (s == "outer_vec") return nc::ScaleMode::outer_vec;
  if (s == "vec128") return nc::ScaleMode::vec128;
  if (s == "blk128x128") return nc::ScaleMode::blk128x128;
  throw std::invalid_argument(std::string(fn) + ": " + which + " '" + s +
                              "' is unknown; use none, per_tensor, outer_vec, vec128 or blk128x128");
}
nc::Pass parse_pass(const char* fn, const std::string& s) {
  if (s == "fprop") return nc::Pass::fprop;
  if (s == "dgrad") return nc::Pass::dgrad;
  if (s == "wgrad") return nc::Pass::wgrad;
  throw std::invalid_argument(std::string(fn) + ": pass '" + s + "' is unknown; use fprop, dgrad or wgrad");
}
nc::Accumulation parse_accumulation(const char* fn, const std::string& s) {
  if (s == "split") return nc::Accumulation::split;
  if (s == "fast") return nc::Accumulation::fast;
  if (s == "default") return nc::Accumulation::default_for_pass;
  throw std::invalid_argument(std::string(fn) + ": accumulation '" + s + "' is unknown; use split, fast or default");
}
nc::ExecutionPath parse_operands(const char* fn, const std::string& s) {
  for (auto p : {nc::ExecutionPath::native, nc::ExecutionPath::emulated_exact_fp8, nc::ExecutionPath::emulated_exact_bf16,
                 nc::ExecutionPath::emulated_approximate}) {
    if (s == nc::to_string(p)) return p;
  }
  throw std::invalid_argument(std::string(fn) + ": operands '" + s + "' is unknown; use native, emulated-exact (fp8), "
                              "emulated-exact (bf16) or emulated-approximate");
}

nc::GemmOperand gemm_operand(const char* fn, const char* name, const char* scale_name, const Array& a,
                             const OptArray& scale, nc::DType dtype, nc::ScaleMode mode) {
  const ArgCheck c(fn, name, a);
  c.dtype({dtype == nc::DType::bf16 ? Elem::bf16 : Elem::u8}).ndim(2).dense();
  const int64_t rows = c.dim(0), k = c.dim(1);
  if (mode == nc::ScaleMode::none) {
    if (scale) ArgCheck(fn, scale_name, *scale).fail("is given but the scale mode is none; pass None");
  } else {
    if (!scale) c.fail(std::string("has scale mode ") + std::string(nc::to_string(mode)) + " but " + scale_name + " is None");
    ArgCheck(fn, scale_name, *scale).dtype({Elem::f32}).shape({nc::scale_layout::scale_count(mode, rows, k)}).dense();
  }
  return {a.data(), dtype, rows, k, mode, scale ? scale->data() : nullptr};
}

std::pair<std::string, std::string> gemm(const Array& a, const OptArray& a_scale, const Array& b, const OptArray& b_scale,
                                         const Array& out, const std::string& a_dtype, const std::string& b_dtype,
                                         const std::string& a_scale_mode, const std::string& b_scale_mode, float alpha,
                                         const std::string& pass, const std::string& accumulation,
                                         const std::string& operands, uintptr_t stream) {
  constexpr const char* fn = "gemm_cuda";
  const nc::GemmOperand A = gemm_operand(fn, "a", "a_scale", a, a_scale, parse_dtype(fn, "a_dtype", a_dtype),
                                         parse_scale_mode(fn, "a_scale_mode", a_scale_mode));
  const nc::GemmOperand B = gemm_operand(fn, "b", "b_scale", b, b_scale, parse_dtype(fn, "b_dtype", b_dtype),
                                         parse_scale_mode(fn, "b_scale_mode", b_scale_mode));
  ArgCheck(fn, "out", out).dtype({Elem::bf16, Elem::f32}).shape({A.rows, B.rows}).dense();
  on_cuda(fn, {{"a", &a}, {"b", &b}, {"out", &out}}, {{"a_scale", &a_scale}, {"b_scale", &b_scale}});
  nc::GemmOptions o;
  o.pass = parse_pass(fn, pass);
  o.alpha = alpha;
  o.accumulation = parse_accumulation(fn, accumulation);
  o.operands = parse_operands(fn, operands);
  o.stream = as_stream(stream);
  const nc::GemmOutput C{out.data(), is_elem(out.dtype(), Elem::f32) ? nc::OutputDType::f32 : nc::OutputDType::bf16};
  nc::GemmReport report;
  nc::ExecutionPath path;
  {
    nb::gil_scoped_release release;
    path = nc::gemm(A, B, C, o, &report);
  }
  return {std::string(nc::to_string(path)), report.description};
}
}  // namespace

void bind_cuda(nb::module_& m) {
  using namespace nb::literals;
  m.attr("cuda_runtime_version") = CUDART_VERSION;  // the toolkit the extension was compiled with
  m.def("quartet_forward_e4m3_cuda", &quartet_forward_e4m3, "x"_a, "e4m3"_a, "row_scales"_a, "codes"_a = nb::none(),
        "scales"_a = nb::none(), "mask"_a = nb::none(), "violating_rows"_a = nb::none(), nb::kw_only(),
        "hadamard_size"_a = 32, "rotate"_a = true, "forward_quantizer"_a = "quest", "stream"_a = 0,
        "Fused Quartet forward quantizer (quartet_fused.hpp): x [rows, cols] (bfloat16 or float32) -> E4M3 codes "
        "[rows, cols] (uint8) with FP32 row scales [rows] (cuBLASLt OUTER_VEC), optional MXFP4 planes (codes [rows, "
        "cols/2], E8M0 scales [rows, cols/32], packed trust mask [rows*cols/8]) and a violation counter (int32[1]: "
        "rows whose block exponents spread over more than 14 binades, encoded inexactly). Returns the kernel path.");
  m.def("quartet_forward_cuda", &quartet_forward, "x"_a, "codes"_a, "scales"_a, "mask"_a = nb::none(), nb::kw_only(),
        "hadamard_size"_a = 32, "rotate"_a = true, "forward_quantizer"_a = "quest", "stream"_a = 0,
        "Quartet forward quantizer to MXFP4 planes only (quartet.hpp). Returns the kernel path.");
  m.def("quartet_backward_cuda", &quartet_backward, "x"_a, "rowwise_codes"_a = nb::none(), "rowwise_scales"_a = nb::none(),
        "colwise_codes"_a = nb::none(), "colwise_scales"_a = nb::none(), nb::kw_only(), "seed"_a, "stochastic"_a = false,
        "hadamard_size"_a = 32, "rotate"_a = true, "stream"_a = 0,
        "Quartet backward quantizer of a dense x [rows, cols]: the row-wise copy (groups along cols) and/or the "
        "column-wise copy of x^T [cols, rows], from one read. Seeded random-sign Hadamard, 3/4 prescale, nearest or "
        "stochastic rounding; equals the CPU reference's quantize(x, 'quartet', 'dy', seed=seed). Returns the path.");
  m.def("quartet_backward_mxfp4_transposed_cuda", &quartet_backward_mxfp4_transposed, "codes"_a, "scales"_a,
        "colwise_codes"_a, "colwise_scales"_a, nb::kw_only(), "seed"_a, "stochastic"_a = false, "hadamard_size"_a = 32,
        "rotate"_a = true, "stream"_a = 0,
        "Quartet backward quantizer of the transpose of a forward MXFP4 tensor (codes [rows, cols/2], scales "
        "[rows, cols/32]) into colwise planes of [cols, rows]. Returns the kernel path.");
  m.def("reencode_mxfp4_e4m3_cuda", &reencode, "codes"_a, "scales"_a, "e4m3"_a, "set_scales"_a,
        "violations"_a = nb::none(), nb::kw_only(), "granularity"_a = "row", "stream"_a = 0,
        "Exact MXFP4 -> E4M3 re-encoding (reencode.hpp) per row (set_scales [rows], OUTER_VEC) or per 1x128 group "
        "(set_scales [reencode_scale_count('group128', rows, cols)], VEC128). violations: int32[2] = (violating rows, "
        "violating 1x128 groups), -1 where not counted. Returns the kernel path.");
  m.def("reencode_scale_count", [](const std::string& granularity, int64_t rows, int64_t cols) {
          return nc::reencode_scale_count(parse_granularity("reencode_scale_count", granularity), rows, cols);
        }, "granularity"_a, "rows"_a, "cols"_a, "Number of FP32 set scales (padding included) of a re-encoding.");
  m.def("decode_mxfp4_bf16_cuda", &decode_bf16, "codes"_a, "scales"_a, "out"_a, nb::kw_only(), "stream"_a = 0,
        "Exact MXFP4 -> BF16 decode into out [rows, cols] (bfloat16). Returns the kernel path.");
  m.def("quartet_epilogue_cuda", &epilogue, "g"_a, "mask"_a, "out"_a, nb::kw_only(),
        "scale"_a = quant::kQuartetGemmRescale, "hadamard_size"_a = 32, "rotate"_a = true, "stream"_a = 0,
        "Quartet backward epilogue: out = inverse Hadamard of (g * scale) masked by the forward trust mask "
        "(g, out: bfloat16 or float32 [rows, cols]; mask: packed uint8 [rows*cols/8]). Returns the kernel path.");
  m.def("gemm_cuda", &gemm, "a"_a, "a_scale"_a, "b"_a, "b_scale"_a, "out"_a, nb::kw_only(), "a_dtype"_a = "e4m3",
        "b_dtype"_a = "e4m3", "a_scale_mode"_a = "outer_vec", "b_scale_mode"_a = "outer_vec", "alpha"_a = 1.0f,
        "pass_"_a = "fprop", "accumulation"_a = "split", "operands"_a = "emulated-exact (fp8)", "stream"_a = 0,
        "cuBLASLt GEMM out[M, N] = alpha * a[M, K] * b[N, K]^T (gemm.hpp): FP8 operands as uint8 codes with FP32 "
        "scales in the layout of their scale mode, or bfloat16 operands with scale None and mode none; out bfloat16 "
        "or float32. Returns (execution path, description).");
}

}  // namespace nibble::python
