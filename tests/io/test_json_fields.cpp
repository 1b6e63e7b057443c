// Typed field reads: absent optional fields give the fallback, present ones of the wrong type (drawn at
// random) are refused naming "<where>.<key>", whole numbers outside their range or fractional are
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "nibble/io/json_fields.hpp"
#include "test_seed.hpp"

namespace fields = nibble::io::json_fields;

namespace {

// A value that is none of the types in `not_these` ("string", "number", "boolean").
nlohmann::json wrong_value(std::mt19937_64& rng, const std::string& not_these) {
  const nlohmann::json all[] = {nullptr,
                                nlohmann::json::array({1, 2}),
                                nlohmann::json::object({{"a", 1}}),
                                nlohmann::json("s" + std::to_string(rng() % 100)),
                                nlohmann::json(static_cast<double>(rng() % 977) / 3),
                                nlohmann::json(rng() % 2 == 0)};
  for (;;) {
    const nlohmann::json& v = all[rng() % std::size(all)];
    if (not_these.find(v.type_name()) == std::string::npos) return v;
  }
}

template <class F>
void expect_refusal_naming(const std::string& needle, F&& read) {
  try {
    read();
    ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(JsonFields, OptionalFieldsFallBackWhenAbsentAndRefuseTheWrongType) {
  auto rng = nibble::testing::fresh_rng();
  const std::string where = "file 'x.json': items[" + std::to_string(rng() % 9) + "]";
  const double number = static_cast<double>(rng() % 100000) / 8;
  const std::string text = "t" + std::to_string(rng());
  const nlohmann::json j = {{"n", number}, {"s", text}, {"b", true}, {"c", 1 + rng() % 1000}};
  EXPECT_EQ(fields::number_or(j, "n", -1, where), number);
  EXPECT_EQ(fields::number_or(j, "absent", -2.5, where), -2.5);
  EXPECT_EQ(fields::text_or(j, "s", "fallback", where), text);
  EXPECT_EQ(fields::text_or(j, "absent", "fallback", where), "fallback");
  EXPECT_TRUE(fields::flag_or(j, "b", false, where));
  EXPECT_TRUE(fields::flag_or(j, "absent", true, where));
  EXPECT_EQ(fields::count_or(j, "c", 7, where), j["c"].get<int64_t>());
  EXPECT_EQ(fields::count_or(j, "absent", 7, where), 7);
  EXPECT_EQ(fields::text(j, "s", where), text);
  EXPECT_EQ(fields::number(j, "n", where), number);
  for (int trial = 0; trial < 16; ++trial) {
    nlohmann::json bad = j;
    bad["n"] = wrong_value(rng, "number");
    bad["s"] = wrong_value(rng, "string");
    bad["b"] = wrong_value(rng, "boolean");
    SCOPED_TRACE(bad.dump());
    expect_refusal_naming(where + ".n", [&] { (void)fields::number_or(bad, "n", 0, where); });
    expect_refusal_naming(where + ".n", [&] { (void)fields::number(bad, "n", where); });
    expect_refusal_naming(where + ".s", [&] { (void)fields::text_or(bad, "s", "", where); });
    expect_refusal_naming(where + ".s", [&] { (void)fields::text(bad, "s", where); });
    expect_refusal_naming(where + ".b", [&] { (void)fields::flag_or(bad, "b", false, where); });
  }
  expect_refusal_naming(where + ".absent", [&] { (void)fields::text(j, "absent", where); });
  expect_refusal_naming(where + ".absent", [&] { (void)fields::number(j, "absent", where); });
}

TEST(JsonFields, WholeNumbersStayInRange) {
  auto rng = nibble::testing::fresh_rng();
  const int max = 2 + static_cast<int>(rng() % 5000);
  const int ok = 1 + static_cast<int>(rng() % static_cast<uint64_t>(max));
  EXPECT_EQ(fields::whole_number({{"k", ok}}, "k", max, "w"), ok);
  EXPECT_EQ(fields::whole_number({{"k", static_cast<double>(max)}}, "k", max, "w"), max);
  const double bad[] = {0.0, -1.0 - static_cast<double>(rng() % 50), static_cast<double>(max) + 1,
                        static_cast<double>(ok) + 0.5, std::ldexp(1.0, 31 + static_cast<int>(rng() % 900))};
  for (double v : bad) expect_refusal_naming("w.k", [&] { (void)fields::whole_number({{"k", v}}, "k", max, "w"); });
  expect_refusal_naming("w.k", [&] { (void)fields::whole_number({{"k", "12"}}, "k", max, "w"); });
  expect_refusal_naming("w.k", [&] { (void)fields::count_or({{"k", -3}}, "k", 1, "w"); });
}

TEST(JsonFields, RequireObjectNamesWhatItFound) {
  expect_refusal_naming("top: expected a JSON object, found array",
                        [] { fields::require_object(nlohmann::json::array(), "top"); });
  EXPECT_NO_THROW(fields::require_object(nlohmann::json::object(), "top"));
}
