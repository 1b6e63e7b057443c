// Layer 2: recipes and the CPU reference of every quantizer (docs/spec.md §2-4).
#pragma once
#include "nibble/quant/amax.hpp"
#include "nibble/quant/amax_history.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/error_metrics.hpp"
#include "nibble/quant/formats.hpp"
#include "nibble/quant/hadamard.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/recipe.hpp"
#include "nibble/quant/reencode.hpp"
#include "nibble/quant/scale_rules.hpp"
