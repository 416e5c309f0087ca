/* The state hashes of the fixtures are pinned in golden.txt: a change to
 * the canonical form shows up here, and must come with a bump of
 * PCACHE_DESC_FORMAT_VERSION (docs/pipeline-desc.md). After an intended
 * change: test_desc_golden --update rewrites the file;
 * test_desc_golden --write-corpus DIR writes the fixtures' bytes as fuzz
 * seeds (tests/fuzz/corpus/desc). */
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "test.h"

int main(int argc, char **argv) {
  int update = argc > 1 && strcmp(argv[1], "--update") == 0;
  const char *corpus = argc > 2 && strcmp(argv[1], "--write-corpus") == 0 ? argv[2] : NULL;
  char lines[FX_COUNT][96];
  fx_world w;
  FILE *f;
  fx_world_init(&w, 0x5000, 16);
  for (int i = 0; i < FX_COUNT; i++) {
    pcache__desc_buf buf;
    char keys[64];
    fx_keys_text(&w, i, 0, keys, sizeof keys, &buf);
    snprintf(lines[i], sizeof(lines[i]), "%s %s", fx_names[i], keys);
    if (corpus) { /* seeds for tests/fuzz/corpus/desc */
      char path[512];
      snprintf(path, sizeof(path), "%s/%s.bin", corpus, fx_names[i]);
      f = fopen(path, "wb");
      ASSERT_TRUE(f);
      ASSERT_EQ(fwrite(buf.data, 1, buf.size, f), buf.size);
      ASSERT_EQ(fclose(f), 0);
    }
    pcache__desc_buf_release(&buf);
  }
  fx_world_free(&w);
  if (update) {
    f = fopen(PCACHE_DESC_GOLDEN, "w");
    ASSERT_TRUE(f);
    fprintf(f, "# name state_hash tier1_key (format version %d); regenerate with "
               "test_desc_golden --update\n",
            PCACHE_DESC_FORMAT_VERSION);
    for (int i = 0; i < FX_COUNT; i++)
      fprintf(f, "%s\n", lines[i]);
    ASSERT_EQ(fclose(f), 0);
    printf("wrote %s\n", PCACHE_DESC_GOLDEN);
    return 0;
  }
  f = fopen(PCACHE_DESC_GOLDEN, "r");
  ASSERT_TRUE(f);
  {
    char line[256];
    int n = 0, bad = 0;
    while (fgets(line, sizeof(line), f)) {
      line[strcspn(line, "\n")] = '\0';
      if (line[0] == '#' || !line[0])
        continue;
      ASSERT_LT(n, FX_COUNT);
      if (strcmp(line, lines[n]) != 0) {
        fprintf(stderr, "golden: want \"%s\"\n        got  \"%s\"\n", line, lines[n]);
        bad++;
      }
      n++;
    }
    fclose(f);
    ASSERT_EQ(n, FX_COUNT);
    if (bad)
      TEST_FAIL_("%d hashes differ from %s: if the canonical form changed on purpose, bump "
                 "PCACHE_DESC_FORMAT_VERSION and run test_desc_golden --update",
                 bad, PCACHE_DESC_GOLDEN);
  }
  printf("%d golden hashes match\n", FX_COUNT);
  return 0;
}
