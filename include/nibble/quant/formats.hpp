// Plain enums shared by host and device code: which element and scale formats a quantized tensor
// holds, and which stream of the counter-based generator each recipe draws from.
#pragma once
#include <cstdint>

namespace nibble::quant {

enum class ElementFormat : uint8_t { bf16, e4m3, e5m2, e2m1 };
enum class ScaleFormat : uint8_t { none, fp32, e8m0, ue4m3 };

// MX scale exponent rules (docs/spec.md §2, docs/recipes.md): ocp = 2^(floor(log2 amax) - emax_elem),
// which can clip values in (fmax, 2^(emax+1)) * X to fmax; te = Transformer Engine's rule, the E8M0 of
// the float product amax * fl(1/fmax) rounded up when its significand is non-zero (never clips a
// normal product). mxfp8 defaults to te, mxfp4 to ocp (quant::default_mx_scale_rule).
enum class MxScaleRule : uint8_t { ocp, te };

// Quartet's forward quantizer: QuEST (default) or upstream's absmax ablation (scale
// 2^(floor(log2 amax) - 2) / 0.75, no clipping, no trust mask).
enum class ForwardQuantizer : uint8_t { quest, absmax };

// Philox streams: one per recipe (or purpose), so no two recipes ever share random bits.
// Element index convention for every stream: row * cols + col of the tensor in the orientation it
// is quantized in; for rotation signs the index is the position j within the rotation block.
inline constexpr uint32_t kStreamFp8 = 0x46503801u;            // fp8 recipes, stochastic override
inline constexpr uint32_t kStreamMx = 0x4d580001u;             // mxfp8 / mxfp4, stochastic override
inline constexpr uint32_t kStreamNvfp4 = 0x4e564604u;          // nvfp4 (dy stochastic by default)
inline constexpr uint32_t kStreamQuartetBackward = 0x51425744u; // quartet backward quantizer
inline constexpr uint32_t kSignStream = 0x5349474eu;           // random Hadamard signs ("SIGN")

}  // namespace nibble::quant
