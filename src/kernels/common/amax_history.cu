// fp8-delayed: the history/scale update that runs after each step's quantization. One block reads
// the whole window (1024 floats by default), so the update is a single tiny launch.
#include "fp8/fp8_preconditions.hpp"
#include "fp8/fp8_tile_128x128.cuh"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda {
namespace {

constexpr int kUpdateThreads = 256;

__global__ void __launch_bounds__(kUpdateThreads)
    update_fp8_delayed_scale_kernel(float* history, int window, int next_slot, float* scale, float* scale_inv,
                                    float fmax, int margin) {
  uint32_t m = 0;
  for (int i = threadIdx.x; i < window; i += kUpdateThreads) m = quant::amax_combine_bits(m, quant::abs_bits(history[i]));
  m = block::max_in_thread0<kUpdateThreads>(m);  // amax_combine_bits is the unsigned maximum (NaN above inf)
  if (threadIdx.x == 0) {
    // As quant::AmaxHistory and Transformer Engine: a zero or non-finite history max keeps the
    // previous scale pair.
    const float hist_max = quant::amax_from_bits(m);
    if (hist_max > 0.0f && quant::is_finite(hist_max)) {
      const float s = quant::per_tensor_encode_scale(fmax, hist_max, margin);
      *scale = s;
      *scale_inv = quant::per_tensor_decode_scale(s);
    }
    // Everyone has read the window (the reduction waited for every warp), so the slot step + 1 records
    // into can go.
    history[next_slot] = 0.0f;
  }
}

}  // namespace

const char* update_fp8_delayed_scale(const Fp8DelayedState& state, int64_t step, quant::ElementFormat format,
                                     int margin, cudaStream_t stream) {
  constexpr const char* fn = "update_fp8_delayed_scale";
  fp8_check::fp8_format(fn, format);
  check_not_null(fn, "state.amax_history", state.amax_history);
  check_not_null(fn, "state.scale", state.scale);
  check_not_null(fn, "state.scale_inv", state.scale_inv);
  if (state.window <= 0) throw std::invalid_argument("update_fp8_delayed_scale: state.window must be positive (default 1024)");
  if (step < 0) throw std::invalid_argument("update_fp8_delayed_scale: step must be >= 0");
  if (margin < 0 || margin > 64) {
    throw std::invalid_argument("update_fp8_delayed_scale: margin = " + std::to_string(margin) +
                                " is outside [0, 64]; margin is a power-of-two headroom, usually 0");
  }
  const int next_slot = static_cast<int>((step + 1) % state.window);
  update_fp8_delayed_scale_kernel<<<1, kUpdateThreads, 0, stream>>>(state.amax_history, state.window, next_slot,
                                                                    state.scale, state.scale_inv,
                                                                    quant::element_max(format), margin);
  NIBBLE_CHECK_LAUNCH();
  return "fp8-delayed history update (one block: max over the window, scale, clear the next slot)";
}

}  // namespace nibble::cuda
