// Argument checks of the CUDA bindings (bind_cuda.cpp): every array comes in through DLPack as an
// untyped nb::ndarray<>, so a wrong tensor gets a message naming the function, the argument and the
// fix instead of nanobind's generic "incompatible function arguments". Each binding checks dtype,
// shape, contiguity and alignment of every argument first and the device of all of them last, so all
// checks but the device one can be exercised with CPU tensors (tests/python/test_cuda_backend.py).
#pragma once
#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nibble/quant/recipe.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::python {

namespace nb = nanobind;

using Array = nb::ndarray<>;
using OptArray = std::optional<Array>;

enum class Elem { u8, i32, f32, bf16 };

inline bool is_elem(const nb::dlpack::dtype& d, Elem e) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(d.code);
  if (d.lanes != 1) return false;
  switch (e) {
    case Elem::u8:  // raw bytes (torch.uint8, or torch's float8 dtypes holding the same codes)
      return d.bits == 8 && (code == C::UInt || code == C::Float8_E4M3FN || code == C::Float8_E5M2);
    case Elem::i32: return d.bits == 32 && code == C::Int;
    case Elem::f32: return d.bits == 32 && code == C::Float;
    case Elem::bf16: return d.bits == 16 && (code == C::Bfloat || code == C::UInt);  // torch.bfloat16 or its uint16 bits
  }
  return false;
}

inline std::string elem_name(Elem e) {
  switch (e) {
    case Elem::u8: return "uint8";
    case Elem::i32: return "int32";
    case Elem::f32: return "float32";
    case Elem::bf16: return "bfloat16 (or its uint16 bits)";
  }
  return "?";
}

