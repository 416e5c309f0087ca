/* A call into a driver function that may not keep the C calling
 * convention's promises. Fossilize found NVIDIA's vkGetPipelineKeyKHR
 * corrupting a callee-saved register (Fossilize commit de951cf): the
 * caller's variable kept in that register is then wrong after the call,
 * wherever the compiler put it. On x86-64 the call goes through a small
 * assembly trampoline that saves rbx, rbp and r12-r15 before it, puts
 * them back after it, and says whether any had changed; elsewhere it is
 * a plain call. */
#ifndef PCACHE_COMMON_GUARDED_CALL_H
#define PCACHE_COMMON_GUARDED_CALL_H

#include <stdint.h>

/* fn(a, b, c) for a function of three pointer arguments that returns a
 * 32-bit result (a VkResult). *ret_changed (may be NULL) is set to 1 when a
 * callee-saved register differed after the call (they are restored), else
 * 0; always 0 where the call is plain. */
int32_t pcache__guarded_call3(void *fn, void *a, void *b, void *c, int *ret_changed);

/* 1 where the trampoline is used (x86-64), 0 where the call is plain. */
int pcache__guarded_call_checks(void);

#endif
