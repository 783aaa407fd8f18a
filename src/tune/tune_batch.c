/*
 * The team shape of a GPU batch (ps_gpu_tune_batch): batches of copies of
 * one problem timed with each candidate block and team size, the fastest
 * written to the tune cache's batch entry for the problem's size class and
 * the batch's size class, and that entry read back when a batch starts
 * (ps_tune_cached_shape, opt/batch.c).
 *
 * Candidates (README "Tuning"): per block size (the forced one; else the
 * heuristic's, ps_tune_batch_block, and for the single-channel kernels the
 * other of their two) 1, 2, 4, ... blocks per team up to the batch
 * kernel's co-resident blocks and the heuristic's team size (the
 * co-resident blocks over the copies, with a floor:
 * ps_tune_team_heuristic); and the cached shape. With the cluster barrier
 * forced only teams of 2..8 blocks, the sizes a cluster can have.
 * A batch's time is the host's from ps_batch_start to the end of
 * ps_batch_wait: the set-ups depend on the team size (the start sets up
 * the problems the teams take first, the scheduler the others while the
 * kernel runs, and a team that finishes before the next problem is set up
 * waits for it), so the kernel's time alone misleads (README "Tuning").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/stats.h"
#include "cuda/batch.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "persolve_gpu.h"
#include "tune/cache.h"
#include "tune/gpu_options.h"
#include "tune/tune.h"

int ps_tune_cached_shape(const ps_problem *p, const ps_options *o, size_t problems, int sms, int *block,
                         ps_tune_entry *e, char *path, size_t len)
{
    ps_tune_key k;
    path[0] = '\0';
    if (ps_tune_key_batch(p, o->precision, (int)problems, &k) != PS_CONVERGED ||
        !ps_tune_cache_lookup(&k, e, path, len, o))
        return 0;
    /* the key has no block size: a team measured with other blocks says
     * nothing about forced ones */
    const ps_gpu_options *g = ps_gpu_options_of(o);
    if (g->gpu_block && e->block != g->gpu_block) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this batch: its team size was measured with blocks of %d threads, "
               "options.gpu_block forces %d",
               path, e->block, g->gpu_block);
        return 0;
    }
    const int fit = ps_gpu_batch_blocks_per_sm(o->precision, e->block, 0);
    if (fit < 1) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this batch: the batch kernel does not fit on an SM with its blocks of "
               "%d threads",
               path, e->block);
        return 0;
    }
    const int cluster = g->batch_team_barrier == PS_TEAM_BARRIER_CLUSTER;
    if (cluster && !ps_gpu_cluster_team_ok(e->team_blocks)) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this batch: teams of %d blocks cannot be thread-block clusters (2..%d)",
               path, e->team_blocks, PS_GPU_CLUSTER_MAX_BLOCKS);
        return 0;
    }
    if (e->team_blocks > fit * sms) {
        ps_log(o, PS_LOG_WARNING, __FILE__, __LINE__,
               "tune cache %s ignored for this batch: teams of %d blocks exceed the %d co-resident blocks",
               path, e->team_blocks, fit * sms);
        return 0;
    }
    *block = e->block;
    return e->team_blocks;
}

int ps_tune_batch_block(const ps_gpu_options *g, int single, size_t nt)
{
    if (g->gpu_block)
        return g->gpu_block;
    if (!single)
        return PS_GPU_DEFAULT_THREADS;
    /* clusters have at most 8 blocks: 128 threads would halve the team's
     * threads, a shape not measured */
    if (g->batch_team_barrier == PS_TEAM_BARRIER_CLUSTER)
        return PS_GPU_BATCH_SMALL_THREADS;
    return nt <= PS_GPU_BATCH_SHORT_NT ? PS_GPU_BATCH_SHORT_THREADS : PS_GPU_BATCH_SMALL_THREADS;
}

int ps_tune_batch_kernel_fit(const ps_options *o, int block, int *bps)
{
    *bps = ps_gpu_batch_blocks_per_sm(o->precision, block, 0);
    PS_RETURN_ERROR_IF(o, *bps < 1, PS_ERR_GPU_LAUNCH, "the batch kernel does not fit on an SM with %d threads",
                       block);
    return PS_CONVERGED;
}

