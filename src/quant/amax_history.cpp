// fp8-delayed scaling history: a ring buffer of past amaxes.
#include "nibble/quant/amax_history.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "nibble/quant/scale_rules.hpp"

namespace nibble::quant {

AmaxHistory::AmaxHistory(int window, int margin, DelayedFirstStep first_step)
    : margin_(margin), first_step_(first_step) {
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
  // Any non-finite entry makes the max non-finite (NaN bits order above inf's).
  uint32_t m = 0;
  for (int64_t i = 0; i < filled_; ++i) m = amax_combine_bits(m, abs_bits(values_[static_cast<size_t>(i)]));
  return amax_from_bits(m);
}

float AmaxHistory::encode_scale(float fmax, float amax) const {
  if (filled_ == 0 && first_step_ == DelayedFirstStep::own_amax) return per_tensor_encode_scale(fmax, amax, margin_);
  return scale_;
}

void AmaxHistory::record(float amax, float fmax) {
  values_[static_cast<size_t>(next_)] = amax;
  next_ = (next_ + 1) % static_cast<int64_t>(values_.size());
  filled_ = std::min<int64_t>(filled_ + 1, static_cast<int64_t>(values_.size()));
  const float m = max();
  // Zero or non-finite history max: keep the previous scale.
  if (m > 0.0f && is_finite(m)) scale_ = per_tensor_encode_scale(fmax, m, margin_);
}

}  // namespace nibble::quant