inline std::string dtype_name(const nb::dlpack::dtype& d) {
  using C = nb::dlpack::dtype_code;
  std::string base;
  switch (static_cast<C>(d.code)) {
    case C::Int: base = "int"; break;
    case C::UInt: base = "uint"; break;
    case C::Float: base = "float"; break;
    case C::Bfloat: base = "bfloat"; break;
    case C::Bool: base = "bool"; break;
    default: base = "dlpack-code-" + std::to_string(d.code) + "-bits-"; break;
  }
  return base + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

inline std::string shape_name(const Array& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

inline std::string shape_name(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One argument of one call: fn(arg) names it in every message.
class ArgCheck {
 public:
  ArgCheck(const char* fn, const char* name, const Array& a) : fn_(fn), name_(name), a_(a) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(std::string(fn_) + ": " + name_ + " " + what);
  }
  const ArgCheck& dtype(std::initializer_list<Elem> allowed) const {
    std::string names;
    for (Elem e : allowed) {
      if (is_elem(a_.dtype(), e)) return *this;
      names += (names.empty() ? "" : " or ") + elem_name(e);
    }
    fail("has dtype " + dtype_name(a_.dtype()) + "; expected " + names);
  }
  const ArgCheck& shape(const std::vector<int64_t>& want) const {
    bool ok = a_.ndim() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = static_cast<int64_t>(a_.shape(i)) == want[i];
    if (!ok) fail("has shape " + shape_name(a_) + "; expected " + shape_name(want));
    return *this;
  }
  // C-contiguous (size-1 dimensions may have any stride) and 16-byte aligned: the kernels' vector
  // loads and cuBLASLt's operands need both.
  const ArgCheck& dense(int64_t align = 16) const {
    int64_t expect = 1;
    for (size_t i = a_.ndim(); i-- > 0;) {
      const int64_t n = static_cast<int64_t>(a_.shape(i));
      const int64_t st = a_.stride_ptr() ? a_.stride(i) : expect;
      if (n != 1 && st != expect) {
        fail("is not contiguous (shape " + shape_name(a_) + ", stride " + std::to_string(st) + " in dim " +
             std::to_string(i) + " where " + std::to_string(expect) + " is needed); pass tensor.contiguous()");
      }
      expect *= n;
    }
    const auto addr = reinterpret_cast<uintptr_t>(a_.data());
    if (addr % static_cast<uintptr_t>(align) != 0) {
      fail("is not " + std::to_string(align) + "-byte aligned (address % " + std::to_string(align) + " = " +
           std::to_string(addr % static_cast<uintptr_t>(align)) + "); pass a fresh tensor (tensor.clone()), not "
           "an offset view");
    }
    return *this;
  }
  // On the current CUDA device (checked after every argument's dtype/shape/layout).
  const ArgCheck& cuda() const {
    if (a_.device_type() != nb::device::cuda::value) {
      const char* where = a_.device_type() == nb::device::cpu::value ? "the CPU" : "a non-CUDA device";
      fail(std::string("is on ") + where + "; the CUDA kernels need a CUDA tensor (tensor.cuda()), or use the "
           "CPU reference (backend='reference')");
    }
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
      throw std::runtime_error(std::string(fn_) + ": no usable CUDA device (cudaGetDevice: " + cudaGetErrorName(e) +
                               ", " + cudaGetErrorString(e) + ")");
    }
    if (a_.device_id() != device) {
      fail("is on cuda:" + std::to_string(a_.device_id()) + " but the current CUDA device is cuda:" +
           std::to_string(device) + "; all arguments must be on it (wrap the call in torch.cuda.device(...))");
    }
    return *this;
  }
  int64_t dim(size_t i) const { return static_cast<int64_t>(a_.shape(i)); }
  const ArgCheck& ndim(size_t n) const {
    if (a_.ndim() != n) fail("has " + std::to_string(a_.ndim()) + " dimensions (shape " + shape_name(a_) +
                             "); expected a " + std::to_string(n) + "-D tensor");
    return *this;
  }

 private:
  const char* fn_;
  const char* name_;
  const Array& a_;
};

inline cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

// The device check of every argument of one call, after all the others (so CPU tests reach the rest).
inline void on_cuda(const char* fn, std::initializer_list<std::pair<const char*, const Array*>> args,
                    std::initializer_list<std::pair<const char*, const OptArray*>> optional = {}) {
  for (const auto& [name, a] : args) ArgCheck(fn, name, *a).cuda();
  for (const auto& [name, a] : optional) {
    if (*a) ArgCheck(fn, name, **a).cuda();
  }
}

inline uint8_t* bytes(const Array& a) { return static_cast<uint8_t*>(a.data()); }
inline uint8_t* bytes(const OptArray& a) { return a ? static_cast<uint8_t*>(a->data()) : nullptr; }
inline float* floats(const Array& a) { return static_cast<float*>(a.data()); }
inline float* floats(const OptArray& a) { return a ? static_cast<float*>(a->data()) : nullptr; }

// An MX scale rule named by the user (`scale_rule` of the MX bindings): default (the recipe's:
// te for E4M3 = mxfp8, ocp for E2M1 = mxfp4), te (alias round-up) or ocp; the message names both
// rules' formulas for the element format f (E2M1: emax 2, max 6; E4M3: emax 8, max 448).
inline quant::MxScaleRule parse_mx_rule(const char* fn, const std::string& s, quant::ElementFormat f) {
  if (s == "default") return quant::default_mx_scale_rule(f == quant::ElementFormat::e4m3 ? quant::Recipe::mxfp8
                                                                                          : quant::Recipe::mxfp4);
  if (s == "ocp") return quant::MxScaleRule::ocp;
  if (s == "te" || s == "round-up" || s == "round_up") return quant::MxScaleRule::te;
  throw std::invalid_argument(std::string(fn) + ": scale_rule '" + s + "' is unknown; use default, ocp (2^(floor(log2 amax) - " +
                              std::to_string(quant::element_emax(f)) + ")) or te (Transformer Engine: E8M0 of amax * fl(1/" +
                              std::to_string(static_cast<int>(quant::element_max(f))) + ") rounded up, never clips)");
}

// The copies a row+column quantizer binding is asked for: codes and scales of a copy come together,
// and at least one copy is requested.
inline void check_copy_request(const char* fn, const OptArray& rowwise_codes, const OptArray& rowwise_scales,
                               const OptArray& colwise_codes, const OptArray& colwise_scales) {
  if (rowwise_codes.has_value() != rowwise_scales.has_value() ||
      colwise_codes.has_value() != colwise_scales.has_value()) {
    throw std::invalid_argument(std::string(fn) + ": pass codes and scales of a copy together (or neither)");
  }
  if (!rowwise_codes && !colwise_codes) {
    throw std::invalid_argument(std::string(fn) + ": neither the rowwise nor the colwise copy is requested; ask for "
                                "at least one");
  }
}

}  // namespace nibble::python
