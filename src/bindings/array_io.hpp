// numpy/DLPack array plumbing shared by the binding files: inputs are C-contiguous host float32
// matrices; outputs are new numpy arrays that own their storage (freed by a capsule).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nibble::python {

namespace nb = nanobind;

using HostMatrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using HostMask = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// A rows x cols numpy array taking ownership of `values` (moved into the heap).
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<2>> to_numpy(std::vector<T>&& values, int64_t rows, int64_t cols) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const size_t shape[2] = {static_cast<size_t>(rows), static_cast<size_t>(cols)};
  return nb::ndarray<nb::numpy, T, nb::ndim<2>>(owned->data(), 2, shape, owner);
}

}  // namespace nibble::python