int ps_tune_team_heuristic(int resident, size_t problems, int block, int single, size_t ns, int spins_per_tile)
{
    if (resident < 1)
        return 1;
    const size_t B = problems ? (size_t)resident / problems : (size_t)resident;
    size_t least = resident < 2 ? 1 : 2;
    if (single && block > 0) {
        const size_t sb = spins_per_tile > 0 ? (size_t)spins_per_tile : 32;
        size_t most = (size_t)(PS_TUNE_TEAM_SINGLE_THREADS / block);
        const size_t tiles = (ns + sb - 1) / sb;
        if (most > tiles)
            most = tiles;
        if (most > least)
            least = most;
    }
    if (least > (size_t)resident)
        least = (size_t)resident;
    return B < least ? (int)least : (int)B;
}

int ps_tune_team_default(const ps_gpu_options *g, int resident, size_t problems, int block, int single, size_t ns)
{
    const int t = ps_tune_team_heuristic(resident, problems, block, single, ns, g->gpu_spins_per_tile);
    if (g->batch_team_barrier == PS_TEAM_BARRIER_CLUSTER && t > PS_GPU_CLUSTER_MAX_BLOCKS)
        return PS_GPU_CLUSTER_MAX_BLOCKS;
    return t;
}

void ps_tune_batch_report_free(ps_tune_batch_report *r)
{
    if (!r)
        return;
    free(r->teams);
    r->teams = NULL;
    r->count = 0;
}

static int find_team(const ps_tune_batch_report *r, int block, int team_blocks)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->teams[i].block == block && r->teams[i].team_blocks == team_blocks)
            return (int)i;
    return -1;
}

/* Teams of team_blocks blocks of `block` threads among the candidates,
 * kept in increasing order of block, then of team size, unless they are
 * there already or a cluster (cluster 1) cannot have them. r->teams has
 * room. */
static void add_team(ps_tune_batch_report *r, int block, int team_blocks, int cluster)
{
    if (team_blocks < 1 || (cluster && !ps_gpu_cluster_team_ok(team_blocks)) || find_team(r, block, team_blocks) >= 0)
        return;
    size_t i = 0;
    while (i < r->count && (r->teams[i].block < block ||
                            (r->teams[i].block == block && r->teams[i].team_blocks < team_blocks)))
        i++;
    memmove(&r->teams[i + 1], &r->teams[i], (r->count - i) * sizeof *r->teams);
    ps_tune_team *t = &r->teams[i];
    memset(t, 0, sizeof *t);
    t->block = block;
    t->team_blocks = team_blocks;
    t->status = PS_RUNNING; /* not measured yet */
    t->seconds = NAN;
    t->seconds_per_iteration = NAN;
    r->count++;
}

/* The batches to time: `copies` copies of p from x0[copies][nx], options
 * o whose gpu options are g (batch_team_blocks set per candidate). */
typedef struct batch_run {
    const ps_problem *p;
    ps_options o;
    ps_gpu_options g;
    int copies;
    size_t nx;
    double *x0;
} batch_run;

static int has_iterates(int st)
{
    return st >= 0 || st == PS_ERR_LINE_SEARCH;
}

/* One batch of the copies in teams of t->team_blocks blocks of t->block
 * threads: t's status,
 * teams, iterations and evaluations, the batch's seconds and copy
 * 0's spins per tile. Returns 0 when every copy ran, else the status. */
