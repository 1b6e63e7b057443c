// Lookups shared by the workload tests: find one GEMM of a derived list, or fail the test.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "nibble/workload.hpp"

namespace nibble::workload::testing {

inline const Gemm& find_gemm(const Workload& w, const std::string& layer, const std::string& pass,
                             const std::string& role = "") {
  for (const Gemm& g : w.gemms)
    if (g.layer == layer && g.pass == pass && (role.empty() || g.role == role)) return g;
  ADD_FAILURE() << "no GEMM " << layer << " " << pass << " " << role;
  static const Gemm missing{"missing", "missing", -1, -1, -1, -1, "", false};
  return missing;
}

// Pins M, K, N and count of one GEMM.
inline void expect_shape(const Workload& w, const std::string& layer, const std::string& pass, int64_t m, int64_t k,
                         int64_t n, int64_t count = 1, const std::string& role = "") {
  const Gemm& g = find_gemm(w, layer, pass, role);
  EXPECT_EQ(g.m, m) << layer << " " << pass;
  EXPECT_EQ(g.k, k) << layer << " " << pass;
  EXPECT_EQ(g.n, n) << layer << " " << pass;
  EXPECT_EQ(g.count, count) << layer << " " << pass;
}

// All three passes of a linear layer with tokens T, in_features I, out_features O (docs/spec.md §5).
inline void expect_linear(const Workload& w, const std::string& layer, int64_t T, int64_t I, int64_t O,
                          int64_t count = 1, const std::string& role = "") {
  expect_shape(w, layer, "fprop", T, I, O, count, role);
  expect_shape(w, layer, "dgrad", T, O, I, count, role);
  expect_shape(w, layer, "wgrad", I, T, O, count, role);
}

inline ModelConfig codonfm_by_hand() {
  ModelConfig m;
  m.name = "codonfm-by-hand";
  m.hidden = 4096;
  m.ffn = 16384;
  m.heads = 32;
  m.layers = 24;
  m.vocab = 69;
  m.micro_batch = 31;
  m.seq_len = 512;
  return m;
}

}  // namespace nibble::workload::testing
