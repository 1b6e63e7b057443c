// Delayed scaling state for fp8-delayed (SPEC 2): the amaxes of the last `window` steps.
// s_enc = fmax * 2^-margin / max(history); an empty history or a zero max gives 1.
// Quantizing with delayed scaling uses the scale from the history and THEN records this step's
// amax. The window counts steps; a non-finite amax takes its step's slot as 0, so one NaN step
// cannot poison the 1024 later ones (the GPU ring in cuda/quantize_fp8.hpp does the same).
#pragma once
#include <cstdint>
#include <vector>

namespace nibble::quant {

class AmaxHistory {
 public:
  explicit AmaxHistory(int window = 1024, int margin = 0);

  float encode_scale(float fmax) const;  // scale for the NEXT quantization
  void record(float amax);               // push this step's amax (drops the oldest past window)
  float max() const;                     // 0 when empty
  int size() const { return static_cast<int>(filled_); }
  int window() const { return static_cast<int>(values_.size()); }
  int margin() const { return margin_; }

 private:
  std::vector<float> values_;  // ring buffer of length window
  int64_t next_ = 0;
  int64_t filled_ = 0;
  int margin_ = 0;
};

}  // namespace nibble::quant
