// The sanitizer build is real: built with SP_SANITIZE (make test-asan), this file is instrumented
// like the engine's libraries, and a heap overflow and a signed overflow end the process with the
// sanitizer's report. Outside that build the tests are skipped. If the sanitizer flags ever went
// missing from the build, these tests would fail instead of every other test passing vacuously.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(Sanitizers, HeapOverflowIsReported) {
  if (!kSanitized) GTEST_SKIP() << "not the sanitizer build";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        volatile size_t n = 16;
        char* p = static_cast<char*>(std::malloc(n));
        volatile char c = p[n];  // one past the end
        (void)c;
        std::free(p);
      },
      "heap-buffer-overflow");
}

TEST(Sanitizers, SignedOverflowIsReported) {
  if (!kSanitized) GTEST_SKIP() << "not the sanitizer build";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        volatile int x = INT_MAX;
        volatile int y = x + 1;
        (void)y;
      },
      "signed integer overflow");
}

}  // namespace
