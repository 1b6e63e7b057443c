// fp8-delayed scaling history: a ring buffer of past amaxes.
#include "nibble/quant/amax_history.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "nibble/quant/scale_rules.hpp"

namespace nibble::quant {

AmaxHistory::AmaxHistory(int window, int margin) : margin_(margin) {
  if (window <= 0) {
    throw std::invalid_argument("amax history window " + std::to_string(window) +
                                " must be at least 1 (default 1024 steps)");
  }
  if (margin < 0 || margin > 64) {
    throw std::invalid_argument("amax history margin " + std::to_string(margin) +
                                " must be in [0, 64] (scale = fmax * 2^-margin / amax)");
  }
  values_.assign(static_cast<size_t>(window), 0.0f);
}

float AmaxHistory::max() const {
  float m = 0.0f;
  for (int64_t i = 0; i < filled_; ++i) m = std::max(m, values_[static_cast<size_t>(i)]);
  return m;
}

float AmaxHistory::encode_scale(float fmax) const {
  // per_tensor_encode_scale maps an empty (0) history to 1.
  return per_tensor_encode_scale(fmax, max(), margin_);
}

void AmaxHistory::record(float amax) {
  // A non-finite step still takes its slot (the window counts steps, as the GPU ring does) but
  // contributes nothing, so one NaN step cannot poison the next `window` scales.
  values_[static_cast<size_t>(next_)] = is_finite(amax) ? amax : 0.0f;
  next_ = (next_ + 1) % static_cast<int64_t>(values_.size());
  filled_ = std::min<int64_t>(filled_ + 1, static_cast<int64_t>(values_.size()));
}

}  // namespace nibble::quant
