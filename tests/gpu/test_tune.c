/*
 * Tuning on the GPU (ps_gpu_tune, the tune cache): every shape tune offers
 * launches and gives a finite f; its registers, spills and shared memory
 * are the kernel's, its resident blocks per SM are what
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor says for the kernel build
 * with the shape's exact dynamic shared memory, asked here, and within the
 * SM's limits read from the runtime, and grids of all resident blocks do
 * launch cooperatively; the cache round-trips and
 * solve_persistent uses it; forced shapes win over the cache; a corrupt,
 * truncated, stale or unfitting entry is ignored with the reason logged.
 * The team size of a batch (ps_gpu_tune_batch): every candidate runs, the
 * fastest is written to the cache's batch entry and a batch of that many
 * problems of that class takes it. The cache is a fresh directory of this
 * test (PERSOLVE_CACHE_DIR). Exits 77 without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "gpu_suite.h"
#include "persolve.h"
#include "persolve_gpu.h"
#include "test_util.h"
#include "tune/cache.h"

/* ---- the log ---------------------------------------------------------- */

static char logs[64][600];
static int nlogs;

static void capture(void *user, int level, const char *file, int line, const char *msg)
{
    (void)user;
    (void)file;
    (void)line;
    if (nlogs < 64)
        snprintf(logs[nlogs++], sizeof logs[0], "%d %s", level, msg);
}

static ps_options gpu_opts(ps_precision prec)
{
    ps_options o;
    ps_options_default(&o);
    o.backend = PS_BACKEND_GPU;
    o.precision = prec;
    o.log = capture;
    nlogs = 0;
    return o;
}

/* A message at `level` that holds both needles was logged. */
static int logged(int level, const char *a, const char *b)
{
    char lv[8];
    snprintf(lv, sizeof lv, "%d ", level);
    for (int i = 0; i < nlogs; i++)
        if (!strncmp(logs[i], lv, strlen(lv)) && strstr(logs[i], a) && (!b || strstr(logs[i], b)))
            return 1;
    printf("no level-%d message with \"%s\"%s%s%s; the log:\n", level, a, b ? " and \"" : "", b ? b : "",
           b ? "\"" : "");
    for (int i = 0; i < nlogs; i++)
        printf("  %s\n", logs[i]);
    return 0;
}

static int any_logged(const char *needle)
{
    for (int i = 0; i < nlogs; i++)
        if (strstr(logs[i], needle))
            return 1;
    return 0;
}

static int device_attr(enum cudaDeviceAttr a)
{
    int v = 0;
    assert_int_equal(cudaDeviceGetAttribute(&v, a, 0), cudaSuccess);
    return v;
}

/* cudaOccupancyMaxActiveBlocksPerMultiprocessor on the kernel build itself. */
static int occupancy_api(int prec, int regcap, int kclass, int block, size_t dyn)
{
    const void *k = ps_gpu_kernel_ptr(prec, regcap, kclass);
    int n = -1;
    assert_non_null(k);
    assert_int_equal(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn),
                     cudaSuccess);
    assert_int_equal(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, block, dyn), cudaSuccess);
    return n;
}

static ps_problem *preset(const char *spec)
{
    ps_problem *p = NULL;
    char err[256];
    assert_int_equal(ps_preset_create(spec, &p, err, sizeof err), 0);
    return p;
}

/* 64 spins, 2000 steps of 4 us, T2 = 100 us: about 40 time segments at least
 * (K dt / T2 <= 2, ps_gpu_min_segments). */
static ps_problem *relaxing_problem(void)
{
    enum { NS = 64, NT = 2000 };
    static double r[3 * NS], tg[3 * NS], t1[NS], t2[NS], g[3 * NT];
    uint64_t seed = 5;
    for (int j = 0; j < NS; j++) {
        for (int c = 0; c < 3; c++) {
            r[3 * j + c] = tu_uniform(&seed, -2.0, 2.0);
            tg[3 * j + c] = c == 1 ? 0.5 : 0.0;
        }
        t1[j] = 1e-3;
        t2[j] = 100e-6;
    }
    for (int k = 0; k < NT; k++) {
        g[3 * k] = 0.3 * sin(0.01 * k);
        g[3 * k + 1] = 0.3 * cos(0.013 * k);
        g[3 * k + 2] = 0.1;
    }
    ps_problem_desc d;
    ps_problem_desc_init(&d);
    d.ns = NS;
    d.nt = NT;
    d.r = r;
    d.target = tg;
    d.t1 = t1;
    d.t2 = t2;
    d.g = g;
    d.dt = 4e-6;
    ps_problem *p = NULL;
    assert_int_equal(ps_problem_create(&d, &p), 0);
    return p;
}

