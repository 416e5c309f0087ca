/* TO BE REMOVED (issue 31): the daemon's old spelling of the arena
 * (common/arena.h), for the three files whose rename waits on another
 * branch (ops_put.c, ops_replay.c, replay.c: they reach it through
 * replay.h). When that branch is merged: rename pcd_arena to
 * pcache__arena in them, delete this file and its include in replay.h. */
#ifndef PCD_ARENA_OLD_NAMES_H
#define PCD_ARENA_OLD_NAMES_H

#include "common/arena.h"

#define pcd_arena pcache__arena
#define pcd_arena_in pcache__arena_in
#define pcd_arena_alloc pcache__arena_alloc
#define pcd_arena_memdup pcache__arena_memdup
#define pcd_arena_strdup pcache__arena_strdup
#define pcd_arena_printf pcache__arena_printf
#define pcd_arena_grow pcache__arena_grow
#define pcd_arena_free pcache__arena_free

#endif
