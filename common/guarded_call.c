#include "guarded_call.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__ELF__)
/* System V: rdi = fn, rsi..rcx = a..c, r8 = ret_changed. The saved values
 * and ret_changed live in the trampoline's own frame, addressed from rsp,
 * which a callee that returns at all has kept: rbp may be the register it
 * broke. 72 bytes keep rsp 16-byte aligned at the call. */
__asm__(".text\n"
        ".globl pcache__guarded_call3_x86\n"
        ".hidden pcache__guarded_call3_x86\n"
        ".type pcache__guarded_call3_x86, @function\n"
        "pcache__guarded_call3_x86:\n"
        ".cfi_startproc\n"
        "  endbr64\n"
        "  subq $72, %rsp\n"
        ".cfi_adjust_cfa_offset 72\n"
        "  movq %rbx, 0(%rsp)\n"
        "  movq %rbp, 8(%rsp)\n"
        "  movq %r12, 16(%rsp)\n"
        "  movq %r13, 24(%rsp)\n"
        "  movq %r14, 32(%rsp)\n"
        "  movq %r15, 40(%rsp)\n"
        "  movq %r8, 48(%rsp)\n"
        "  movq %rdi, %rax\n"
        "  movq %rsi, %rdi\n"
        "  movq %rdx, %rsi\n"
        "  movq %rcx, %rdx\n"
        "  callq *%rax\n"
        "  movq %rbx, %rcx\n"
        "  xorq 0(%rsp), %rcx\n"
        "  movq %rbp, %rdx\n"
        "  xorq 8(%rsp), %rdx\n"
        "  orq %rdx, %rcx\n"
        "  movq %r12, %rdx\n"
        "  xorq 16(%rsp), %rdx\n"
        "  orq %rdx, %rcx\n"
        "  movq %r13, %rdx\n"
        "  xorq 24(%rsp), %rdx\n"
        "  orq %rdx, %rcx\n"
        "  movq %r14, %rdx\n"
        "  xorq 32(%rsp), %rdx\n"
        "  orq %rdx, %rcx\n"
        "  movq %r15, %rdx\n"
        "  xorq 40(%rsp), %rdx\n"
        "  orq %rdx, %rcx\n"
        "  movq 0(%rsp), %rbx\n"
        "  movq 8(%rsp), %rbp\n"
        "  movq 16(%rsp), %r12\n"
        "  movq 24(%rsp), %r13\n"
        "  movq 32(%rsp), %r14\n"
        "  movq 40(%rsp), %r15\n"
        "  movq 48(%rsp), %rdx\n"
        "  testq %rdx, %rdx\n"
        "  jz 1f\n"
        "  xorl %r8d, %r8d\n"
        "  testq %rcx, %rcx\n"
        "  setne %r8b\n"
        "  movl %r8d, (%rdx)\n"
        "1:\n"
        "  addq $72, %rsp\n"
        ".cfi_adjust_cfa_offset -72\n"
        "  retq\n"
        ".cfi_endproc\n"
        ".size pcache__guarded_call3_x86, .-pcache__guarded_call3_x86\n");

int32_t pcache__guarded_call3_x86(void *fn, void *a, void *b, void *c, int *ret_changed);

int32_t pcache__guarded_call3(void *fn, void *a, void *b, void *c, int *ret_changed) {
  return pcache__guarded_call3_x86(fn, a, b, c, ret_changed);
}

int pcache__guarded_call_checks(void) { return 1; }
#else
int32_t pcache__guarded_call3(void *fn, void *a, void *b, void *c, int *ret_changed) {
  int32_t (*f)(void *, void *, void *);
  /* Through memcpy: a function pointer from an object pointer. */
  memcpy(&f, &fn, sizeof f);
  if (ret_changed)
    *ret_changed = 0;
  return f(a, b, c);
}

int pcache__guarded_call_checks(void) { return 0; }
#endif
