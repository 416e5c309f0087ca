/* Sizes and durations as written on command lines. */
#include <errno.h>

#include "common/parse.h"
#include "test.h"

static uint64_t size_of(const char *s) {
  uint64_t v = 0;
  ASSERT_OK(pcache__parse_size(s, &v));
  return v;
}

static uint64_t secs_of(const char *s) {
  uint64_t v = 0;
  ASSERT_OK(pcache__parse_duration(s, &v));
  return v;
}

int main(void) {
  uint64_t v;
  char buf[32];
  ASSERT_EQ(size_of("1073741824"), 1073741824ull);
  ASSERT_EQ(size_of("64K"), 65536);
  ASSERT_EQ(size_of("512M"), 512ull << 20);
  ASSERT_EQ(size_of("1G"), 1ull << 30);
  ASSERT_EQ(size_of("2GiB"), 2ull << 30);
  ASSERT_EQ(size_of("1.5G"), 3ull << 29);
  ASSERT_EQ(size_of("0"), 0);
  ASSERT_ERR(pcache__parse_size("", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_size("-1", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_size("12Q", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_size("G", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_size("99999999999T", &v), -ERANGE);

  ASSERT_EQ(secs_of("90"), 90);
  ASSERT_EQ(secs_of("90s"), 90);
  ASSERT_EQ(secs_of("15m"), 900);
  ASSERT_EQ(secs_of("12h"), 43200);
  ASSERT_EQ(secs_of("30d"), 2592000);
  ASSERT_EQ(secs_of("2w"), 1209600);
  ASSERT_ERR(pcache__parse_duration("soon", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_duration("5y", &v), -EINVAL);
  /* Durations are compared with times in microseconds: one that does not
   * fit in them is refused, never wrapped into a short one (issue 12). */
  ASSERT_EQ(secs_of("18446744073709"), PCACHE_DURATION_MAX_S);
  ASSERT_ERR(pcache__parse_duration("18446744073710", &v), -ERANGE);
  ASSERT_ERR(pcache__parse_duration("213503983d", &v), -ERANGE);
  /* Less than a second would be 0 seconds: "older than nothing". */
  ASSERT_ERR(pcache__parse_duration("0.5s", &v), -EINVAL);
  ASSERT_ERR(pcache__parse_duration("0.001", &v), -EINVAL);
  ASSERT_OK(pcache__parse_duration("1.5s", &v));
  ASSERT_EQ(v, 1);
  ASSERT_ERR(pcache__parse_duration("30600000w", &v), -ERANGE);
  ASSERT_ERR(pcache__parse_duration("1e300", &v), -ERANGE);

  pcache__format_size(812, buf, sizeof buf);
  ASSERT_STREQ(buf, "812 B");
  pcache__format_size(20480, buf, sizeof buf);
  ASSERT_STREQ(buf, "20.0 KiB");
  pcache__format_duration(45, buf, sizeof buf);
  ASSERT_STREQ(buf, "45s");
  pcache__format_duration(3 * 3600 + 5 * 60, buf, sizeof buf);
  ASSERT_STREQ(buf, "3h 5m");
  return 0;
}
