#include "ctl_format.h"

#include <stdio.h>

void ctl_format_time(uint64_t when, time_t now, char *out, size_t out_size) {
  struct tm tm;
  time_t t = (time_t)when;
  if (when == 0) {
    snprintf(out, out_size, "never");
    return;
  }
  /* Recent times read best relative; a future time (clock skew between
   * machines after an import) is shown as it is. */
  if (now >= t && now - t < 60) {
    snprintf(out, out_size, "just now");
    return;
  }
  if (now >= t && now - t < 3600) {
    snprintf(out, out_size, "%lldm ago", (long long)((now - t) / 60));
    return;
  }
  if (now >= t && now - t < 86400) {
    snprintf(out, out_size, "%lldh ago", (long long)((now - t) / 3600));
    return;
  }
  if (!localtime_r(&t, &tm) || strftime(out, out_size, "%Y-%m-%d %H:%M", &tm) == 0)
    snprintf(out, out_size, "@%llu", (unsigned long long)when);
}

const char *ctl_vendor_name(uint32_t vendor_id, char *buf, size_t buf_size) {
  switch (vendor_id) {
  case 0x10de:
    return "NVIDIA";
  case 0x1002:
    return "AMD";
  case 0x8086:
    return "Intel";
  case 0x13b5:
    return "ARM";
  case 0x5143:
    return "Qualcomm";
  case 0x1010:
    return "ImgTec";
  case 0x10005: /* VK_VENDOR_ID_MESA: lavapipe, llvmpipe */
    return "Mesa";
  default:
    snprintf(buf, buf_size, "0x%04x", vendor_id);
    return buf;
  }
}

void ctl_format_driver_version(uint32_t vendor_id, uint32_t v, char *out, size_t out_size) {
  if (vendor_id == 0x10de)
    snprintf(out, out_size, "%u.%u.%u.%u", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff, v & 0x3f);
  else
    snprintf(out, out_size, "%u.%u.%u", v >> 22, (v >> 12) & 0x3ff, v & 0xfff);
}

const char *ctl_kind_name(uint32_t kind, char *buf, size_t buf_size) {
  switch (kind) {
  case 0:
    return "unspecified";
  case 1:
    return "graphics";
  case 2:
    return "compute";
  default:
    snprintf(buf, buf_size, "%u", kind);
    return buf;
  }
}