static int run_batch(batch_run *br, ps_tune_team *t, double *seconds, int *sb)
{
    ps_batch *b = NULL;
    ps_batch_report rep;
    ps_gpu_options shape;
    int first = PS_CONVERGED;
    int64_t iters = 0, evals = 0;
    br->g.gpu_block = t->block;
    br->g.batch_team_blocks = t->team_blocks;
    int st = ps_batch_create(&br->o, &b);
    for (int k = 0; k < br->copies && !st; k++)
        st = ps_batch_add(b, br->p, br->x0 + (size_t)k * br->nx, NULL);
    const double t0 = ps_monotonic_seconds();
    if (!st)
        st = ps_batch_start(b);
    if (!st)
        st = ps_batch_wait(b, -1.0);
    const double wall = ps_monotonic_seconds() - t0;
    if (!st)
        st = ps_batch_progress(b, &rep);
    for (int k = 0; k < br->copies && !st; k++) {
        ps_result res;
        memset(&res, 0, sizeof res);
        const int rs = ps_batch_result(b, (size_t)k, &res, NULL);
        if (!has_iterates(rs)) {
            st = rs;
        } else {
            if (k == 0)
                first = rs;
            if (res.iterations > iters)
                iters = res.iterations;
            evals += res.evaluations;
        }
        ps_result_free(&res);
    }
    if (!st)
        st = ps_batch_shape(b, 0, &shape, NULL);
    ps_batch_free(b);
    t->status = st ? st : first;
    if (st)
        return st;
    t->teams = rep.teams;
    t->iterations = iters;
    t->evaluations = evals;
    *seconds = wall;
    *sb = shape.gpu_spins_per_tile;
    return PS_CONVERGED;
}

/* One warm-up batch, then `repeats` timed ones; samples[repeats] is
 * scratch. Fills the measured fields of t. */
static void measure(batch_run *br, int repeats, double *samples, ps_tune_team *t, int *sb)
{
    for (int i = -1; i < repeats; i++) {
        double seconds = NAN;
        if (run_batch(br, t, &seconds, sb))
            return;
        if (i >= 0)
            samples[i] = seconds;
    }
    t->seconds = ps_median(samples, (size_t)repeats);
    t->seconds_per_iteration = t->seconds / (double)(t->iterations > 0 ? t->iterations : 1);
}

