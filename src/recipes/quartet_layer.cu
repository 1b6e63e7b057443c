// Quartet on Hopper (docs/spec.md §3 and §4): MXFP4 forward and backward through exact E4M3
// re-encodings and FP8 GEMMs, with the post-GEMM epilogue (trust mask + inverse Hadamard).
//
//   fprop: Xq, Wq = Hadamard-32 + QuEST (codes, scales, trust masks), fused with the exact E4M3
//          row re-encoding (one pass each); Y = GEMM(Xq, Wq)
//   dgrad: dYq = backward quantizer of dY (row-wise, plus the column-wise copy for wgrad from the
//          same read); Wq^T = backward quantizer of the forward Wq, transposed;
//          dX = epilogue(GEMM(dYq, Wq^T) * 16/9, Mx)
//   wgrad: Xq^T = backward quantizer of the forward Xq, transposed;
//          dW = epilogue(GEMM(dYq^T, Xq^T) * 16/9, Mw)   (dW as [O, I], so the epilogue runs along I)
// The epilogues are post-GEMM quantization work, so they count in quant_ms of the autocast modes.
#include "device_buffer.hpp"
#include "layer_runner.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/predict/quant_traffic.hpp"
#include "reencoded_operand.hpp"

namespace nibble::recipes {
namespace {

using bench::Mode;
using cuda::Pass;

class QuartetLayer final : public LayerRunner {
 public:
  QuartetLayer(const LayerShape& s, const LayerSources& src, const RunnerSettings& st)
      : s_(s), src_(src), settings_(st), xq_(s.t, s.i, true, "quartet X"), wq_(s.o, s.i, true, "quartet W"),
        dyq_(s.t, s.o, false, "quartet dY"), dytq_(s.o, s.t, false, "quartet dY^T"),
        wtq_(s.i, s.o, false, "quartet W^T"), xtq_(s.i, s.t, false, "quartet X^T"), x_(s.t, s.i, "X"),
        w_(s.o, s.i, "W"), dy_(s.t, s.o, "dY"), dyt_(s.o, s.t, "dY^T"), wt_(s.i, s.o, "W^T"), xt_(s.i, s.t, "X^T"),
        g_(std::max({s.t * s.o, s.t * s.i, s.i * s.o}) * 2, "quartet GEMM output"),
        out_(std::max(s.t * s.i, s.i * s.o) * 2, "quartet epilogue output") {}

  void prepare(cudaStream_t stream) override {
    forward(stream);
    backward_dy(true, true, 1, stream);
    backward_w(1, stream);
    backward_x(1, stream);
    for (auto* r : {&x_, &w_, &dy_, &dyt_, &wt_, &xt_}) r->settle(stream);
    forward(stream);  // again at the settled granularities
    backward_dy(true, true, 1, stream);
    backward_w(1, stream);
    backward_x(1, stream);
  }
  void quantize(Pass pass, Mode mode, int64_t step, cudaStream_t stream) override {
    if (mode == Mode::pre_quantized) return;
    if (pass == Pass::fprop) {
      forward(stream);
    } else if (pass == Pass::dgrad) {
      backward_dy(true, mode == Mode::step, step, stream);
      backward_w(step, stream);
      epilogue(s_.t, s_.i, xq_.mask.as<uint8_t>(), stream);
    } else {
      if (mode == Mode::per_gemm) backward_dy(false, true, step, stream);
      backward_x(step, stream);
      epilogue(s_.o, s_.i, wq_.mask.as<uint8_t>(), stream);
    }
  }
  cuda::ExecutionPath gemm(Pass pass, cudaStream_t stream) override {
    cuda::GemmOptions opt;
    opt.pass = pass;
    opt.operands = cuda::ExecutionPath::emulated_exact_fp8;
    opt.accumulation = settings_.fast_accumulation_everywhere ? cuda::Accumulation::fast : cuda::Accumulation::split;
    opt.autotune = settings_.autotune;
    opt.stream = stream;
    const cuda::GemmOutput out{g_.get(), cuda::OutputDType::bf16};
    if (pass == Pass::fprop) return cuda::gemm(x_.operand(), w_.operand(), out, opt);
    opt.alpha = 16.0f / 9.0f;  // undo the backward quantizer's 3/4 prescale on both operands
    if (pass == Pass::dgrad) return cuda::gemm(dy_.operand(), wt_.operand(), out, opt);
    return cuda::gemm(dyt_.operand(), xt_.operand(), out, opt);
  }
  double quant_bytes(Pass pass, Mode mode) const override {
    predict::TrafficOptions o;
    o.quartet_forward_fused = x_.forward_fused() && w_.forward_fused();
    return predict::pass_quant_bytes("quartet", cuda::to_string(pass), mode, {s_.t, s_.i, s_.o}, o);
  }
  void quantize_weight(int64_t, cudaStream_t stream) override {
    w_.run_quartet_forward(src_.w, cuda::QuartetForwardOptions{}, wq_.planes(), stream);
  }
  double weight_quant_bytes(Pass pass, Mode mode) const override {
    predict::TrafficOptions o;
    o.quartet_forward_fused = x_.forward_fused() && w_.forward_fused();
    return predict::pass_weight_quant_bytes("quartet", cuda::to_string(pass), mode, {s_.t, s_.i, s_.o}, o);
  }
  std::string note() const override {
    std::string out;
    for (auto* r : {&x_, &w_, &dy_, &dyt_, &wt_, &xt_}) out += (out.empty() ? "" : "; ") + r->note();
    return out;
  }

