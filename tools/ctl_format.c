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

/* The structures the describer refuses most often: the ones real programs
 * chain (DXVK, VKD3D-Proton, Zink, engines) that pcache does not describe
 * (yet). Numbers from the Vulkan registry, not the installed headers,
 * which may be older than the program that chained them. */
static const struct {
  uint32_t stype;
  const char *name;
} stype_names[] = {
    {16, "VkShaderModuleCreateInfo"}, /* chained in a stage: no module object */
    {1000018000, "VkPipelineRasterizationStateRasterizationOrderAMD"},
    {1000044008, "VkAttachmentSampleCountInfoAMD"},
    {1000068000, "VkPipelineRobustnessCreateInfoEXT"},
    {1000099001, "VkPipelineDiscardRectangleStateCreateInfoEXT"},
    {1000143002, "VkPipelineSampleLocationsStateCreateInfoEXT"},
    {1000148002, "VkPipelineColorBlendAdvancedStateCreateInfoEXT"},
    {1000183000, "VkPipelineCompilerControlCreateInfoAMD"},
    {1000226001, "VkPipelineFragmentShadingRateStateCreateInfoKHR"},
    {1000232001, "VkRenderingAttachmentLocationInfoKHR"},
    {1000232002, "VkRenderingInputAttachmentIndexInfoKHR"},
    {1000290000, "VkPipelineLibraryCreateInfoKHR"},
    {1000320002, "VkGraphicsPipelineLibraryCreateInfoEXT"},
    {1000462002, "VkPipelineShaderStageModuleIdentifierCreateInfoEXT"},
    {1000470005, "VkPipelineCreateFlags2CreateInfoKHR"},
};

const char *ctl_stype_name(uint32_t stype) {
  for (size_t i = 0; i < sizeof stype_names / sizeof stype_names[0]; i++)
    if (stype_names[i].stype == stype)
      return stype_names[i].name;
  return NULL;
}
