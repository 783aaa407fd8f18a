/*
 * Checkpoint blobs of a suspended CPU driver (opt/driver.h): a header that
 * says what the state belongs to, the state, and a checksum.
 *
 * Layout (native byte order and type sizes, both recorded and checked):
 *   header   magic "PSCKPT\0\0", version, byte-order mark, type sizes,
 *            n, memory, ns, nt, problem hash, precision and the other
 *            algorithmic options, solve time, trial f, history rows,
 *            total length; from version 2 the penalty rounds' settings
 *            (max_rounds, constraint_tol, penalty_mu)
 *   payload  ps_solver; x, g, xt, gt, d [n]; S, Y [m][n]; history rows
 *   trailer  FNV-1a 64 of every byte before it
 */
#ifndef PS_SRC_CHECKPOINT_H
#define PS_SRC_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "opt/driver.h"
#include "persolve.h"

#define PS_CHECKPOINT_VERSION 2u
/* Version 1 (persolve 0.1 and 0.2): no penalty rounds; its solver state is
 * the prefix PS_SOLVER_SIZE_V1 of today's, its history rows lack the
 * round. It is still read (as a run without penalty constraints). */

/* Hash of everything that defines F: sizes, scalars and every array but
 * the start pulse (absent optional arrays hash differently from zeros). */
uint64_t ps_problem_hash(const ps_problem *p);

/*
 * Serialize a driver at a phase boundary (o: the options it runs with).
 * *buf from malloc. PS_ERR_NO_MEMORY or 0.
 */
int ps_checkpoint_save(const ps_problem *p, const ps_options *o,
                       const ps_driver *c, void **buf, size_t *len);

/*
 * Validate buf[len] against p and o and restore it into c, which
 * ps_driver_init set up for p and o. The limits of o replace the
 * checkpoint's (a state finished by a limit that o lifts, or cancelled, is
 * reopened; a trial at a limit of o already reached is finished there).
 * PS_ERR_CHECKPOINT with the reason logged through o, or
 * PS_ERR_NO_MEMORY, or 0.
 */
int ps_checkpoint_load(const ps_problem *p, const ps_options *o,
                       const void *buf, size_t len, ps_driver *c);

#endif /* PS_SRC_CHECKPOINT_H */
