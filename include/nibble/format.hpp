// Layer 1: scalar number formats, shared by host and device code.
#pragma once
#include "nibble/format/bf16.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/host_device.hpp"
#include "nibble/format/minifloat.hpp"
#include "nibble/format/philox.hpp"
