/*
 * The launch shape of the persistent kernel before the heuristic
 * (ps_gpu_preferred_config): the shape the options force, else the tune
 * cache's entry for this GPU, build and problem-size class when it fits
 * the problem.
 */
#include <stddef.h>

#include "gpu.h"
#include "gpu_launch.h"
#include "log.h"
#include "problem.h"
#include "tune_cache.h"

/* The tune cache's shape for p, checked against this problem: 1 with c
 * and e filled, else 0 (the reason logged). path[len] receives the file. */
static int cache_shape(const ps_problem *p, const ps_options *o, int sms, ps_gpu_config *c,
                       ps_tune_entry *e, char *path, size_t len)
{
    ps_tune_key k;
    path[0] = '\0';
    if (ps_tune_key_current(p, o->precision, &k) != PS_CONVERGED)
        return 0;
    if (ps_tune_cache_path(&k, path, len) != PS_CONVERGED) {
        ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
               "no tune cache: neither PERSOLVE_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
        return 0;
    }
    if (ps_tune_cache_read(path, &k, e, o) != PS_TUNE_CACHE_OK)
        return 0;
    int segs = e->block / e->sb, min_segs = ps_gpu_min_segments(p);
    if (segs < min_segs) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this problem: its tiles of %d spins x %d segments "
               "break the relaxation bound (at least %d segments)",
               path, e->sb, segs, min_segs);
        return 0;
    }
    size_t smem = ps_gpu_dyn_smem(o->precision, e->sb, segs, e->block, p->nt);
    int fit = ps_gpu_max_blocks_per_sm(o->precision, e->regcap, e->block, smem);
    if (fit < e->blocks_per_sm) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this problem: %d blocks of %d threads with %zu bytes "
               "of shared memory do not fit on an SM (%d do)",
               path, e->blocks_per_sm, e->block, smem, fit);
        return 0;
    }
    c->block = e->block;
    c->sb = e->sb;
    c->segs = segs;
    c->regcap = e->regcap;
    c->grid = e->blocks_per_sm * sms;
    return 1;
}

int ps_gpu_preferred_config(const ps_problem *p, const ps_options *o, int sms, ps_gpu_config *c)
{
    if (c->grid || c->block || c->sb || c->segs || c->regcap)
        return PS_SHAPE_GIVEN;
    if (!o)
        return PS_SHAPE_HEURISTIC;
    if (o->gpu_block || o->gpu_spins_per_tile || o->gpu_max_registers || o->gpu_blocks_per_sm) {
        c->block = o->gpu_block;
        c->regcap = o->gpu_max_registers == 64;
        c->grid = o->gpu_blocks_per_sm * sms;
        if (o->gpu_spins_per_tile) {
            int tb = c->block ? c->block : PS_GPU_DEFAULT_THREADS; /* >= 32 >= SB */
            int min_segs = ps_gpu_min_segments(p);
            c->sb = o->gpu_spins_per_tile;
            c->segs = tb / c->sb;
            PS_RETURN_ERROR_IF(o, c->segs < min_segs, PS_ERR_OPTION,
                               "options.gpu_spins_per_tile: %d spins per tile leave %d time segments "
                               "in a block of %d threads; this problem's relaxation needs at least %d",
                               c->sb, c->segs, tb, min_segs);
        }
        return PS_SHAPE_FORCED;
    }
    if (!o->tune_cache)
        return PS_SHAPE_HEURISTIC;
    ps_tune_entry e;
    char path[1024];
    if (!cache_shape(p, o, sms, c, &e, path, sizeof path))
        return PS_SHAPE_HEURISTIC;
    ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
           "launch shape from the tune cache %s: block %d, %d spins x %d segments, %s, "
           "%d blocks per SM (measured %.4g ms per iteration on %s)",
           path, c->block, c->sb, c->segs, c->regcap ? "<= 64 registers" : "<= 128 registers",
           e.blocks_per_sm, 1e3 * e.seconds_per_iteration, e.date);
    return PS_SHAPE_CACHE;
}
