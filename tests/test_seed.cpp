// The per-test master seed of test_seed.hpp and the listener that prints it when a test fails.
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>  // program_invocation_name (glibc)
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

namespace nibble::testing {
namespace {

// SplitMix64's finaliser: distinct, well-mixed seeds for consecutive draw indices.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t master_from_env_or_fresh() {
  if (const char* replay = std::getenv("NIBBLE_TEST_SEED"); replay != nullptr && *replay != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(replay, &end, 10);
    if (end == nullptr || *end != '\0') {
      throw std::invalid_argument(std::string("NIBBLE_TEST_SEED='") + replay +
                                  "' is not a decimal seed; use the number a failed test printed");
    }
    return v;
  }
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

struct SeedState {
  std::mutex mu;
  uint64_t master = 0;
  std::atomic<uint64_t> draws{0};
  bool started = false;
  void restart() {
    std::lock_guard<std::mutex> lock(mu);
    master = master_from_env_or_fresh();
    draws = 0;
    started = true;
  }
  uint64_t next() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!started) {  // a draw outside any test (e.g. building test parameters)
        master = master_from_env_or_fresh();
        started = true;
      }
    }
    return mix(master + 0x9e3779b97f4a7c15ull * (draws.fetch_add(1) + 1));
  }
};

SeedState& state() {
  static SeedState s;
  return s;
}

// NIBBLE_TEST_SEED_LOG=<file>: each test that drew seeds appends "Suite.Name" to the file, so
// tools/flake_check.sh reruns only the randomized tests.
void log_drawing_test(const ::testing::TestInfo& info, uint64_t draws) {
  const char* path = std::getenv("NIBBLE_TEST_SEED_LOG");
  if (path == nullptr || *path == '\0' || draws == 0) return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s.%s\n", info.test_suite_name(), info.name());
    std::fclose(f);
  }
}

class SeedPrinter final : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { state().restart(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const uint64_t n = state().draws.load();
    log_drawing_test(info, n);
    if (info.result() == nullptr || !info.result()->Failed() || n == 0) return;
    std::printf("[ seed     ] %s.%s drew %llu random seed(s) from master %llu; replay: NIBBLE_TEST_SEED=%llu %s "
                "--gtest_filter=%s.%s\n",
                info.test_suite_name(), info.name(), static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(state().master), static_cast<unsigned long long>(state().master),
                program_invocation_name,
                info.test_suite_name(), info.name());
    std::fflush(stdout);
  }
};

// Registered once: while this file's statics initialise, or at an earlier draw made while other
// files' statics initialise. gtest owns the listener.
bool ensure_printer() {
  static const bool registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SeedPrinter);
    return true;
  }();
  return registered;
}
const bool kPrinterRegistered = ensure_printer();

}  // namespace

uint64_t fresh_seed() {
  ensure_printer();
  return state().next();
}

}  // namespace nibble::testing
