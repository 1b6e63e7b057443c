// Layer: workload. From a transformer config to the exact GEMMs of one training step (SPEC section 5).
#pragma once
#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_cli.hpp"
#include "nibble/workload/model_config.hpp"
#include "nibble/workload/model_sources.hpp"