static void fresh_cache_dir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "tune_cache_XXXXXX");
    assert_non_null(mkdtemp(dir));
    setenv("PERSOLVE_CACHE_DIR", dir, 1);
    printf("cache directory %s\n", dir);
}

static ps_tune_settings quick_settings(int write)
{
    ps_tune_settings s;
    ps_tune_settings_default(&s);
    s.iterations = 3;
    s.repeats = getenv("PS_GPU_TEST_QUICK") ? 1 : 2;
    s.write_cache = write;
    return s;
}

static int same_shape(const ps_gpu_config *c, const ps_tune_shape *s)
{
    return c->block == s->block && c->sb == s->spins_per_tile && c->segs == s->segments &&
           c->regcap == (s->max_registers == 64) && c->grid == s->grid;
}

/* Every shape: ran, and its figures are the kernel's and the occupancy API's. */
static void check_shapes(const ps_problem *p, int prec, const ps_tune_report *r)
{
    const int sms = device_attr(cudaDevAttrMultiProcessorCount);
    const int threads_sm = device_attr(cudaDevAttrMaxThreadsPerMultiProcessor);
    const int regs_sm = device_attr(cudaDevAttrMaxRegistersPerMultiprocessor);
    const int smem_sm = device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    const int min_segs = ps_gpu_min_segments(p);
    ps_gpu_kernel_info ki[2];
    const int kc = ps_gpu_kernel_class(p); /* the problem's kernel */
    assert_int_equal(ps_gpu_kernel_attrs(prec, 0, kc, &ki[0]), 0);
    assert_int_equal(ps_gpu_kernel_attrs(prec, 1, kc, &ki[1]), 0);
    printf("kernel: %d / %d registers (cap none / 64), %d / %d local bytes; min segments %d\n",
           ki[0].registers, ki[1].registers, ki[0].local_bytes, ki[1].local_bytes, min_segs);
    assert_int_equal(r->sms, sms);
    assert_true(r->count >= 3);
    assert_true(r->best >= 0 && (size_t)r->best < r->count);
    assert_true(r->heuristic >= 0 && (size_t)r->heuristic < r->count);
    int all_resident = 0, capped = 0;
    double f0 = r->shapes[0].f;
    for (size_t i = 0; i < r->count; i++) {
        const ps_tune_shape *s = &r->shapes[i];
        int regcap = s->max_registers == 64;
        printf("  %3d x %2d x %3d cap %3d regs %3d spill %4d smem %5d+%6d fit %2d used %2d grid %4d: "
               "status %d, %lld it, %.4f ms/it, f %.10g\n",
               s->block, s->spins_per_tile, s->segments, s->max_registers, s->registers, s->local_bytes,
               s->static_smem, s->dynamic_smem, s->resident_blocks, s->blocks_per_sm, s->grid, s->status,
               (long long)s->iterations, 1e3 * s->seconds_per_iteration, s->f);
        /* it launched and ran */
        assert_true(s->status >= 0 || s->status == PS_ERR_LINE_SEARCH);
        assert_true(s->iterations >= 1);
        assert_true(isfinite(s->f));
        assert_true(isfinite(s->seconds_per_iteration) && s->seconds_per_iteration > 0.0);
        assert_true(fabs(s->f - f0) <= 1e-2 * fabs(f0)); /* the same solve, other rounding */
        /* the shape is one the kernel accepts */
        assert_true(s->max_registers == 64 || s->max_registers == 128);
        assert_int_equal(s->spins_per_tile * s->segments, s->block);
        assert_true(s->segments >= min_segs);
        assert_true(s->block % 32 == 0 && s->block <= PS_GPU_MAX_THREADS);
        /* the kernel's attributes and the occupancy API */
        assert_int_equal(s->registers, ki[regcap].registers);
        assert_int_equal(s->local_bytes, ki[regcap].local_bytes);
        assert_int_equal(s->static_smem, ki[regcap].static_smem);
        size_t dyn = ps_gpu_dyn_smem(prec, s->spins_per_tile, s->segments, s->block, ps_problem_nt(p), kc);
        assert_int_equal(s->dynamic_smem, (int)dyn);
        assert_int_equal(s->resident_blocks, occupancy_api(prec, regcap, kc, s->block, dyn));
        assert_int_equal(s->resident_blocks, ps_gpu_max_blocks_per_sm(prec, regcap, kc, s->block, dyn));
        /* within the SM's limits */
        assert_true(s->resident_blocks >= 1);
        assert_true(s->resident_blocks * s->block <= threads_sm);
        assert_true((long)s->resident_blocks * s->block * s->registers <= regs_sm);
        assert_true((long)s->resident_blocks * (s->static_smem + s->dynamic_smem) <= smem_sm);
        /* the grid */
        assert_true(s->blocks_per_sm >= 1 && s->blocks_per_sm <= s->resident_blocks);
        assert_int_equal(s->grid, s->blocks_per_sm * sms);
        all_resident += s->blocks_per_sm == s->resident_blocks;
        capped += regcap;
        assert_true(isfinite(r->shapes[r->best].seconds_per_iteration));
        assert_true(s->seconds_per_iteration >= r->shapes[r->best].seconds_per_iteration);
    }
    /* grids of every resident block launched cooperatively */
    assert_true(all_resident > 0);
    /* the capped build is offered exactly when it differs */
    assert_int_equal(capped > 0, ki[0].registers > 64);
}

