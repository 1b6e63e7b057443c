// nibble._C: the compiled half of the Python package. The autograd glue lives in Python
// (python/nibble/torch.py); this module only moves arrays in and out of nibble's C++ API.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace nibble::python {
void bind_quant(nb::module_& m);
#ifdef NIBBLE_HAVE_CUDA
void bind_cuda(nb::module_& m);
void bind_cuda_fp8(nb::module_& m);
void bind_cuda_fp4(nb::module_& m);
void bind_cuda_mx_nv(nb::module_& m);
#endif
}  // namespace nibble::python

NB_MODULE(_C, m) {
  m.doc() = "nibble: FP8/FP4 recipes (CPU reference; CUDA kernels when built with CUDA)";
  nibble::python::bind_quant(m);
#ifdef NIBBLE_HAVE_CUDA
  m.attr("has_cuda") = true;
  nibble::python::bind_cuda(m);
  nibble::python::bind_cuda_fp8(m);
  nibble::python::bind_cuda_fp4(m);
  nibble::python::bind_cuda_mx_nv(m);
#else
  m.attr("has_cuda") = false;
#endif
}
