/* A program through the layer ended by SIGTERM or SIGINT still leaves its
 * report (docs/layer.md, "Reports"): in PCACHE_LAYER_STATS_FILE and at the
 * daemon, with its upload, and it still dies of that signal. A program
 * with its own SIGTERM handler keeps it: the layer installs nothing over
 * it, and the program's handler is what runs. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer_util.h"
#include "test.h"
#include "vk.h"

static void own_handler(int sig) {
  (void)sig;
  _exit(42);
}

/* A child that builds one pipeline no other run builds (variant), says so
 * on ready, and waits to be signalled. own: install a SIGTERM handler of
 * its own first, and check that it is still its own after the device. */
static pid_t start_program(uint32_t variant, int own) {
  int ready[2];
  char c;
  pid_t pid;
  ASSERT_EQ(pipe(ready), 0);
  pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    test_vk vk;
    struct sigaction sa;
    close(ready[0]);
    if (own)
      signal(SIGTERM, own_handler);
    test_plain_program_pipeline(&vk, variant);
    sigaction(SIGTERM, NULL, &sa);
    if (own && sa.sa_handler != own_handler)
      _exit(4);
    if (write(ready[1], "r", 1) != 1)
      _exit(5);
    for (;;)
      pause();
  }
  close(ready[1]);
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  return pid;
}

static void killed_by(int sig, uint32_t variant) {
  layer_report r;
  int status;
  pid_t pid = start_program(variant, 0);
  ASSERT_EQ(kill(pid, sig), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  /* It ends as it would have without the layer: by the signal. */
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), sig);
  layer_report_read(&r);
  ASSERT_EQ(r.lines, 1);
  ASSERT_EQ(r.pipelines, 1);
  ASSERT_EQ(r.compiles, 1);
  ASSERT_EQ(r.uploaded, 1);
}

int main(void) {
  test_env env;
  layer_report r;
  int status;
  pid_t pid;
  layer_test_start(&env, "layer-signal");

  killed_by(SIGTERM, 30);
  killed_by(SIGINT, 31);
  /* The upload reached the daemon before the program died: a second run
   * of the same pipeline is a daemon hit. */
  pid = start_program(30, 0);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  layer_report_read(&r);
  ASSERT_EQ(r.daemon_hits, 1);
  ASSERT_EQ(r.compiles, 0);

  /* The program's own handler stays, and runs. */
  pid = start_program(32, 1);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 42);

  test_env_cleanup(&env);
  printf("test_layer_signal: ok\n");
  return 0;
}
