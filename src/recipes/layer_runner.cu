#include "device_buffer.hpp"
#include "layer_runner.hpp"
#include "nibble/predict/quant_traffic.hpp"
#include "tensor_quantizer.hpp"

namespace nibble::recipes {

std::unique_ptr<LayerRunner> make_quartet_runner(const LayerShape& shape, const LayerSources& sources,
                                                 const RunnerSettings& settings, cudaStream_t stream);

namespace {

using cuda::Pass;
using bench::Mode;

// Recipes whose quantization is "one source tensor -> row-wise and column-wise copies".
class StandardLayer final : public LayerRunner {
 public:
  StandardLayer(const std::string& recipe, const LayerShape& s, const LayerSources& src, const RunnerSettings& st,
                cudaStream_t stream)
      : settings_(st), recipe_(recipe), shape_(s) {
    QuantizerSettings q{st.e4m3_only, st.seed};
    x_ = make_tensor_quantizer(recipe, TensorRole::x, src.x, s.t, s.i, q, stream);
    w_ = make_tensor_quantizer(recipe, TensorRole::w, src.w, s.o, s.i, q, stream);
    dy_ = make_tensor_quantizer(recipe, TensorRole::dy, src.dy, s.t, s.o, q, stream);
    if (recipe == "fp8-block" && st.te_forward_layouts) {
      // The wgrad GEMM as a forward-layer call: dY^T is that call's weight, so 128x128 blocks.
      dy_as_weight_ = make_tensor_quantizer(recipe, TensorRole::w, src.dy, s.t, s.o, q, stream);
    }
    const int64_t out_elems = std::max({s.t * s.o, s.t * s.i, s.i * s.o});
    out_ = DeviceBuffer(out_elems * 2, "GEMM output");
  }
  void prepare(cudaStream_t stream) override {
    for (auto* q : {x_.get(), w_.get(), dy_.get(), dy_as_weight_.get()}) {
      if (q == nullptr) continue;
      q->run(true, true, 0, stream);
      q->settle(stream);
      if (q->quantizes()) q->run(true, true, 0, stream);  // at the settled choice
    }
  }
  std::string note() const override {
    std::string out;
    const char* roles[] = {"X", "W", "dY"};
    int i = 0;
    for (auto* q : {x_.get(), w_.get(), dy_.get()}) {
      const std::string n = q->note();
      if (!n.empty()) out += (out.empty() ? "" : "; ") + std::string(roles[i]) + " " + n;
      ++i;
    }
    if (dy_as_weight_) {
      out += std::string(out.empty() ? "" : "; ") +
             "per-gemm wgrad timed as Transformer Engine's forward-layer call (dY^T in 128x128 blocks; the recipe's "
             "real wgrad, 1x128 x 1x128, runs in the step mode)";
    }
    return out;
  }
  void quantize(Pass pass, Mode mode, int64_t step, cudaStream_t stream) override {
    if (mode == Mode::step) {
      if (pass == Pass::fprop) {
        x_->run(true, true, step, stream);
        w_->run(true, true, step, stream);
      } else if (pass == Pass::dgrad) {
        dy_->run(true, true, step, stream);
      }
    } else if (mode == Mode::per_gemm) {
      if (pass == Pass::fprop) {
        x_->run(true, false, step, stream);
        w_->run(true, false, step, stream);
      } else if (pass == Pass::dgrad) {
        dy_->run(true, false, step, stream);
        w_->run(false, true, step, stream);
      } else {
        x_->run(false, true, step, stream);
        wgrad_dy().run(false, true, step, stream);
      }
    }
  }
  void quantize_weight(int64_t step, cudaStream_t stream) override { w_->run(true, true, step, stream); }
  double weight_quant_bytes(Pass pass, Mode mode) const override {
    return predict::pass_weight_quant_bytes(recipe_, cuda::to_string(pass), mode, {shape_.t, shape_.i, shape_.o});
  }
  cuda::ExecutionPath gemm(Pass pass, cudaStream_t stream) override {
    cuda::GemmOperand a, b;
    if (pass == Pass::fprop) {
      a = x_->rowwise();
      b = w_->rowwise();
    } else if (pass == Pass::dgrad) {
      a = dy_->rowwise();
      b = w_->colwise();
    } else {
      a = x_->colwise();
      b = dy_->colwise();
    }
    cuda::GemmOptions opt;
    opt.pass = pass;
    opt.accumulation = settings_.fast_accumulation_everywhere ? cuda::Accumulation::fast
                                                              : cuda::Accumulation::default_for_pass;
    if (a.scale_mode == cuda::ScaleMode::vec128 || a.scale_mode == cuda::ScaleMode::blk128x128 ||
        a.dtype == cuda::DType::bf16) {
      opt.accumulation = cuda::Accumulation::default_for_pass;  // block modes always split; bf16 has none
    }
    opt.operands = x_->operands_path();
    // Re-encoded MXFP4 is exact only with split (FP32-promoted) accumulation; fast accumulation is
    // what Transformer Engine's settings ask for and the GEMM then labels it approximate.
    if (opt.operands == cuda::ExecutionPath::emulated_exact_fp8 && !settings_.fast_accumulation_everywhere) {
      opt.accumulation = cuda::Accumulation::split;
    }
    opt.autotune = settings_.autotune;
    opt.stream = stream;
    return cuda::gemm(a, b, {out_.get(), cuda::OutputDType::bf16}, opt);
  }
  // The copies quantize() writes, counted by the account a prediction uses too (predict/quant_traffic.hpp).
  double quant_bytes(Pass pass, Mode mode) const override {
    predict::TrafficOptions o;
    o.te_forward_layouts = dy_as_weight_ != nullptr;
    return predict::pass_quant_bytes(recipe_, cuda::to_string(pass), mode, {shape_.t, shape_.i, shape_.o}, o);
  }

 private:
  // The quantizer whose column-wise copy the wgrad GEMM reads (and the per-gemm mode re-quantizes).
  TensorQuantizer& wgrad_dy() const { return dy_as_weight_ ? *dy_as_weight_ : *dy_; }

  RunnerSettings settings_;
  std::string recipe_;
  LayerShape shape_;
  std::unique_ptr<TensorQuantizer> x_, w_, dy_;
  std::unique_ptr<TensorQuantizer> dy_as_weight_;  // fp8-block under Transformer Engine's attribution only
  DeviceBuffer out_;
};

}  // namespace

std::unique_ptr<LayerRunner> make_layer_runner(const std::string& recipe, const LayerShape& shape,
                                               const LayerSources& sources, const RunnerSettings& settings,
                                               cudaStream_t stream) {
  if (recipe == "quartet") return make_quartet_runner(shape, sources, settings, stream);
  return std::make_unique<StandardLayer>(recipe, shape, sources, settings, stream);
}

}  // namespace nibble::recipes
