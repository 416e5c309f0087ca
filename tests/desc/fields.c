/* See fields.h. */
#include "fields.h"

#include <string.h>

#include "test.h"

void fx_mutate(fx_pipeline *p, const field *f) {
  uint8_t *a = (uint8_t *)p + f->off;
  uint32_t u;
  int32_t i;
  float x;
  uint16_t s;
  switch (f->type) {
  case U32:
  case B32:
    memcpy(&u, a, 4);
    u = f->type == B32 ? !u : u ^ 1;
    memcpy(a, &u, 4);
    break;
  case DEC:
    memcpy(&u, a, 4);
    ASSERT_GT(u, 0);
    u--;
    memcpy(a, &u, 4);
    break;
  case ORBIT:
    memcpy(&u, a, 4);
    u |= f->arg;
    memcpy(a, &u, 4);
    break;
  case I32:
    memcpy(&i, a, 4);
    i++;
    memcpy(a, &i, 4);
    break;
  case F32:
    memcpy(&x, a, 4);
    x += 0.5f;
    memcpy(a, &x, 4);
    break;
  case U16:
    memcpy(&s, a, 2);
    s ^= 1;
    memcpy(a, &s, 2);
    break;
  }
}

static const char *current = "(base)";

pcache__hash fx_hash_of(const fx_pipeline *p, const fx_world *w) {
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  int r;
  pcache__desc_buf_init(&buf);
  r = fx_describe(p, w, &buf, &keys);
  if (r != 0)
    TEST_FAIL_("describing with %s changed: %s", current, pcache_err_name(r));
  pcache__desc_buf_release(&buf);
  return keys.state_hash;
}

int fx_run(const fx_world *w, int fixture, const field *fields, size_t n, int expect_change) {
  fx_pipeline *p = fx_make(w, fixture, 0);
  pcache__hash h0 = fx_hash_of(p, w);
  fx_free(p);
  for (size_t i = 0; i < n; i++) {
    pcache__hash h;
    p = fx_make(w, fixture, 0);
    fx_mutate(p, &fields[i]);
    current = fields[i].name;
    h = fx_hash_of(p, w);
    current = "(base)";
    if (pcache__hash_equal(&h, &h0) == expect_change)
      TEST_FAIL_("%s: changing %s %s the hash", fx_names[fixture], fields[i].name,
                 expect_change ? "did not change" : "changed");
    fx_free(p);
  }
  return (int)n;
}