/* ps_gpu_resolve_config with the options alone (as solve_persistent). */
static ps_gpu_config resolved(const ps_problem *p, ps_options *o)
{
    ps_gpu_config c;
    memset(&c, 0, sizeof c);
    nlogs = 0;
    assert_int_equal(ps_gpu_resolve_config(p, o, NULL, &c), 0);
    return c;
}

static void tune_and_cache(void **state)
{
    (void)state;
    fresh_cache_dir();
    int quick = getenv("PS_GPU_TEST_QUICK") != NULL;
    ps_problem *p = preset(quick ? "spiral2d:n=8,nt=100" : "spiral2d:n=16,nt=300");
    ps_options o = gpu_opts(PS_PRECISION_SINGLE);
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    o.gpu = &g;
    ps_tune_settings s = quick_settings(1);
    ps_tune_report r;
    assert_int_equal(ps_gpu_tune(p, &o, &s, &r), 0);
    printf("%s\nkey %s\npath %s\n", r.device, r.cache_key, r.cache_path);
    check_shapes(p, PS_PRECISION_SINGLE, &r);
    assert_int_equal(r.cached, -1); /* a fresh cache */
    assert_int_equal(r.cache_written, 1);
    const ps_tune_shape best = r.shapes[r.best], heur = r.shapes[r.heuristic];

    /* the heuristic's shape is what the heuristic resolves to */
    g.tune_cache = 0;
    ps_gpu_config c = resolved(p, &o);
    assert_true(same_shape(&c, &heur));
    assert_false(any_logged("tune cache"));

    /* round trip: the file holds the best shape for this GPU, build and class */
    ps_tune_key k;
    ps_tune_entry e;
    assert_int_equal(ps_tune_key_current(p, PS_PRECISION_SINGLE, &k), 0);
    assert_int_equal(ps_tune_cache_read(r.cache_path, &k, &e, &o), PS_TUNE_CACHE_OK);
    assert_int_equal(e.block, best.block);
    assert_int_equal(e.sb, best.spins_per_tile);
    assert_int_equal(e.regcap, best.max_registers == 64);
    assert_int_equal(e.blocks_per_sm, best.blocks_per_sm);
    assert_true(fabs(e.seconds_per_iteration - best.seconds_per_iteration) <= 1e-5 * best.seconds_per_iteration);

    /* used: by the resolution of every solve that forces nothing ... */
    g.tune_cache = 1;
    c = resolved(p, &o);
    assert_true(same_shape(&c, &best));
    assert_true(logged(PS_LOG_INFO, "launch shape from the tune cache", r.cache_path));
    /* ... by solve_persistent, which says so and runs that shape ... */
    size_t n = 2 * ps_problem_nt(p);
    double *x = malloc(n * sizeof *x);
    ps_problem_x0(p, x);
    ps_result res;
    o.max_iterations = 3;
    nlogs = 0;
    int st = solve_persistent(p, &o, x, &res);
    printf("solve: status %d, %s\n", st, res.device);
    assert_true(st >= 0);
    assert_true(logged(PS_LOG_INFO, "launch shape from the tune cache", NULL));
    char want[64];
    snprintf(want, sizeof want, "grid %d x %d", best.grid, best.block);
    assert_non_null(strstr(res.device, want));
    snprintf(want, sizeof want, "%d spins x %d segments", best.spins_per_tile, best.segments);
    assert_non_null(strstr(res.device, want));
    ps_result_free(&res);
    /* ... and by the next tune, which marks it */
    ps_tune_report r2;
    s = quick_settings(0);
    assert_int_equal(ps_gpu_tune(p, &o, &s, &r2), 0);
    assert_true(r2.cached >= 0);
    assert_int_equal(r2.shapes[r2.cached].block, best.block);
    assert_int_equal(r2.shapes[r2.cached].spins_per_tile, best.spins_per_tile);
    assert_int_equal(r2.shapes[r2.cached].max_registers, best.max_registers);
    assert_int_equal(r2.shapes[r2.cached].blocks_per_sm, best.blocks_per_sm);
    assert_int_equal(r2.cache_written, 0);
    ps_tune_report_free(&r2);

    /* a forced shape wins over the cache, field by field */
    const int sms = r.sms;
    g.gpu_block = 128;
    g.gpu_spins_per_tile = 4;
    g.gpu_max_registers = 64;
    g.gpu_blocks_per_sm = 2;
    c = resolved(p, &o);
    assert_int_equal(c.block, 128);
    assert_int_equal(c.sb, 4);
    assert_int_equal(c.segs, 32);
    assert_int_equal(c.regcap, 1);
    assert_int_equal(c.grid, 2 * sms);
    assert_false(any_logged("tune cache"));
    g.gpu_spins_per_tile = g.gpu_max_registers = g.gpu_blocks_per_sm = 0;
    g.gpu_block = 256;
    c = resolved(p, &o);
    assert_int_equal(c.block, 256);
    assert_int_equal(c.regcap, 0);
    assert_int_equal(c.sb * c.segs, 256);
    assert_false(any_logged("tune cache"));
    /* more blocks per SM than fit: refused, with the reason */
    g.gpu_block = 512;
    g.gpu_blocks_per_sm = 32;
    nlogs = 0;
    assert_int_equal(ps_gpu_resolve_config(p, &o, NULL, &c), PS_ERR_GPU_LAUNCH);
    assert_true(logged(PS_LOG_ERROR, "co-resident", NULL));
    ps_problem_x0(p, x);
    assert_int_equal(solve_persistent(p, &o, x, &res), PS_ERR_GPU_LAUNCH);
    ps_result_free(&res);

    free(x);
    ps_tune_report_free(&r);
    ps_problem_free(p);
}

