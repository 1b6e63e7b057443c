// Plain enums shared by host and device code: which element and scale formats a quantized tensor
// holds, and which stream of the counter-based generator each recipe draws from.
#pragma once
#include <cstdint>

namespace nibble::quant {

enum class ElementFormat : uint8_t { bf16, e4m3, e5m2, e2m1 };
enum class ScaleFormat : uint8_t { none, fp32, e8m0, ue4m3 };

// MX scale exponent rules (SPEC 2): the OCP rule 2^(floor(log2 amax) - emax_elem) can clip values
// in (fmax, 2^(emax+1)) * X to fmax; the round-up rule 2^ceil(log2(amax / fmax)) never clips.
enum class MxScaleRule : uint8_t { ocp, round_up };

// Quartet's forward quantizer: QuEST (default) or the plain OCP absmax rule (ablation).
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
