// .npy: round trips with fresh random data, byte-exact headers as NumPy writes them, and every
// malformed header we could think of, each rejected with a message that names the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "nibble/io.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

using namespace nibble::io;
using nibble::io::testing::TempDir;

namespace {

// A .npy image from a raw header dict; pads like NumPy unless `raw` (then the text is used as is).
std::vector<uint8_t> npy_image(int major, std::string dict, const std::vector<uint8_t>& data, bool raw = false,
                               int minor = 0) {
  const size_t pre = major == 1 ? 10 : 12;
  if (!raw) {
    const size_t total = pre + dict.size() + 1;
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
  }
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), static_cast<uint8_t>(minor)};
  for (size_t i = 0; i < pre - 8; ++i) out.push_back(static_cast<uint8_t>(dict.size() >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Expects parse_npy to throw std::invalid_argument whose message contains `needle`.
void expect_rejected(const std::vector<uint8_t>& image, const std::string& needle) {
  try {
    parse_npy(image, "bad.npy");
    ADD_FAILURE() << "accepted a malformed file; expected: " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << "message must name the file: " << e.what();
  }
}

const std::string kGoodDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

}  // namespace

TEST(Npy, RoundTripFloat32TwoD) {
  TempDir dir;
  const auto values = nibble::testing::fresh_normal_floats(7 * 33, 3.0f);
  const Tensor t = make_f32_tensor("", {7, 33}, values);
  write_npy(dir / "a.npy", t);
  const Tensor back = read_npy(dir / "a.npy");
  EXPECT_EQ(back.dtype, DType::f32);
  EXPECT_EQ(back.shape, (std::vector<int64_t>{7, 33}));
  EXPECT_EQ(to_float32(back), values);
  EXPECT_EQ(dir.entries(), 1u);  // no temporary left behind
}

TEST(Npy, RoundTripOneDAndEmptyAndBytes) {
  TempDir dir;
  const auto values = nibble::testing::fresh_normal_floats(129, 3.0f);
  write_npy(dir / "v.npy", make_f32_tensor("", {129}, values));
  const Tensor v = read_npy(dir / "v.npy");
  EXPECT_EQ(v.shape, (std::vector<int64_t>{129}));
  EXPECT_EQ(to_float32(v), values);

  write_npy(dir / "e.npy", make_f32_tensor("", {0, 5}, {}));
  EXPECT_EQ(read_npy(dir / "e.npy").shape, (std::vector<int64_t>{0, 5}));

  std::vector<uint8_t> codes(300);
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  write_npy(dir / "c.npy", make_u8_tensor("", {3, 100}, codes));
  const Tensor c = read_npy(dir / "c.npy");
  EXPECT_EQ(c.dtype, DType::u8);
  EXPECT_EQ(c.bytes, codes);
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.1f, -7.0f, 1e-3f};
  const auto image = encode_npy(make_f32_tensor("", {2, 3}, values));
  const auto expected = npy_image(1, kGoodDict, float_bytes(values));
  EXPECT_EQ(image, expected);
  EXPECT_EQ((image.size() - 24) % 64, 0u);  // data starts on a 64-byte boundary
  const auto one_d = encode_npy(make_f32_tensor("", {3}, std::span(values).first(3)));
  const std::string text(one_d.begin() + 10, one_d.begin() + 10 + one_d[8]);
  EXPECT_NE(text.find("'shape': (3,), }"), std::string::npos) << text;
}

TEST(Npy, ReadsVersionsTwoAndThreeAndOtherDtypes) {
  const auto values = nibble::testing::fresh_normal_floats(6, 3.0f);
  for (int major : {2, 3}) {
    const Tensor t = parse_npy(npy_image(major, kGoodDict, float_bytes(values)), "v.npy");
    EXPECT_EQ(to_float32(t), values) << major;
  }
  // float16 and float64 convert exactly / to nearest; bool and int8 pass through.
  const std::vector<uint8_t> halves = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00};  // 1, -2, 2^-24
  const Tensor h = parse_npy(npy_image(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", halves), "h");
  EXPECT_EQ(to_float32(h), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24)}));
  const double d[2] = {0.1, -1e300};
  std::vector<uint8_t> db(16);
  std::memcpy(db.data(), d, 16);
  const Tensor f8 = parse_npy(npy_image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", db), "d");
  EXPECT_EQ(to_float32(f8)[0], 0.1f);
  EXPECT_TRUE(std::isinf(to_float32(f8)[1]));
  const Tensor b = parse_npy(npy_image(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", {1, 0}), "b");
  EXPECT_EQ(b.dtype, DType::boolean);
  const Tensor i = parse_npy(npy_image(1, "{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }", {0xFF, 5}), "i");
  EXPECT_EQ(to_float32(i), (std::vector<float>{-1.0f, 5.0f}));
  // Key order, double quotes and Python 2 longs are all legal NumPy output.
  const Tensor k = parse_npy(npy_image(1, "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f4\"}",
                                       float_bytes(values)), "k");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{2, 3}));
}

