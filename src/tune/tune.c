/*
 * The launch shape of the persistent kernel before the heuristic
 * (ps_gpu_preferred_config: the shape the options force, else the tune
 * cache's), and its tuning (ps_gpu_tune): every candidate shape measured
 * on the problem, the fastest written to the tune cache.
 *
 * Candidates (README "Tuning"): block sizes 128, 256 and 512 threads; both
 * builds of the kernel, __launch_bounds__(512, 1) (up to 128 registers)
 * and (512, 2) (up to 64), the capped one only when the uncapped build
 * needs more than 64 registers (else the two are the same code); spins per
 * tile SB = 1, 2, ..., 32 with at least ps_gpu_min_segments(p) time
 * segments block / SB, and with no more segments than time steps (a
 * segment without a step does nothing) except at SB = 32; blocks per SM
 * min(resident, 2), the heuristic's rule, and, where more fit, all
 * resident blocks. Shapes that do not fit on an SM are not offered. The
 * heuristic's shape and the cached one are always among them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/stats.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "model/problem.h"
#include "opt/backend.h"
#include "persolve_gpu.h"
#include "tune/cache.h"
#include "tune/gpu_options.h"
#include "tune/tune.h"

/* The tune cache's shape for p, checked against this problem: 1 with c
 * and e filled, else 0 (the reason logged). path[len] receives the file. */
static int cache_shape(const ps_problem *p, const ps_options *o, int sms, ps_gpu_config *c,
                       ps_tune_entry *e, char *path, size_t len)
{
    ps_tune_key k;
    path[0] = '\0';
    if (ps_tune_key_current(p, o->precision, &k) != PS_CONVERGED || !ps_tune_cache_lookup(&k, e, path, len, o))
        return 0;
    int segs = e->block / e->sb, min_segs = ps_gpu_min_segments(p);
    if (segs < min_segs) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this problem: its tiles of %d spins x %d segments "
               "break the relaxation bound (at least %d segments)",
               path, e->sb, segs, min_segs);
        return 0;
    }
    size_t smem = ps_gpu_dyn_smem(o->precision, e->sb, segs, e->block, p->nt, ps_gpu_kernel_class(p));
    int fit = ps_gpu_max_blocks_per_sm(o->precision, e->regcap, ps_gpu_kernel_class(p), e->block, smem);
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
    const ps_gpu_options *g = ps_gpu_options_of(o);
    if (g->gpu_block || g->gpu_spins_per_tile || g->gpu_max_registers || g->gpu_blocks_per_sm || g->gpu_grid) {
        c->block = g->gpu_block;
        c->regcap = g->gpu_max_registers == 64;
        c->grid = g->gpu_grid ? g->gpu_grid : g->gpu_blocks_per_sm * sms;
        if (g->gpu_spins_per_tile) {
            int tb = c->block ? c->block : PS_GPU_DEFAULT_THREADS; /* >= 32 >= SB */
            int min_segs = ps_gpu_min_segments(p);
            c->sb = g->gpu_spins_per_tile;
            c->segs = tb / c->sb;
            PS_RETURN_ERROR_IF(o, c->segs < min_segs, PS_ERR_OPTION,
                               "options.gpu_spins_per_tile: %d spins per tile leave %d time segments "
                               "in a block of %d threads; this problem's relaxation needs at least %d",
                               c->sb, c->segs, tb, min_segs);
        }
        return PS_SHAPE_FORCED;
    }
    if (!g->tune_cache)
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

/* ------------------------------------------------------------------------ */
/* ps_gpu_tune                                                              */
/* ------------------------------------------------------------------------ */

void ps_tune_settings_default(ps_tune_settings *s)
{
    if (!s)
        return;
    memset(s, 0, sizeof *s);
    s->iterations = 20;
    s->repeats = 5;
    s->write_cache = 1;
}

void ps_tune_report_free(ps_tune_report *r)
{
    if (!r)
        return;
    free(r->shapes);
    r->shapes = NULL;
    r->count = 0;
}

