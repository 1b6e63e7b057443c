// The runs CSV: columns, metadata, quoting, and every kind of bad row.
#include <gtest/gtest.h>

#include <sstream>

#include "nibble/law/runs.hpp"

namespace nibble::law {
namespace {

std::vector<Run> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_runs_csv(in, "t.csv");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RunsCsv, ReadsColumnsInAnyOrderAndKeepsMetadata) {
  const auto runs = parse("# comment\nLoss,d,note,N,scheme\n3.25,2e9,\"lr=3e-4, warm\",1e8,bf16\n\n2.9,4e9,x,2e8,quartet\r\n");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].scheme, "bf16");
  EXPECT_EQ(runs[0].n, 1e8);
  EXPECT_EQ(runs[0].d, 2e9);
  EXPECT_EQ(runs[0].loss, 3.25);
  EXPECT_EQ(runs[0].metadata.at("note"), "lr=3e-4, warm");
  EXPECT_EQ(runs[0].line, 3);
  EXPECT_EQ(runs[1].scheme, "quartet");
  EXPECT_EQ(runs[1].loss, 2.9);
}

TEST(RunsCsv, MissingColumnsAreNamed) {
  const std::string e = error_of("scheme,n,tokens,loss\nbf16,1e8,2e9,3.2\n");
  EXPECT_NE(e.find("missing column(s) d"), std::string::npos) << e;
  const std::string e2 = error_of("model,params\nx,1\n");
  EXPECT_NE(e2.find("scheme, n, d, loss"), std::string::npos) << e2;
}

TEST(RunsCsv, NonPositiveOrUnparsableValuesAreRejectedWithTheLine) {
  for (const char* bad : {"0", "-1e8", "nan", "inf", "abc", "1e8x", ""}) {
    for (int col = 0; col < 3; ++col) {
      std::string vals[3] = {"1e8", "2e9", "3.1"};
      vals[col] = bad;
      const std::string e = error_of("scheme,n,d,loss\nbf16,1e8,2e9,3.3\nbf16," + vals[0] + "," + vals[1] + "," + vals[2] + "\n");
      EXPECT_NE(e.find("line 3"), std::string::npos) << bad << " col " << col << ": " << e;
    }
  }
}

TEST(RunsCsv, StructuralProblems) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\n").find("no runs"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\nbf16,1e8,2e9\n").find("3 fields"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\n,1e8,2e9,3\n").find("empty scheme"), std::string::npos);
  EXPECT_THROW(read_runs_csv("/nonexistent/runs.csv"), std::invalid_argument);
}

TEST(RunsCsv, ShippedExampleParses) {
  const auto runs = read_runs_csv("data/law/example_runs.csv");
  EXPECT_GE(runs.size(), 30u);
  EXPECT_TRUE(runs.front().metadata.count("tokens_per_param"));
}

}  // namespace
}  // namespace nibble::law