 private:
  void forward(cudaStream_t stream) {
    const cuda::QuartetForwardOptions f{};
    x_.run_quartet_forward(src_.x, f, xq_.planes(), stream);
    w_.run_quartet_forward(src_.w, f, wq_.planes(), stream);
  }
  cuda::QuartetBackwardOptions backward_options(int64_t step) const {
    cuda::QuartetBackwardOptions b;
    b.sign_seed = settings_.seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull);  // fresh per step
    return b;
  }
  // dY: the row-wise copy (dgrad, inner dim O) and/or the column-wise copy dY^T (wgrad, inner dim T).
  void backward_dy(bool rowwise, bool colwise, int64_t step, cudaStream_t stream) {
    const cuda::Mxfp4Planes none{};
    cuda::quartet_backward_quantize(src_.dy, cuda::Fp4DenseType::bf16, s_.t, s_.o, backward_options(step),
                                    rowwise ? dyq_.planes() : none, colwise ? dytq_.planes() : none, stream);
    if (rowwise) dy_.run(dyq_.const_planes(), stream);
    if (colwise) dyt_.run(dytq_.const_planes(), stream);
  }
  void backward_w(int64_t step, cudaStream_t stream) {
    cuda::quartet_backward_quantize_mxfp4_transposed(wq_.const_planes(), s_.o, s_.i, backward_options(step),
                                                     wtq_.planes(), stream);
    wt_.run(wtq_.const_planes(), stream);
  }
  void backward_x(int64_t step, cudaStream_t stream) {
    cuda::quartet_backward_quantize_mxfp4_transposed(xq_.const_planes(), s_.t, s_.i, backward_options(step),
                                                     xtq_.planes(), stream);
    xt_.run(xtq_.const_planes(), stream);
  }
  void epilogue(int64_t rows, int64_t cols, const uint8_t* mask, cudaStream_t stream) {
    cuda::QuartetEpilogueOptions e;
    e.scale = 1.0f;  // 16/9 is folded into the GEMM's alpha
    cuda::quartet_epilogue(g_.get(), cuda::Fp4DenseType::bf16, rows, cols, mask, e, out_.get(),
                           cuda::Fp4DenseType::bf16, stream);
  }

  LayerShape s_;
  LayerSources src_;
  RunnerSettings settings_;
  Mxfp4Buffers xq_, wq_, dyq_, dytq_, wtq_, xtq_;
  ReencodedOperand x_, w_, dy_, dyt_, wt_, xt_;
  DeviceBuffer g_, out_;
};

}  // namespace

std::unique_ptr<LayerRunner> make_quartet_runner(const LayerShape& shape, const LayerSources& sources,
                                                 const RunnerSettings& settings, cudaStream_t) {
  return std::make_unique<QuartetLayer>(shape, sources, settings);
}

}  // namespace nibble::recipes