static int check_settings(const ps_options *o, const ps_tune_settings *s)
{
    PS_RETURN_ERROR_IF(o, s->iterations < 1 || s->iterations > 1000000, PS_ERR_OPTION,
                       "tune settings.iterations: %d is outside 1..1000000", s->iterations);
    PS_RETURN_ERROR_IF(o, s->repeats < 1 || s->repeats > 1000, PS_ERR_OPTION,
                       "tune settings.repeats: %d is outside 1..1000", s->repeats);
    PS_RETURN_ERROR_IF(o, s->write_cache != 0 && s->write_cache != 1, PS_ERR_OPTION,
                       "tune settings.write_cache: %d is not 0 or 1", s->write_cache);
    for (size_t i = 0; i < sizeof s->reserved / sizeof s->reserved[0]; i++)
        PS_RETURN_ERROR_IF(o, s->reserved[i] != 0, PS_ERR_OPTION,
                           "tune settings.reserved[%zu] is not zero", i);
    return PS_CONVERGED;
}

int ps_tune_take(const ps_options *o, const ps_tune_settings *s_in, ps_options *opt, ps_tune_settings *s)
{
    int st = ps_take_options(o, opt);
    if (st)
        return st;
    if (s_in)
        *s = *s_in;
    else
        ps_tune_settings_default(s);
    return check_settings(opt, s);
}

int ps_tune_describe(const ps_tune_key *k, int *sms, char *device, size_t dlen, char *key_text, size_t klen,
                     char *path, size_t plen)
{
    ps_gpu_identity id;
    int st = ps_gpu_device_identity(0, &id);
    if (st)
        return st;
    *sms = id.sms;
    ps_gpu_device_describe(0, device, dlen);
    ps_tune_key_text(k, key_text, klen);
    if (ps_tune_cache_path(k, path, plen))
        path[0] = '\0';
    return PS_CONVERGED;
}

