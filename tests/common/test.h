/* Assertions for pcache's tests: each prints file, line, the expression
 * and both values, then aborts the test process (ctest runs each test as
 * its own process). */
#ifndef PCACHE_TESTS_TEST_H
#define PCACHE_TESTS_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#define TEST_FAIL_(...)                                                                            \
  do {                                                                                             \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                                \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    abort();                                                                                       \
  } while (0)

#define ASSERT_TRUE(x)                                                                             \
  do {                                                                                             \
    if (!(x))                                                                                      \
      TEST_FAIL_("assertion failed: %s", #x);                                                      \
  } while (0)

#define ASSERT_INT_OP_(a, op, b)                                                                   \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    if (!(a_ op b_))                                                                               \
      TEST_FAIL_("assertion failed: %s %s %s (%lld vs %lld)", #a, #op, #b, a_, b_);                \
  } while (0)

#define ASSERT_EQ(a, b) ASSERT_INT_OP_(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP_(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP_(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP_(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP_(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP_(a, >=, b)

/* A pcache call that must return 0; prints the code's name on failure. */
#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    int r_ = (expr);                                                                               \
    if (r_ != 0)                                                                                   \
      TEST_FAIL_("%s returned %d (%s: %s)", #expr, r_, pcache_err_name(r_), pcache_strerror(r_)); \
  } while (0)

/* A pcache call that must return exactly err. */
#define ASSERT_ERR(expr, err)                                                                      \
  do {                                                                                             \
    int r_ = (expr), e_ = (err);                                                                   \
    if (r_ != e_)                                                                                  \
      TEST_FAIL_("%s returned %d (%s), expected %d (%s)", #expr, r_, pcache_err_name(r_), e_,     \
                 pcache_err_name(e_));                                                             \
  } while (0)

#define ASSERT_VK(expr)                                                                            \
  do {                                                                                             \
    VkResult v_ = (expr);                                                                          \
    if (v_ != VK_SUCCESS)                                                                          \
      TEST_FAIL_("%s returned VkResult %d", #expr, (int)v_);                                       \
  } while (0)

#define ASSERT_STREQ(a, b)                                                                         \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                         \
      TEST_FAIL_("assertion failed: %s == %s (\"%s\" vs \"%s\")", #a, #b, a_ ? a_ : "(null)",     \
                 b_ ? b_ : "(null)");                                                              \
  } while (0)

#define ASSERT_MEMEQ(a, b, n)                                                                      \
  do {                                                                                             \
    if (memcmp((a), (b), (n)) != 0)                                                                \
      TEST_FAIL_("assertion failed: %s and %s differ in their first %zu bytes", #a, #b,           \
                 (size_t)(n));                                                                     \
  } while (0)

#endif
