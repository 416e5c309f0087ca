/* A set of app names, each once: the apps an Export's entries name (their
 * program records go in at its end) and the apps an Import stored entries
 * for (only those get an archive's program records). Append-only, found
 * through a pos_index over XXH3-64 of the name. */
#ifndef PCD_APP_SET_H
#define PCD_APP_SET_H

#include <stddef.h>

#include "pos_index.h"
#include "store.h"

typedef struct pcd_app_set {
  char (*apps)[PCD_MAX_APP + 1];
  size_t n, cap;
  pcd_pos_index index;
} pcd_app_set;

/* Adds app unless it is in already; "" and names over PCD_MAX_APP bytes
 * are left out (no entry can carry one). 0, or -ENOMEM with the set as it
 * was. */
int pcd_app_set_add(pcd_app_set *set, const char *app);
/* 1 when app is in the set. */
int pcd_app_set_has(const pcd_app_set *set, const char *app);
/* Frees what the set holds; a zeroed set again. */
void pcd_app_set_free(pcd_app_set *set);

#endif
