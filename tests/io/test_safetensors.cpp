// .safetensors: round trips of every loaded dtype, and headers that lie in every way we could
// think of (offsets out of range, overlapping, leaving holes, sizes that disagree with shapes).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "nibble/format/bf16.hpp"
#include "nibble/io.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

using namespace nibble::io;
using nibble::io::testing::TempDir;

namespace {

Tensor half_tensor(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == DType::bf16 ? nibble::fmt::encode_bf16(values[i]) : encode_f16(values[i]);
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  return t;
}

std::vector<uint8_t> image(const std::string& header, size_t data_bytes, uint64_t claimed_len = UINT64_MAX) {
  const uint64_t n = claimed_len == UINT64_MAX ? header.size() : claimed_len;
  std::vector<uint8_t> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(rng());
  return out;
}

void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
    ADD_FAILURE() << "accepted a malformed file; expected: " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Safetensors, RoundTripEveryLoadedDtype) {
  TempDir dir;
  const auto w = nibble::testing::fresh_normal_floats(16 * 64, 2.0f);
  const auto b = nibble::testing::fresh_normal_floats(64, 2.0f);
  const auto g = nibble::testing::fresh_normal_floats(5 * 32, 2.0f);
  std::vector<uint8_t> mask(40);
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  for (auto& m : mask) m = static_cast<uint8_t>(rng() & 1);
  const std::vector<Tensor> tensors = {
      make_f32_tensor("layer.0.weight", {16, 64}, w), half_tensor("layer.0.bias", DType::bf16, {64}, b),
      half_tensor("grad", DType::f16, {5, 32}, g), make_u8_tensor("mask", {40}, mask),
      make_f32_tensor("empty", {0}, {})};
  write_safetensors(dir / "m.safetensors", tensors);
  EXPECT_EQ(dir.entries(), 1u);

  const auto contents = read_safetensors(dir / "m.safetensors");
  ASSERT_EQ(contents.tensors.size(), tensors.size());
  EXPECT_TRUE(contents.skipped.empty());
  for (const auto& want : tensors) {
    const auto it = std::find_if(contents.tensors.begin(), contents.tensors.end(),
                                 [&](const Tensor& t) { return t.name == want.name; });
    ASSERT_NE(it, contents.tensors.end()) << want.name;
    EXPECT_EQ(it->dtype, want.dtype) << want.name;
    EXPECT_EQ(it->shape, want.shape) << want.name;
    EXPECT_EQ(it->bytes, want.bytes) << want.name;
  }
  // bf16 and f16 decode exactly: every value is the rounded input, bit for bit.
  const auto bias = to_float32(*std::find_if(contents.tensors.begin(), contents.tensors.end(),
                                             [](const Tensor& t) { return t.name == "layer.0.bias"; }));
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(bias[i], nibble::fmt::round_bf16(b[i]));

  // The index reads only the header; a tensor then loads on its own.
  const auto index = read_safetensors_index(dir / "m.safetensors");
  EXPECT_EQ(index.data_start % 8, 0u);
  for (const auto& e : index.entries) {
    if (e.name == "grad") {
      EXPECT_EQ(e.dtype_tag, "F16");
      EXPECT_EQ(to_float32(read_safetensors_tensor(dir / "m.safetensors", index, e)),
                to_float32(tensors[2]));
    }
  }
}

TEST(Safetensors, IgnoresMetadataAndSkipsUnloadedDtypes) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("x":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  const auto contents = parse_safetensors(image(header, 24), "ok.safetensors");
  ASSERT_EQ(contents.tensors.size(), 1u);
  EXPECT_EQ(contents.tensors[0].name, "x");
  ASSERT_EQ(contents.skipped.size(), 1u);
  EXPECT_NE(contents.skipped[0].find("I64"), std::string::npos);
}

TEST(Safetensors, RejectsBadLengthField) {
  expect_rejected({1, 2, 3}, "too short");
  expect_rejected(image("{}", 0, 1000), "truncated");
  expect_rejected(image("{}", 0, 200'000'000), "100 MB");
  expect_rejected(image("{}", 0, UINT64_MAX - 1), "100 MB");
  expect_rejected(image("[1, 2]", 0), "does not start with '{'");
  expect_rejected(image("{\"a\": ", 0), "not valid JSON");
}

TEST(Safetensors, RejectsBadEntries) {
  auto one = [](const std::string& entry, size_t data) { return image("{\"t\":" + entry + "}", data); };
  expect_rejected(one(R"({"shape":[2],"data_offsets":[0,8]})", 8), "missing string 'dtype'");
  expect_rejected(one(R"({"dtype":"F32","data_offsets":[0,8]})", 8), "missing array 'shape'");
  expect_rejected(one(R"({"dtype":"F32","shape":[2]})", 8), "data_offsets");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", 8), "data_offsets");
  expect_rejected(one(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})", 8), "unknown dtype 'F33'");
  expect_rejected(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", 8), "non-negative");
  expect_rejected(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", 8), "non-negative");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})", 8), "non-negative");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", 8), "> end");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})", 8), "unexpected field");
  expect_rejected(one(R"([1,2])", 8), "not an object");
  expect_rejected(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 8), "needs 12 bytes");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,16]})", 8), "beyond");
  expect_rejected(one(R"({"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]})", 8),
                  "needs more than");
  expect_rejected(image(R"({"__metadata__":[1]})", 0), "__metadata__");
}

TEST(Safetensors, RejectsOverlapsHolesAndTrailingBytes) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  expect_rejected(image("{" + a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlaps");
  expect_rejected(image("{" + a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}})", 16), "hole");
  expect_rejected(image("{" + a + "}", 9), "no tensor describes");
  expect_rejected(image("{" + a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "overlaps");
}

TEST(Safetensors, WriterRejectsBadNames) {
  const auto v = nibble::testing::fresh_normal_floats(4, 2.0f);
  const std::vector<Tensor> dup = {make_f32_tensor("x", {4}, v), make_f32_tensor("x", {4}, v)};
  EXPECT_THROW(encode_safetensors(dup), std::invalid_argument);
  const std::vector<Tensor> reserved = {make_f32_tensor("__metadata__", {4}, v)};
  EXPECT_THROW(encode_safetensors(reserved), std::invalid_argument);
}

TEST(Safetensors, ReadFileChecksTruncation) {
  TempDir dir;
  const std::vector<Tensor> tensors = {make_f32_tensor("w", {4, 4}, nibble::testing::fresh_normal_floats(16, 2.0f))};
  auto bytes = encode_safetensors(tensors);
  bytes.resize(bytes.size() - 3);
  write_file_atomic(dir / "t.safetensors", bytes);
  EXPECT_THROW(read_safetensors(dir / "t.safetensors"), std::invalid_argument);
  EXPECT_THROW(read_safetensors_index(dir / "nope.safetensors"), std::runtime_error);
}