/* Write an entry for p's key (with `build` instead of this build's if not NULL). */
static void write_entry(const ps_problem *p, int prec, int block, int sb, int regcap, int bps,
                        const char *build, char *path, size_t len)
{
    ps_tune_key k;
    ps_tune_entry e;
    ps_options o = gpu_opts(prec);
    assert_int_equal(ps_tune_key_current(p, prec, &k), 0);
    assert_int_equal(ps_tune_cache_path(&k, path, len), 0);
    if (build)
        snprintf(k.build, sizeof k.build, "%s", build);
    memset(&e, 0, sizeof e);
    e.block = block;
    e.sb = sb;
    e.regcap = regcap;
    e.blocks_per_sm = bps;
    e.seconds_per_iteration = 1e-4;
    e.ns = (long long)ps_problem_ns(p);
    e.nt = (long long)ps_problem_nt(p);
    snprintf(e.date, sizeof e.date, "2026-12-01T00:00:00Z");
    assert_int_equal(ps_tune_cache_write(path, &k, &e, &o), 0);
}

static void rewrite(const char *path, long keep, long flip_at)
{
    char buf[4096];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (keep >= 0 && (size_t)keep < n)
        n = (size_t)keep;
    if (flip_at >= 0)
        buf[flip_at] ^= 0x01;
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static void corrupt_cache_ignored(void **state)
{
    (void)state;
    fresh_cache_dir();
    ps_problem *p = preset("spiral2d:n=16,nt=300");
    ps_options o = gpu_opts(PS_PRECISION_SINGLE);
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    o.gpu = &g;
    char path[1024];
    g.tune_cache = 0;
    const ps_gpu_config heur = resolved(p, &o);
    g.tune_cache = 1;
    /* a shape the heuristic would not pick */
    const int block = heur.block == 256 ? 128 : 256, sb = 4;
    write_entry(p, PS_PRECISION_SINGLE, block, sb, 0, 1, NULL, path, sizeof path);
    ps_gpu_config c = resolved(p, &o);
    assert_int_equal(c.block, block);
    assert_int_equal(c.sb, sb);
    assert_true(logged(PS_LOG_INFO, "launch shape from the tune cache", path));

    size_t n = 2 * ps_problem_nt(p);
    double *x = malloc(n * sizeof *x);
    static const struct {
        const char *what, *why;
        long keep, flip;
    } damage[] = {
        {"a flipped bit", "checksum mismatch", -1, 60},
        {"truncated", "truncated", 90, -1},
        {"emptied", "not a persolve tune cache file", 0, -1},
    };
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        write_entry(p, PS_PRECISION_SINGLE, block, sb, 0, 1, NULL, path, sizeof path);
        rewrite(path, damage[i].keep, damage[i].flip);
        printf("%s:\n", damage[i].what);
        c = resolved(p, &o);
        assert_true(memcmp(&c, &heur, sizeof c) == 0);
        assert_true(logged(PS_LOG_WARNING, "ignored (corrupt)", damage[i].why));
        /* the solve still runs, on the heuristic's shape */
        ps_problem_x0(p, x);
        ps_result res;
        nlogs = 0;
        o.max_iterations = 2;
        assert_true(solve_persistent(p, &o, x, &res) >= 0);
        assert_true(logged(PS_LOG_WARNING, "ignored (corrupt)", path));
        ps_result_free(&res);
    }

    /* stale: written by another build */
    write_entry(p, PS_PRECISION_SINGLE, block, sb, 0, 1, "0.0.1+0000000000000000", path, sizeof path);
    c = resolved(p, &o);
    assert_true(memcmp(&c, &heur, sizeof c) == 0);
    assert_true(logged(PS_LOG_WARNING, "ignored (stale)", "build 0.0.1+0000000000000000"));

    /* an intact entry that does not fit: more blocks per SM than fit */
    write_entry(p, PS_PRECISION_SINGLE, 512, sb, 0, 32, NULL, path, sizeof path);
    c = resolved(p, &o);
    assert_true(memcmp(&c, &heur, sizeof c) == 0);
    assert_true(logged(PS_LOG_WARNING, "do not fit on an SM", path));

    /* with tune_cache 0 the file is not even read */
    g.tune_cache = 0;
    c = resolved(p, &o);
    assert_int_equal(nlogs, 0);
    free(x);
    ps_problem_free(p);

    /* relaxation: an entry whose segments are too long for this problem is
     * ignored, a forced tile that breaks the bound refused */
    p = relaxing_problem();
    const int ms = ps_gpu_min_segments(p);
    char need[32];
    snprintf(need, sizeof need, "at least %d", ms);
    assert_true(ms > 32 && ms <= 64); /* 40 */
    write_entry(p, PS_PRECISION_SINGLE, 128, 32, 0, 1, NULL, path, sizeof path); /* 4 segments */
    g.tune_cache = 1;
    c = resolved(p, &o);
    assert_true(c.segs >= ms);
    assert_true(logged(PS_LOG_WARNING, "relaxation bound", path));
    g.gpu_block = 128;
    g.gpu_spins_per_tile = 4; /* 32 segments */
    nlogs = 0;
    assert_int_equal(ps_gpu_resolve_config(p, &o, NULL, &c), PS_ERR_OPTION);
    assert_true(logged(PS_LOG_ERROR, "options.gpu_spins_per_tile", need));
    ps_problem_free(p);
}

