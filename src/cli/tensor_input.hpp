// What `nibble quantize` and `nibble error` share: the tensors they accept, checked the same way in both (floating
// dtypes f32, f16, bf16, and f64 rounded to float32 with a note; rank 1 or more read as a matrix, leading
// dimensions folded into rows, io::as_matrix; at least one element and one finite value).
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/io.hpp"

namespace nibble::cli {

// Throws std::invalid_argument naming `what` (the file or tensor) unless `dtype` is a floating type.
void require_floating(io::DType dtype, std::string_view what);

// The values to quantize, as float32, after every check above; `what` names the tensor in messages.
// An f64 tensor prints "nibble: note: ..." on stderr saying it was rounded.
std::vector<float> quantizable_values(const io::Tensor& t, std::string_view what);

}  // namespace nibble::cli
