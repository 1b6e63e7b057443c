// Layer io: tensors in files (.npy, .safetensors), read with every claim checked, written atomically.
#pragma once
#include "nibble/io/binary_file.hpp"
#include "nibble/io/float16.hpp"
#include "nibble/io/npy.hpp"
#include "nibble/io/safetensors.hpp"
#include "nibble/io/tensor.hpp"
