/* A program built only against an installed pcache (headers, pcache.pc or
 * find_package(pcache)): proves the installed tree is self-sufficient. */
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

int main(void) {
  pcache_client_options opts = {.app_name = "pcache-install-test", .disable_daemon = 1};
  pcache_client *client = NULL;
  int r;

  if (strcmp(pcache_version_string(), PCACHE_VERSION_STRING) != 0) {
    fprintf(stderr, "header says %s, library says %s\n", PCACHE_VERSION_STRING,
            pcache_version_string());
    return 1;
  }
  r = pcache_client_open(&opts, &client);
  if (r != 0) {
    fprintf(stderr, "pcache_client_open: %s (%s)\n", pcache_err_name(r), pcache_strerror(r));
    return 1;
  }
  if (pcache_client_connected(client) != 0) {
    fprintf(stderr, "a disabled client says it is connected\n");
    pcache_client_close(client);
    return 1;
  }
  pcache_client_close(client);
  printf("pcache %s ok\n", pcache_version_string());
  return 0;
}
