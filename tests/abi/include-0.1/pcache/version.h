/* version.h as 0.1.0 shipped it (generated then from include/pcache/version.h.in). */
#ifndef PCACHE_VERSION_H
#define PCACHE_VERSION_H

#define PCACHE_VERSION_MAJOR 0
#define PCACHE_VERSION_MINOR 1
#define PCACHE_VERSION_PATCH 0
#define PCACHE_VERSION_STRING "0.1.0"

/* The wire protocol version this build speaks (docs/protocol.md). */
#define PCACHE_PROTOCOL_VERSION 1

#endif