TEST(Npy, RejectsBadPreamble) {
  const auto data = float_bytes(nibble::testing::fresh_normal_floats(6, 3.0f));
  expect_rejected({}, "magic");
  expect_rejected({0x93, 'N', 'U'}, "magic");
  auto wrong_magic = npy_image(1, kGoodDict, data);
  wrong_magic[1] = 'X';
  expect_rejected(wrong_magic, "magic");
  expect_rejected(npy_image(4, kGoodDict, data), "version 4.0");
  expect_rejected(npy_image(1, kGoodDict, data, false, 1), "version 1.1");
  expect_rejected({0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 10}, "truncated");
  auto long_header = npy_image(1, kGoodDict, data);
  long_header[8] = 0xFF;
  long_header[9] = 0x7F;  // 32767 bytes claimed, far more than present
  expect_rejected(long_header, "truncated");
  auto huge_header = npy_image(2, kGoodDict, data);
  huge_header[8] = huge_header[9] = huge_header[10] = huge_header[11] = 0xFF;
  expect_rejected(huge_header, "limit");
}

TEST(Npy, RejectsBadHeaderDicts) {
  const auto data = float_bytes(nibble::testing::fresh_normal_floats(6, 3.0f));
  auto dict = [&](const std::string& d) { return npy_image(1, d, data); };
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }"), "Fortran");
  expect_rejected(dict("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }"), "big-endian");
  expect_rejected(dict("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"), "not supported");
  expect_rejected(dict("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }"), "not supported");
  expect_rejected(dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }"), "structured");
  expect_rejected(dict("{'fortran_order': False, 'shape': (2, 3), }"), "no 'descr'");
  expect_rejected(dict("{'descr': '<f4', 'shape': (2, 3), }"), "no 'fortran_order'");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, }"), "no 'shape'");
  expect_rejected(dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "twice");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }"), "unexpected key");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }"), "True or False");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"), "non-negative");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }"), "(n,)");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }"), "expected '('");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }"), "expected ','");
  expect_rejected(dict("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }"), "malformed");
  expect_rejected(dict("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }"), "expected ','");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk"), "after the header");
  expect_rejected(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }"),
                  "overflows");
  expect_rejected(npy_image(1, kGoodDict + "   ", data, /*raw=*/true), "newline");
  expect_rejected(npy_image(1, "{'descr': 'x\n", data, /*raw=*/true), "unterminated");
}

TEST(Npy, RejectsHeaderThatLiesAboutTheData) {
  const auto data = float_bytes(nibble::testing::fresh_normal_floats(6, 3.0f));
  auto truncated = npy_image(1, kGoodDict, data);
  truncated.pop_back();
  expect_rejected(truncated, "needs 24 data bytes but the file has 23");
  auto extra = npy_image(1, kGoodDict, data);
  extra.push_back(0);
  expect_rejected(extra, "but the file has 25");
  expect_rejected(npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data), "needs 32");
  // Byte size overflows 64 bits: must be caught before any multiplication wraps or allocation happens.
  expect_rejected(npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", data),
                  "needs more than");
  expect_rejected(npy_image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
                            data), "needs more than");
  // A zero dimension is a valid empty array even next to a huge one, but then there must be no data.
  expect_rejected(npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904), }", data),
                  "needs 0 data bytes");
}

TEST(Npy, ReadFileChecksSizesAndNames) {
  TempDir dir;
  EXPECT_THROW(read_npy(dir / "missing.npy"), std::runtime_error);
  const auto data = float_bytes(nibble::testing::fresh_normal_floats(6, 3.0f));
  auto truncated = npy_image(1, kGoodDict, data);
  truncated.resize(truncated.size() - 5);
  write_file_atomic(dir / "t.npy", truncated);
  try {
    read_npy(dir / "t.npy");
    ADD_FAILURE() << "truncated file accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("t.npy"), std::string::npos) << e.what();
  }
  write_file_atomic(dir / "short.npy", std::vector<uint8_t>{0x93, 'N'});
  EXPECT_THROW(read_npy(dir / "short.npy"), std::invalid_argument);
}

TEST(Npy, RefusesToWriteBf16) {
  Tensor t;
  t.dtype = DType::bf16;
  t.shape = {1};
  t.bytes = {0x80, 0x3F};
  EXPECT_THROW(encode_npy(t), std::invalid_argument);
}

TEST(TensorShape, AsMatrix) {
  const std::vector<float> v = nibble::testing::fresh_normal_floats(12, 3.0f);
  EXPECT_EQ(as_matrix(make_f32_tensor("a", {12}, v)).rows, 1);
  EXPECT_EQ(as_matrix(make_f32_tensor("a", {3, 4}, v)).cols, 4);
  // Rank 3 and more: leading dimensions fold into rows, as frameworks flatten a linear layer's input.
  const MatrixShape m3 = as_matrix(make_f32_tensor("a", {2, 3, 2}, v));
  EXPECT_EQ(m3.rows, 6);
  EXPECT_EQ(m3.cols, 2);
  const int64_t scalar[] = {7}, none[] = {0, 32}, no_cols[] = {4, 0};
  try {
    as_matrix(std::span<const int64_t>(scalar, 0), "'s.npy'");
    ADD_FAILURE() << "a scalar must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'s.npy' is a scalar"), std::string::npos) << e.what();
  }
  for (auto shape : {std::span<const int64_t>(none), std::span<const int64_t>(no_cols)}) {
    try {
      as_matrix(shape, "'e.npy'");
      ADD_FAILURE() << "an empty tensor must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'e.npy' is empty"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_f32_tensor("a", {5}, v), std::invalid_argument);
}
