/* pcache-replay's VkDevice (replay_device.c): made as apps make theirs,
 * as far as a replayer can know it, for a replay's builds and for the
 * binary key --list-keys --binary reports (replay_vk.c). */
#ifndef PCACHE_REPLAY_REPLAY_DEVICE_H
#define PCACHE_REPLAY_REPLAY_DEVICE_H

#include <stdint.h>
#include <vulkan/vulkan.h>

/*
 * pcache__replay_make_device - a VkDevice on physical_device (whose
 * version, capped at the instance's, is api_version) with one graphics or
 * compute queue, every core feature the driver has except the robustness
 * ones, and the extensions a stored description may chain. binary: with
 * VK_KHR_pipeline_binary, VK_KHR_maintenance5 and their features, as the
 * layer enables them for a program (layer/features.c). Returns 0 or -EIO
 * (no such queue, the driver refused, or, for binary, the device lacks
 * either extension or feature).
 */
int pcache__replay_make_device(VkPhysicalDevice physical_device, uint32_t api_version, int binary,
                               VkDevice *ret_device);

#endif
