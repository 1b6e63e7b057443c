// Delayed scaling state for fp8-delayed (docs/spec.md §2), as Transformer Engine 2.x DelayedScaling
// (transformer_engine/common/recipe/delayed_scaling.cu): the amaxes of the last `window` steps and
// the current encode scale. Each step quantizes with the current scale, THEN records its amax and
// updates the scale: s_enc = (fmax * 2^-margin) / max(history) when that max is finite and > 0,
// otherwise the previous scale is kept (FLT_MAX where the quotient overflows). Before the first
// update the scale is 1 (DelayedFirstStep::te) or, as an option, the first tensor's own amax
// (DelayedFirstStep::own_amax). A non-finite amax stays in its slot, so the scale holds until the
// window has moved past it (TE's history max is then non-finite too).
#pragma once
#include <cstdint>
#include <vector>

namespace nibble::quant {

// The scale of the first step, before any amax is recorded.
enum class DelayedFirstStep : uint8_t { te, own_amax };

class AmaxHistory {
 public:
  explicit AmaxHistory(int window = 1024, int margin = 0, DelayedFirstStep first_step = DelayedFirstStep::te);

  // Scale for the quantization of this step; `amax` is this step's own amax (used only by
  // DelayedFirstStep::own_amax while the history is empty).
  float encode_scale(float fmax, float amax) const;
  void record(float amax, float fmax);   // push this step's amax, then update the scale for fmax
  float max() const;                     // 0 when empty; non-finite when a recorded amax is
  DelayedFirstStep first_step() const { return first_step_; }
  int size() const { return static_cast<int>(filled_); }
  int window() const { return static_cast<int>(values_.size()); }
  int margin() const { return margin_; }

 private:
  std::vector<float> values_;  // ring buffer of length window
  int64_t next_ = 0;
  int64_t filled_ = 0;
  int margin_ = 0;
  DelayedFirstStep first_step_ = DelayedFirstStep::te;
  float scale_ = 1.0f;
};

}  // namespace nibble::quant
