// Layer: workload. From a transformer config to the exact GEMMs of one training step (docs/spec.md §5).
#pragma once
#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_cli.hpp"
#include "nibble/workload/model_config.hpp"