int ps_gpu_tune_batch(const ps_problem *p, int copies, const ps_options *o, const ps_tune_settings *s_in,
                      ps_tune_batch_report *r)
{
    if (!r)
        return PS_ERR_NULL;
    memset(r, 0, sizeof *r);
    r->best = r->heuristic = r->cached = -1;
    r->copies = copies;
    if (!p)
        return PS_ERR_NULL;
    ps_options opt;
    ps_tune_settings s;
    ps_tune_key key;
    int st = ps_tune_take(o, s_in, &opt, &s);
    if (st)
        return st;
    if (!s_in)
        s.iterations = PS_TUNE_BATCH_ITERATIONS;
    PS_RETURN_ERROR_IF(&opt, copies < 1 || copies > PS_BATCH_MAX, PS_ERR_OPTION,
                       "tune copies: %d is outside 1..%d", copies, PS_BATCH_MAX);
    if ((st = ps_gpu_usable(&opt)) || (st = ps_tune_key_batch(p, opt.precision, copies, &key)) ||
        (st = ps_tune_describe(&key, &r->sms, r->device, sizeof r->device, r->cache_key, sizeof r->cache_key,
                               r->cache_path, sizeof r->cache_path)))
        return st;

    /* the block sizes: the forced one; else the heuristic's and, for the
     * single-channel kernels, the other of their two */
    const ps_gpu_options *g = ps_gpu_options_of(&opt);
    const int single = ps_gpu_channels(p) == 0;
    int want[2], blocks[2], bps[2], nwant = 0, nblocks = 0;
    want[nwant++] = ps_tune_batch_block(g, single, ps_problem_nt(p));
    if (!g->gpu_block && single)
        want[nwant++] = want[0] == PS_GPU_BATCH_SHORT_THREADS ? PS_GPU_BATCH_SMALL_THREADS
                                                              : PS_GPU_BATCH_SHORT_THREADS;
    /* a block that does not fit on an SM is left out (logged); none: that error */
    for (int j = 0; j < nwant; j++)
        if ((st = ps_tune_batch_kernel_fit(&opt, want[j], &bps[nblocks])) == PS_CONVERGED)
            blocks[nblocks++] = want[j];
    if (!nblocks)
        return st;
    ps_tune_entry e;
    char path[1024];
    int cached_block = 0;
    const int cached = g->tune_cache ? ps_tune_cached_shape(p, &opt, (size_t)copies, r->sms, &cached_block, &e,
                                                             path, sizeof path)
                                     : 0;

    /* the candidates: per block, teams of 1, 2, 4, ... blocks up to the
     * co-resident ones and the heuristic's; the cached shape */
    const int cluster = g->batch_team_barrier == PS_TEAM_BARRIER_CLUSTER;
    size_t cap = 1; /* the cached shape */
    for (int j = 0; j < nblocks; j++) {
        cap++; /* the heuristic's team */
        for (int t = 1; t <= bps[j] * r->sms; t *= 2)
            cap++;
    }
    batch_run br;
    memset(&br, 0, sizeof br);
    br.nx = ps_problem_nx(p);
    r->teams = malloc(cap * sizeof *r->teams);
    br.x0 = malloc((size_t)copies * br.nx * sizeof *br.x0);
    double *samples = malloc((size_t)s.repeats * sizeof *samples);
    if (!r->teams || !br.x0 || !samples) {
        free(br.x0), free(samples);
        ps_tune_batch_report_free(r);
        return PS_ERR_NO_MEMORY;
    }
    int heuristic = 0;
    for (int j = 0; j < nblocks; j++) {
        const int resident = bps[j] * r->sms;
        for (int t = 1; t <= resident; t *= 2)
            add_team(r, blocks[j], t, cluster);
        const int h = ps_tune_team_default(g, resident, (size_t)copies, blocks[j], single, ps_problem_ns(p));
        add_team(r, blocks[j], h, cluster);
        if (blocks[j] == want[0])
            heuristic = h;
    }
    if (cached)
        add_team(r, cached_block, cached, cluster);
    r->heuristic = heuristic ? find_team(r, want[0], heuristic) : -1;
    r->cached = cached ? find_team(r, cached_block, cached) : -1;

    /* the copies (as persolve bench --batch makes them) and their options */
    ps_problem_x0(p, br.x0);
    for (int k = 1; k < copies; k++)
        for (size_t i = 0; i < br.nx; i++)
            br.x0[(size_t)k * br.nx + i] = br.x0[i] * (1.0 + 0.01 * (double)k);
    br.p = p;
    br.copies = copies;
    br.g = *g;
    br.o = opt;
    br.o.gpu = &br.g;
    br.o.backend = PS_BACKEND_GPU;
    br.o.max_iterations = s.iterations;
    br.o.max_evaluations = 0;
    br.o.time_limit = 0.0;
    br.o.gtol = 0.0;
    br.o.ftol = 0.0;
    br.o.progress = NULL;
    br.o.progress_user = NULL;

    /* measure each */
    int best_sb = 0;
    for (size_t i = 0; i < r->count; i++) {
        ps_tune_team *t = &r->teams[i];
        int sb = 0;
        measure(&br, s.repeats, samples, t, &sb);
        if (has_iterates(t->status) && isfinite(t->seconds) &&
            (r->best < 0 || t->seconds < r->teams[r->best].seconds)) {
            r->best = (int)i;
            best_sb = sb;
        }
    }
    free(br.x0), free(samples);
    PS_RETURN_ERROR_IF(&opt, r->best < 0, PS_ERR_GPU_LAUNCH, "no team shape ran (see each shape's status)");

    /* the fastest into the cache */
    if (s.write_cache) {
        const ps_tune_team *b = &r->teams[r->best];
        memset(&e, 0, sizeof e);
        e.block = b->block;
        e.sb = best_sb;
        e.regcap = 0;
        e.blocks_per_sm = ps_gpu_batch_blocks_per_sm(opt.precision, b->block, 0);
        e.team_blocks = b->team_blocks;
        e.seconds_per_iteration = b->seconds_per_iteration;
        if ((st = ps_tune_store(p, &opt, &key, &e, r->cache_path)))
            return st;
        r->cache_written = 1;
    }
    return PS_CONVERGED;
}
