// Layer io: tensors in files (.npy, .safetensors), read with every claim checked, written atomically.
#pragma once
#include "nibble/io/binary_file.hpp"
#include "nibble/io/printable.hpp"
#include "nibble/io/tensor.hpp"
