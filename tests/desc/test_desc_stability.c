/* The same pipelines described in two processes, with other handle values
 * and the create infos at other addresses, hash the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "test.h"

#define LINE 80

static void describe_all(uint64_t base, uint64_t step, size_t pad, char out[FX_COUNT][LINE]) {
  fx_world w;
  fx_world_init(&w, base, step);
  for (int i = 0; i < FX_COUNT; i++) {
    pcache__desc_buf buf;
    fx_keys_text(&w, i, pad + 40 * (size_t)i, out[i], LINE, &buf);
    pcache__desc_buf_release(&buf);
  }
  fx_world_free(&w);
}

int main(int argc, char **argv) {
  char mine[FX_COUNT][LINE], theirs[FX_COUNT][LINE];
  int fds[2], status;
  pid_t pid;
  FILE *f;
  if (argc == 5 && strcmp(argv[1], "--child") == 0) {
    /* Move the heap along before anything is allocated. */
    void *junk = malloc(strtoul(argv[4], NULL, 0));
    describe_all(strtoull(argv[2], NULL, 0), strtoull(argv[3], NULL, 0),
                 strtoul(argv[4], NULL, 0), mine);
    for (int i = 0; i < FX_COUNT; i++)
      printf("%s\n", mine[i]);
    free(junk);
    return 0;
  }
  describe_all(0x10000, 8, 0, mine);
  ASSERT_EQ(pipe(fds), 0);
  pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl("/proc/self/exe", argv[0], "--child", "0x7f0000123000", "0x1008", "4099", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  f = fdopen(fds[0], "r");
  ASSERT_TRUE(f);
  for (int i = 0; i < FX_COUNT; i++) {
    ASSERT_TRUE(fgets(theirs[i], LINE, f));
    theirs[i][strcspn(theirs[i], "\n")] = '\0';
  }
  fclose(f);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int i = 0; i < FX_COUNT; i++) {
    if (strcmp(mine[i], theirs[i]) != 0)
      TEST_FAIL_("%s: %s here, %s in the other process", fx_names[i], mine[i], theirs[i]);
    printf("%-22s %s\n", fx_names[i], mine[i]);
  }
  /* And in this process again, at yet other handles and addresses. */
  describe_all(0xabc0000, 0x40, 333, theirs);
  for (int i = 0; i < FX_COUNT; i++)
    ASSERT_STREQ(mine[i], theirs[i]);
  return 0;
}