/* Double precision on a relaxing problem: the bound on segment lengths
 * prunes the shapes; the cache cannot be written (PS_ERR_FILE, report kept). */
static void tune_relaxation_double(void **state)
{
    (void)state;
    ps_problem *p = relaxing_problem();
    FILE *f = fopen("tune_not_a_dir", "w");
    assert_non_null(f);
    fclose(f);
    setenv("PERSOLVE_CACHE_DIR", "tune_not_a_dir/cache", 1);
    ps_options o = gpu_opts(PS_PRECISION_DOUBLE);
    ps_tune_settings s = quick_settings(1);
    ps_tune_report r;
    assert_int_equal(ps_gpu_tune(p, &o, &s, &r), PS_ERR_FILE);
    assert_true(logged(PS_LOG_ERROR, "tune_not_a_dir/cache", "cannot create"));
    assert_int_equal(r.cache_written, 0);
    check_shapes(p, PS_PRECISION_DOUBLE, &r); /* every shape meets the relaxation bound */
    ps_tune_report_free(&r);
    ps_problem_free(p);
}

/* A batch of n problems (their own start pulses) run to its end under o:
 * the blocks per team it had (and in *block their threads). */
static int batch_team_blocks(const ps_options *o, ps_problem *const *ps, int n, int *block)
{
    ps_batch *b = NULL;
    ps_batch_report rep;
    assert_int_equal(ps_batch_create(o, &b), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(ps_batch_add(b, ps[i], NULL, NULL), 0);
    assert_int_equal(ps_batch_start(b), 0);
    assert_int_equal(ps_batch_wait(b, -1.0), 0);
    assert_int_equal(ps_batch_progress(b, &rep), 0);
    ps_batch_free(b);
    *block = rep.block;
    return rep.team_blocks;
}

/* The team shape of a batch of 4 copies: tuned (both block sizes of the
 * single-channel kernels), cached, and taken by a batch of 4 problems of
 * the class that forces nothing; not with the cache off, nor for problems
 * of several size classes. */
static void tune_batch_and_cache(void **state)
{
    (void)state;
    fresh_cache_dir();
    ps_problem *p = preset("spiral2d:n=8,nt=100");
    ps_options o = gpu_opts(PS_PRECISION_SINGLE);
    ps_tune_settings s = quick_settings(1);
    s.repeats = 1;
    ps_tune_batch_report r;
    assert_int_equal(ps_gpu_tune_batch(p, 4, &o, &s, &r), 0);
    printf("%s\nkey %s\npath %s\n", r.device, r.cache_key, r.cache_path);
    for (size_t i = 0; i < r.count; i++) {
        const ps_tune_team *t = &r.teams[i];
        printf("  block %3d, team %4d blocks: %4d teams, status %d, %lld iterations, %.6f s, %.4f ms/iter%s%s\n",
               t->block, t->team_blocks, t->teams, t->status, (long long)t->iterations, t->seconds,
               1e3 * t->seconds_per_iteration, (int)i == r.best ? " best" : "",
               (int)i == r.heuristic ? " heuristic" : "");
        /* every candidate ran its iterations, in increasing order of
         * block, then of team size; teams of 1 block first for each */
        assert_true(t->status >= 0 || t->status == PS_ERR_LINE_SEARCH);
        assert_true(t->teams >= 1);
        assert_true(t->seconds > 0.0);
        assert_true(t->iterations >= 1 && t->iterations <= 3);
        assert_true(t->block == 128 || t->block == 256);
        if (i > 0 && t->block == r.teams[i - 1].block)
            assert_true(t->team_blocks > r.teams[i - 1].team_blocks);
        else
            assert_int_equal(t->team_blocks, 1);
        if (i > 0)
            assert_true(t->block >= r.teams[i - 1].block);
    }
    assert_int_equal(r.teams[0].block, 128);
    assert_int_equal(r.teams[r.count - 1].block, 256);
    assert_int_equal(r.copies, 4);
    assert_true(r.best >= 0);
    assert_true(r.heuristic >= 0);
    assert_int_equal(r.cached, -1); /* a fresh cache */
    assert_int_equal(r.cache_written, 1);
    assert_non_null(strstr(r.cache_path, "-batch2.txt"));
    struct stat st;
    assert_int_equal(stat(r.cache_path, &st), 0);
    const int best = r.teams[r.best].team_blocks, heuristic = r.teams[r.heuristic].team_blocks;
    const int best_block = r.teams[r.best].block;
    /* 100 steps: the heuristic's block is the short pulses' */
    assert_int_equal(r.teams[r.heuristic].block, 128);
    printf("best %d blocks of %d threads per team, heuristic %d of 128\n", best, best_block, heuristic);
    int block = 0;

    /* a batch of 4 copies with the default GPU options takes the cached size */
    ps_problem *four[4] = {p, p, p, p};
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    assert_int_equal(batch_team_blocks(&o, four, 4, &block), best);
    assert_int_equal(block, best_block);
    assert_true(logged(PS_LOG_INFO, "batch team size from the tune cache", r.cache_path));
    /* the next tune marks it */
    ps_tune_batch_report r2;
    s.write_cache = 0;
    assert_int_equal(ps_gpu_tune_batch(p, 4, &o, &s, &r2), 0);
    assert_true(r2.cached >= 0);
    assert_int_equal(r2.teams[r2.cached].team_blocks, best);
    assert_int_equal(r2.teams[r2.cached].block, best_block);
    assert_int_equal(r2.cache_written, 0);
    ps_tune_batch_report_free(&r2);

    /* with the cache off, or problems of two classes: the heuristic */
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    g.tune_cache = 0;
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    o.gpu = &g;
    assert_int_equal(batch_team_blocks(&o, four, 4, &block), heuristic);
    assert_int_equal(block, 128);
    assert_false(any_logged("from the tune cache"));
    ps_problem *other = preset("spiral2d:n=16,nt=300");
    four[3] = other;
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    assert_int_equal(batch_team_blocks(&o, four, 4, &block), heuristic);
    assert_int_equal(block, 128);
    assert_true(logged(PS_LOG_INFO, "the heuristic", "several size classes"));
    ps_problem_free(other);

    /* the cached entry with the other block size forced: ignored, said so */
    four[3] = p;
    ps_gpu_options_default(&g);
    g.gpu_block = best_block == 128 ? 256 : 128;
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    o.gpu = &g;
    batch_team_blocks(&o, four, 4, &block);
    assert_int_equal(block, g.gpu_block);
    assert_true(logged(PS_LOG_WARNING, r.cache_path, "options.gpu_block forces"));

    /* a forced team size: the cache is not read, the block is the
     * heuristic's (128 for 100 steps) */
    ps_gpu_options_default(&g);
    g.batch_team_blocks = 2;
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    o.gpu = &g;
    assert_int_equal(batch_team_blocks(&o, four, 4, &block), 2);
    assert_int_equal(block, 128);
    assert_true(logged(PS_LOG_INFO, "batch team size 2 blocks of 128 threads: forced", NULL));

    /* a pulse of more than 512 steps: blocks of 256 */
    ps_problem *longer = preset("spiral2d:n=8,nt=600");
    ps_problem *two[2] = {p, longer};
    ps_gpu_options_default(&g);
    g.tune_cache = 0;
    o = gpu_opts(PS_PRECISION_SINGLE);
    o.max_iterations = 3;
    o.gpu = &g;
    batch_team_blocks(&o, two, 2, &block);
    assert_int_equal(block, 256);
    ps_problem_free(longer);

    ps_tune_batch_report_free(&r);
    ps_problem_free(p);
}

int main(void)
{
    /* quick: the subset run under compute-sanitizer */
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(tune_and_cache),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tune_and_cache),
        cmocka_unit_test(corrupt_cache_ignored),
        cmocka_unit_test(tune_relaxation_double),
        cmocka_unit_test(tune_batch_and_cache),
    };
    return TU_RUN_GPU_SUITE(quick, tests);
}
