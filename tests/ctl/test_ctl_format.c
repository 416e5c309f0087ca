/* pcachectl's output helpers: JSON that any parser takes whatever bytes it
 * is given, and times a person reads at a glance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "tools/ctl_format.h"
#include "tools/json.h"

static char *render(void (*fn)(ctl_json *)) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  ctl_json j;
  ASSERT_TRUE(f != NULL);
  ctl_json_init(&j, f);
  fn(&j);
  fclose(f);
  return buf;
}

static void doc_nested(ctl_json *j) {
  static const uint8_t key[3] = {0x01, 0xab, 0xff};
  ctl_json_object_begin(j);
  ctl_json_kv_string(j, "s", "a\"b\\c\n\t\x01\x7f");
  ctl_json_kv_uint(j, "u", 18446744073709551615ull);
  ctl_json_kv_int(j, "i", -5);
  ctl_json_kv_bool(j, "t", 1);
  ctl_json_kv_hex(j, "h", key, sizeof key);
  ctl_json_key(j, "empty");
  ctl_json_array_begin(j);
  ctl_json_array_end(j);
  ctl_json_key(j, "list");
  ctl_json_array_begin(j);
  ctl_json_object_begin(j);
  ctl_json_kv_string(j, "utf8", "caf\xc3\xa9 \xe2\x82\xac");
  ctl_json_object_end(j);
  ctl_json_string(j, "bad \xff\xc3 \xed\xa0\x80 \xc0\xaf");
  ctl_json_null(j);
  ctl_json_array_end(j);
  ctl_json_object_end(j);
  ctl_json_finish(j);
}

static void test_json(void) {
  char *out = render(doc_nested);
  static const char expected[] =
      "{\n"
      "  \"s\": \"a\\\"b\\\\c\\n\\t\\u0001\\u007f\",\n"
      "  \"u\": 18446744073709551615,\n"
      "  \"i\": -5,\n"
      "  \"t\": true,\n"
      "  \"h\": \"01abff\",\n"
      "  \"empty\": [],\n"
      "  \"list\": [\n"
      "    {\n"
      "      \"utf8\": \"caf\xc3\xa9 \xe2\x82\xac\"\n"
      "    },\n"
      "    \"bad \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\",\n"
      "    null\n"
      "  ]\n"
      "}\n";
  ASSERT_STREQ(out, expected);
  free(out);

  /* And a real parser agrees (python3 is part of the build environment). */
  {
    FILE *p;
    out = render(doc_nested);
    p = popen("python3 -m json.tool > /dev/null", "w");
    ASSERT_TRUE(p != NULL);
    fputs(out, p);
    ASSERT_EQ(pclose(p), 0);
    free(out);
  }
}

static void test_time(void) {
  char buf[64];
  time_t now = 1700000000;
  struct tm tm;
  char expected[64];
  ctl_format_time(0, now, buf, sizeof buf);
  ASSERT_STREQ(buf, "never");
  ctl_format_time((uint64_t)now - 5, now, buf, sizeof buf);
  ASSERT_STREQ(buf, "just now");
  ctl_format_time((uint64_t)now - 12 * 60 - 3, now, buf, sizeof buf);
  ASSERT_STREQ(buf, "12m ago");
  ctl_format_time((uint64_t)now - 3 * 3600 - 100, now, buf, sizeof buf);
  ASSERT_STREQ(buf, "3h ago");
  {
    time_t old = now - 40 * 86400;
    localtime_r(&old, &tm);
    strftime(expected, sizeof expected, "%Y-%m-%d %H:%M", &tm);
    ctl_format_time((uint64_t)old, now, buf, sizeof buf);
    ASSERT_STREQ(buf, expected);
  }
  /* A time in the future (another machine's clock) is shown as it is. */
  {
    time_t later = now + 3600;
    localtime_r(&later, &tm);
    strftime(expected, sizeof expected, "%Y-%m-%d %H:%M", &tm);
    ctl_format_time((uint64_t)later, now, buf, sizeof buf);
    ASSERT_STREQ(buf, expected);
  }
}

static void test_names(void) {
  char buf[32];
  ASSERT_STREQ(ctl_vendor_name(0x10de, buf, sizeof buf), "NVIDIA");
  ASSERT_STREQ(ctl_vendor_name(0x10005, buf, sizeof buf), "Mesa");
  ASSERT_STREQ(ctl_vendor_name(0xabcd, buf, sizeof buf), "0xabcd");
  ctl_format_driver_version(0x10de, (580u << 22) | (65u << 14) | (6u << 6), buf, sizeof buf);
  ASSERT_STREQ(buf, "580.65.6.0");
  ctl_format_driver_version(0x10005, (23u << 22) | (2u << 12) | 1u, buf, sizeof buf);
  ASSERT_STREQ(buf, "23.2.1");
  ASSERT_STREQ(ctl_kind_name(1, buf, sizeof buf), "graphics");
  ASSERT_STREQ(ctl_kind_name(2, buf, sizeof buf), "compute");
  ASSERT_STREQ(ctl_kind_name(9, buf, sizeof buf), "9");
  ASSERT_STREQ(ctl_stype_name(1000320002), "VkGraphicsPipelineLibraryCreateInfoEXT");
  ASSERT_STREQ(ctl_stype_name(16), "VkShaderModuleCreateInfo");
  ASSERT_TRUE(ctl_stype_name(1000999000) == NULL);
  ASSERT_TRUE(ctl_stype_name(0) == NULL);
}

int main(void) {
  setenv("TZ", "UTC", 1);
  tzset();
  test_json();
  test_time();
  test_names();
  printf("ok\n");
  return 0;
}
