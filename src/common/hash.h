/*
 * FNV-1a 64 (Fowler, Noll, Vo): the checksum of checkpoints and tune cache
 * files, and the problem hash.
 */
#ifndef PS_SRC_HASH_H
#define PS_SRC_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of no bytes: where every FNV-1a 64 starts. */
#define PS_FNV_OFFSET 0xcbf29ce484222325ull

/* FNV-1a 64 of data[n], continuing from h (start: PS_FNV_OFFSET). */
uint64_t ps_fnv1a(uint64_t h, const void *data, size_t n);

#endif /* PS_SRC_HASH_H */