int ps_tune_store(const ps_problem *p, const ps_options *o, const ps_tune_key *k, ps_tune_entry *e,
                  const char *path)
{
    e->ns = (long long)p->ns;
    e->nt = (long long)p->nt;
    time_t now = time(NULL);
    struct tm tm_utc;
    gmtime_r(&now, &tm_utc);
    strftime(e->date, sizeof e->date, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
    PS_RETURN_ERROR_IF(o, !path[0], PS_ERR_FILE,
                       "no tune cache directory: neither PERSOLVE_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
    return ps_tune_cache_write(path, k, e, o);
}

typedef struct shape_list {
    ps_tune_report *r;
    size_t cap;
    const ps_problem *p;
    int precision, sms;
    ps_gpu_kernel_info ki[2]; /* per register cap */
} shape_list;

/* Add the shape (block, sb, regcap, blocks per SM) with its static figures,
 * unless it is there already. Returns its index, or -1 without memory or
 * when it does not fit on an SM. */
static int add_shape(shape_list *l, int block, int sb, int regcap, int bps)
{
    ps_tune_report *r = l->r;
    for (size_t i = 0; i < r->count; i++) {
        const ps_tune_shape *s = &r->shapes[i];
        if (s->block == block && s->spins_per_tile == sb && s->max_registers == (regcap ? 64 : 128) &&
            s->blocks_per_sm == bps)
            return (int)i;
    }
    size_t smem = ps_gpu_dyn_smem(l->precision, sb, block / sb, block, l->p->nt, ps_gpu_kernel_class(l->p));
    int fit = ps_gpu_max_blocks_per_sm(l->precision, regcap, ps_gpu_kernel_class(l->p), block, smem);
    if (fit < bps || bps < 1)
        return -1;
    if (r->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ps_tune_shape *v = realloc(r->shapes, cap * sizeof *v);
        if (!v)
            return -1;
        r->shapes = v;
        l->cap = cap;
    }
    ps_tune_shape *s = &r->shapes[r->count];
    memset(s, 0, sizeof *s);
    s->block = block;
    s->spins_per_tile = sb;
    s->segments = block / sb;
    s->max_registers = regcap ? 64 : 128;
    s->blocks_per_sm = bps;
    s->grid = bps * l->sms;
    s->registers = l->ki[regcap].registers;
    s->local_bytes = l->ki[regcap].local_bytes;
    s->static_smem = l->ki[regcap].static_smem;
    s->dynamic_smem = (int)smem;
    s->resident_blocks = fit;
    s->status = PS_RUNNING; /* not measured yet */
    s->seconds_per_iteration = NAN;
    s->f = NAN;
    return (int)r->count++;
}

static int add_config(shape_list *l, const ps_gpu_config *c)
{
    return add_shape(l, c->block, c->sb, c->regcap, c->grid / l->sms);
}

/* The candidate list (see the top of this file). */
static int enumerate(shape_list *l, int min_segs)
{
    for (int block = 128; block <= PS_GPU_MAX_THREADS; block *= 2) {
        for (int regcap = 0; regcap < 2; regcap++) {
            if (regcap && l->ki[0].registers <= 64)
                continue;
            for (int sb = 1; sb <= 32; sb *= 2) {
                int segs = block / sb;
                if (segs < min_segs || ((size_t)segs > l->p->nt && sb < 32))
                    continue;
                size_t smem = ps_gpu_dyn_smem(l->precision, sb, segs, block, l->p->nt, ps_gpu_kernel_class(l->p));
                int fit = ps_gpu_max_blocks_per_sm(l->precision, regcap, ps_gpu_kernel_class(l->p), block, smem);
                if (fit < 1)
                    continue;
                int bps = fit < PS_GPU_BLOCKS_PER_SM ? fit : PS_GPU_BLOCKS_PER_SM;
                if (add_shape(l, block, sb, regcap, bps) < 0 ||
                    (fit > bps && add_shape(l, block, sb, regcap, fit) < 0))
                    return PS_ERR_NO_MEMORY;
            }
        }
    }
    return PS_CONVERGED;
}

/* One warm-up run, then `repeats` timed runs of shape s from x0. t[repeats]
 * and x[2 nt] are scratch. Fills the measured fields of s. */
static void measure(const ps_problem *p, const ps_options *run, int repeats, const double *x0,
                    double *x, double *t, ps_tune_shape *s)
{
    ps_gpu_config cfg = {s->grid, s->block, s->spins_per_tile, s->segments, s->max_registers == 64};
    for (int i = -1; i < repeats; i++) {
        ps_result res;
        memset(&res, 0, sizeof res);
        memcpy(x, x0, ps_problem_nx(p) * sizeof *x);
        int st = ps_gpu_solve_config(p, run, &cfg, x, &res);
        int ok = (st >= 0 || st == PS_ERR_LINE_SEARCH) && res.history_len > 0;
        if (ok && i >= 0) {
            t[i] = res.kernel_seconds / (double)(res.iterations > 0 ? res.iterations : 1);
            s->iterations = res.iterations;
            s->evaluations = res.evaluations;
            s->f = res.f;
        }
        ps_result_free(&res);
        s->status = ok || st < 0 ? st : PS_ERR_GPU_LAUNCH;
        if (!ok)
            return;
    }
    s->seconds_per_iteration = ps_median(t, (size_t)repeats);
}

static int measured_ok(const ps_tune_shape *s)
{
    return (s->status >= 0 || s->status == PS_ERR_LINE_SEARCH) && isfinite(s->seconds_per_iteration) &&
           isfinite(s->f);
}

int ps_gpu_tune(const ps_problem *p, const ps_options *o, const ps_tune_settings *s_in,
                ps_tune_report *r)
{
    if (!r)
        return PS_ERR_NULL;
    memset(r, 0, sizeof *r);
    r->best = r->heuristic = r->cached = -1;
    if (!p)
        return PS_ERR_NULL;
    ps_options opt;
    ps_tune_settings s;
    ps_tune_key key;
    int st;
    if ((st = ps_tune_take(o, s_in, &opt, &s)) || (st = ps_gpu_usable(&opt)) ||
        (st = ps_tune_key_current(p, opt.precision, &key)) ||
        (st = ps_tune_describe(&key, &r->sms, r->device, sizeof r->device, r->cache_key, sizeof r->cache_key,
                               r->cache_path, sizeof r->cache_path)))
        return st;
    shape_list l;
    memset(&l, 0, sizeof l);
    l.r = r;
    l.p = p;
    l.precision = opt.precision;
    l.sms = r->sms;
    for (int regcap = 0; regcap < 2; regcap++)
        PS_RETURN_ERROR_IF(&opt, ps_gpu_kernel_attrs(opt.precision, regcap, ps_gpu_kernel_class(p), &l.ki[regcap]),
                           PS_ERR_GPU_UNSUPPORTED, "cannot read the kernel's attributes");

    /* the candidates, the heuristic's shape and the cached one */
    static const ps_gpu_options no_cache = {.tune_cache = 0}; /* nothing forced */
    ps_options plain = opt;
    plain.gpu = &no_cache;
    ps_gpu_config c = {0, 0, 0, 0, 0};
    if ((st = enumerate(&l, ps_gpu_min_segments(p))))
        goto fail;
    if ((st = ps_gpu_resolve_config(p, &plain, NULL, &c)))
        goto fail;
    r->heuristic = add_config(&l, &c);
    if (ps_gpu_options_of(&opt)->tune_cache) {
        ps_tune_entry e;
        char path[1024];
        memset(&c, 0, sizeof c);
        if (cache_shape(p, &opt, l.sms, &c, &e, path, sizeof path))
            r->cached = add_config(&l, &c);
    }
    if (r->heuristic < 0) {
        st = PS_ERR_NO_MEMORY;
        goto fail;
    }

    /* measure each */
    ps_options run = plain;
    run.max_iterations = s.iterations;
    run.max_evaluations = 0;
    run.time_limit = 0.0;
    run.gtol = 0.0;
    run.ftol = 0.0;
    run.progress = NULL;
    run.progress_user = NULL;
    size_t n = ps_problem_nx(p);
    double *x0 = malloc(n * sizeof *x0), *x = malloc(n * sizeof *x);
    double *t = malloc((size_t)s.repeats * sizeof *t);
    if (!x0 || !x || !t) {
        free(x0), free(x), free(t);
        st = PS_ERR_NO_MEMORY;
        goto fail;
    }
    ps_problem_x0(p, x0);
    for (size_t i = 0; i < r->count; i++) {
        ps_tune_shape *sh = &r->shapes[i];
        measure(p, &run, s.repeats, x0, x, t, sh);
        if (measured_ok(sh) &&
            (r->best < 0 || sh->seconds_per_iteration < r->shapes[r->best].seconds_per_iteration))
            r->best = (int)i;
        if (s.measured)
            s.measured(s.user, sh, i, r->count);
    }
    free(x0), free(x), free(t);
    PS_RETURN_ERROR_IF(&opt, r->best < 0, PS_ERR_GPU_LAUNCH, "no launch shape ran (see each shape's status)");

    /* the fastest into the cache */
    if (s.write_cache) {
        const ps_tune_shape *b = &r->shapes[r->best];
        ps_tune_entry e;
        memset(&e, 0, sizeof e);
        e.block = b->block;
        e.sb = b->spins_per_tile;
        e.regcap = b->max_registers == 64;
        e.blocks_per_sm = b->blocks_per_sm;
        e.seconds_per_iteration = b->seconds_per_iteration;
        if ((st = ps_tune_store(p, &opt, &key, &e, r->cache_path)))
            return st;
        r->cache_written = 1;
    }
    return PS_CONVERGED;
fail:
    ps_tune_report_free(r);
    return st;
}
