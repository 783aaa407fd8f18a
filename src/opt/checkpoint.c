/*
 * Checkpoint blobs (opt/checkpoint.h): write and validated read of a
 * suspended driver's state.
 */
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "model/problem.h"
#include "model/problem_fields.h"
#include "opt/checkpoint.h"
#include "opt/options.h"

#define MAGIC "PSCKPT\0\0"
#define BYTE_ORDER_MARK 0x01020304u
#define HEADER_LEN_V1 168u
#define HEADER_LEN 192u
/* a history row of format 1: ps_progress without its round */
#define PROGRESS_SIZE_V1 offsetof(ps_progress, round)
#define TRAILER_LEN 8u

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
    return ps_fnv1a(h, &v, sizeof v);
}

/* An optional array: a presence tag, then its bytes. */
static uint64_t hash_array(uint64_t h, const double *a, size_t n)
{
    h = hash_u64(h, a ? 1u : 0u);
    return a ? ps_fnv1a(h, a, n * sizeof(double)) : h;
}

uint64_t ps_problem_hash(const ps_problem *p)
{
    uint64_t h = PS_FNV_OFFSET;
    h = hash_u64(h, p->ns);
    h = hash_u64(h, p->nt);
    h = hash_u64(h, (uint64_t)p->loss);
    /* the fields in the order of their lists (model/problem_fields.h): the
     * bytes checkpoints of this format version hash */
#define REAL(name, ...) p->name,
    double sc[] = {PS_PROBLEM_REALS(REAL)};
#undef REAL
    h = ps_fnv1a(h, sc, sizeof sc);
#define ARRAY(name, rows, width, channels, presence, ...)                     \
    if (presence != PS_FIELD_START && (presence != PS_FIELD_EXTRA || p->name)) \
        h = hash_array(h, p->name, PS_FIELD_COUNT(p, rows, width, channels));
    PS_PROBLEM_ARRAYS(ARRAY)
#undef ARRAY
    if (p->nc > 1) /* the channels, hashed where there are several */
        h = hash_u64(h, p->nc);
    /* the constraints added since format 1, hashed only when present */
    if (p->b1_max_channel)
        h = hash_array(h, p->b1_max_channel, p->nc);
    if (p->nq) {
        const double sar[2] = {p->sar_max, p->tr};
        h = ps_fnv1a(hash_u64(h, p->nq), sar, sizeof sar);
    }
    if (p->design_g) {
        const double lim[3] = {p->smax, p->gmax, (double)p->g_end};
        h = ps_fnv1a(hash_u64(h, 0x100u + p->design_g), lim, sizeof lim);
    }
    return h;
}

/* The header as fields (written and read one by one at fixed offsets). */
typedef struct ckpt_header {
    char magic[8];
    uint32_t version, bom;
    uint32_t size_double, size_int64, size_solver, size_progress;
    uint64_t n, memory, ns, nt, problem_hash;
    int32_t precision, past, max_linesearch, error;
    double gtol, ftol, c1, c2, fnoise;
    double elapsed, ft;
    uint64_t history_len, total_len;
    int32_t phase, reserved;
    /* version 2 */
    int32_t max_rounds, constrained;
    double constraint_tol, penalty_mu;
} ckpt_header;

/* Byte cursor over the blob. */
typedef struct cursor {
    unsigned char *p;
    const unsigned char *q;
} cursor;

static void put(cursor *c, const void *v, size_t n)
{
    memcpy(c->p, v, n);
    c->p += n;
}

static void get(cursor *c, void *v, size_t n)
{
    memcpy(v, c->q, n);
    c->q += n;
}

/* Field order of the header: one list for both directions. */
#define HEADER_FIELDS(X, h)                                                   \
    X(h.magic, 8) X(&h.version, 4) X(&h.bom, 4) X(&h.size_double, 4)           \
    X(&h.size_int64, 4) X(&h.size_solver, 4) X(&h.size_progress, 4)            \
    X(&h.n, 8) X(&h.memory, 8) X(&h.ns, 8) X(&h.nt, 8) X(&h.problem_hash, 8)   \
    X(&h.precision, 4) X(&h.past, 4) X(&h.max_linesearch, 4) X(&h.error, 4)    \
    X(&h.gtol, 8) X(&h.ftol, 8) X(&h.c1, 8) X(&h.c2, 8) X(&h.fnoise, 8)        \
    X(&h.elapsed, 8) X(&h.ft, 8) X(&h.history_len, 8) X(&h.total_len, 8)       \
    X(&h.phase, 4) X(&h.reserved, 4)
/* what version 2 appends to the header */
#define HEADER_FIELDS_V2(X, h)                                                \
    X(&h.max_rounds, 4) X(&h.constrained, 4) X(&h.constraint_tol, 8) X(&h.penalty_mu, 8)

#define FIELD_LEN(ptr, sz) +(sz)
_Static_assert(0 HEADER_FIELDS(FIELD_LEN, h) == HEADER_LEN_V1, "HEADER_LEN_V1 is not the header's length");
_Static_assert(0 HEADER_FIELDS(FIELD_LEN, h) HEADER_FIELDS_V2(FIELD_LEN, h) == HEADER_LEN,
               "HEADER_LEN is not the header's length");
#undef FIELD_LEN

/* The payload of a format version's state and rows. */
static size_t payload_len(uint64_t n, uint64_t m, uint64_t rows, size_t solver, size_t row)
{
    return solver + (5 + 2 * m) * n * sizeof(double) + rows * row;
}

int ps_checkpoint_save(const ps_problem *p, const ps_options *o,
                       const ps_driver *c, void **buf, size_t *len)
{
    size_t n = c->n, m = (size_t)c->m;
    size_t total = HEADER_LEN + payload_len(n, m, c->history_len, sizeof(ps_solver), sizeof(ps_progress)) +
                   TRAILER_LEN;
    unsigned char *b = malloc(total);
    if (!b)
        return PS_ERR_NO_MEMORY;
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = PS_CHECKPOINT_VERSION;
    h.bom = BYTE_ORDER_MARK;
    h.size_double = sizeof(double);
    h.size_int64 = sizeof(int64_t);
    h.size_solver = sizeof(ps_solver);
    h.size_progress = sizeof(ps_progress);
    h.n = n;
    h.memory = m;
    h.ns = p->ns;
    h.nt = p->nt;
    h.problem_hash = ps_problem_hash(p);
    h.precision = (int32_t)o->precision;
    h.past = o->past;
    h.max_linesearch = o->max_linesearch;
    h.error = c->error;
    h.gtol = o->gtol;
    h.ftol = o->ftol;
    h.c1 = o->c1;
    h.c2 = o->c2;
    h.fnoise = ps_options_fnoise(o);
    h.elapsed = ps_driver_seconds(c);
    h.ft = c->ft;
    h.history_len = c->history_len;
    h.total_len = total;
    h.phase = c->s.phase;
    h.constrained = c->s.constrained;
    h.max_rounds = ps_options_max_rounds(o);
    h.constraint_tol = ps_options_constraint_tol(o);
    h.penalty_mu = ps_options_penalty_mu(o);
    cursor cu = {b, NULL};
#define PUT(ptr, sz) put(&cu, ptr, sz);
    HEADER_FIELDS(PUT, h)
    HEADER_FIELDS_V2(PUT, h)
#undef PUT
    put(&cu, &c->s, sizeof c->s);
    put(&cu, c->x, n * sizeof(double));
    put(&cu, c->g, n * sizeof(double));
    put(&cu, c->xt, n * sizeof(double));
    put(&cu, c->gt, n * sizeof(double));
    put(&cu, c->d, n * sizeof(double));
    put(&cu, c->S, m * n * sizeof(double));
    put(&cu, c->Y, m * n * sizeof(double));
    if (c->history_len)
        put(&cu, c->history, c->history_len * sizeof(ps_progress));
    uint64_t sum = ps_fnv1a(PS_FNV_OFFSET, b, total - TRAILER_LEN);
    put(&cu, &sum, sizeof sum);
    *buf = b;
    *len = total;
    return PS_CONVERGED;
}

#define REFUSE_IF(cond, ...)                                                  \
    PS_RETURN_ERROR_IF(o, cond, PS_ERR_CHECKPOINT, "checkpoint refused: " __VA_ARGS__)

/* An algorithmic option must be bit-equal to the checkpoint's. */
#define SAME_OPTION(name, have)                                               \
    REFUSE_IF(memcmp(&h.name, &(have), sizeof h.name) != 0,                   \
              "option " #name " differs (checkpoint %.17g, given %.17g)",     \
              (double)h.name, (double)(have))

int ps_checkpoint_load(const ps_problem *p, const ps_options *o,
                       const void *buf, size_t len, ps_driver *c)
{
    REFUSE_IF(!buf, "no data");
    REFUSE_IF(len < HEADER_LEN_V1 + TRAILER_LEN,
              "truncated: %zu bytes, the header alone needs %u", len,
              HEADER_LEN_V1 + TRAILER_LEN);
    const unsigned char *b = buf;
    ckpt_header h;
    memset(&h, 0, sizeof h);
    cursor cu = {NULL, b};
#define GET(ptr, sz) get(&cu, ptr, sz);
    HEADER_FIELDS(GET, h)
    REFUSE_IF(memcmp(h.magic, MAGIC, 8) != 0, "not a persolve checkpoint (bad magic)");
    REFUSE_IF(h.version != PS_CHECKPOINT_VERSION && h.version != 1u,
              "format version %u, this library reads versions 1 and %u", h.version,
              PS_CHECKPOINT_VERSION);
    const int v1 = h.version == 1u;
    const size_t header_len = v1 ? HEADER_LEN_V1 : HEADER_LEN;
    REFUSE_IF(len < header_len + TRAILER_LEN, "truncated: %zu bytes, the header alone needs %zu", len,
              header_len + TRAILER_LEN);
    if (!v1) {
        HEADER_FIELDS_V2(GET, h)
    } else { /* no penalty rounds: the defaults' settings */
        h.max_rounds = ps_options_max_rounds(o);
        h.constraint_tol = ps_options_constraint_tol(o);
        h.penalty_mu = ps_options_penalty_mu(o);
    }
#undef GET
    const size_t size_solver = v1 ? PS_SOLVER_SIZE_V1 : sizeof(ps_solver);
    const size_t size_row = v1 ? PROGRESS_SIZE_V1 : sizeof(ps_progress);
    REFUSE_IF(h.bom != BYTE_ORDER_MARK,
              "written on a machine of another byte order (mark 0x%08x)", h.bom);
    REFUSE_IF(h.size_double != sizeof(double) || h.size_int64 != sizeof(int64_t) ||
                  h.size_solver != size_solver || h.size_progress != size_row,
              "type sizes differ (double %u, int64 %u, solver %u, progress %u; "
              "here %zu, %zu, %zu, %zu)",
              h.size_double, h.size_int64, h.size_solver, h.size_progress,
              sizeof(double), sizeof(int64_t), size_solver, size_row);
    REFUSE_IF(h.total_len > len, "truncated: %zu bytes of %llu", len,
              (unsigned long long)h.total_len);
    REFUSE_IF(h.total_len < len, "%zu bytes, but the header says %llu",
              len, (unsigned long long)h.total_len);
    uint64_t sum, want = ps_fnv1a(PS_FNV_OFFSET, b, len - TRAILER_LEN);
    memcpy(&sum, b + len - TRAILER_LEN, sizeof sum);
    REFUSE_IF(sum != want, "checksum mismatch (corrupted data)");

    /* the problem and the settings it belongs to */
    REFUSE_IF(h.ns != p->ns || h.nt != p->nt,
              "written for a problem of ns=%llu, nt=%llu; this one has ns=%zu, nt=%zu",
              (unsigned long long)h.ns, (unsigned long long)h.nt, p->ns, p->nt);
    REFUSE_IF(h.n != c->n, "n=%llu, expected %zu", (unsigned long long)h.n, c->n);
    REFUSE_IF(h.problem_hash != ps_problem_hash(p),
              "written for another problem (array hash %016llx, this one %016llx)",
              (unsigned long long)h.problem_hash,
              (unsigned long long)ps_problem_hash(p));
    REFUSE_IF(h.precision != (int32_t)o->precision,
              "precision differs (checkpoint %s, given %s)",
              h.precision == PS_PRECISION_DOUBLE ? "double" : "single",
              o->precision == PS_PRECISION_DOUBLE ? "double" : "single");
    REFUSE_IF(h.memory != (uint64_t)o->memory,
              "option memory differs (checkpoint %llu, given %d)",
              (unsigned long long)h.memory, o->memory);
    REFUSE_IF(h.past != o->past, "option past differs (checkpoint %d, given %d)",
              h.past, o->past);
    REFUSE_IF(h.max_linesearch != o->max_linesearch,
              "option max_linesearch differs (checkpoint %d, given %d)",
              h.max_linesearch, o->max_linesearch);
    double fnoise = ps_options_fnoise(o);
    SAME_OPTION(gtol, o->gtol);
    SAME_OPTION(ftol, o->ftol);
    SAME_OPTION(c1, o->c1);
    SAME_OPTION(c2, o->c2);
    SAME_OPTION(fnoise, fnoise);
    REFUSE_IF(h.constrained != (int32_t)c->mz.constrained,
              "the checkpoint's problem %s penalty constraints, this one %s",
              h.constrained ? "has" : "has no", c->mz.constrained ? "has" : "has none");
    if (h.constrained) {
        const int max_rounds = ps_options_max_rounds(o);
        const double ctol = ps_options_constraint_tol(o), mu0 = ps_options_penalty_mu(o);
        REFUSE_IF(h.max_rounds != max_rounds, "option max_rounds differs (checkpoint %d, given %d)",
                  h.max_rounds, max_rounds);
        SAME_OPTION(constraint_tol, ctol);
        SAME_OPTION(penalty_mu, mu0);
    }

    /* lengths and the state's own consistency */
    size_t n = c->n, m = (size_t)c->m;
    REFUSE_IF(h.history_len > len / size_row ||
                  h.total_len != header_len + payload_len(n, m, h.history_len, size_solver, size_row) +
                                     TRAILER_LEN,
              "length %llu does not match its contents",
              (unsigned long long)h.total_len);
    ps_solver s;
    ps_solver_init(&s, o->memory, o->past, o->max_linesearch, o->max_iterations, o->max_evaluations,
                   o->gtol, o->ftol, o->c1, o->c2, o->time_limit, fnoise);
    memcpy(&s, b + header_len, size_solver); /* format 1: the rounds' fields as init left them */
    REFUSE_IF(s.constrained != h.constrained || (s.constrained && (s.max_rounds != h.max_rounds ||
                                                                   s.round < 0 || s.round >= s.max_rounds ||
                                                                   !(s.mu > 0.0) || !isfinite(s.mu) ||
                                                                   s.round_iter < 0 ||
                                                                   s.round_iter > s.iteration)),
              "bad penalty round state (round %d of %d, mu %g)", s.round, s.max_rounds, s.mu);
    REFUSE_IF(s.m != o->memory || s.lb.m != o->memory || s.past != o->past ||
                  s.max_ls != o->max_linesearch || memcmp(&s.gtol, &h.gtol, sizeof s.gtol) ||
                  memcmp(&s.ftol, &h.ftol, sizeof s.ftol) || memcmp(&s.c1, &h.c1, sizeof s.c1) ||
                  memcmp(&s.c2, &h.c2, sizeof s.c2) || memcmp(&s.fnoise, &h.fnoise, sizeof s.fnoise),
              "solver settings do not match the header");
    /* a state past its start has a finite f and gradient norm (unless its
     * start point's objective was not finite: that run ended there) */
    int started = s.phase != PS_PHASE_START && !(s.phase == PS_PHASE_DONE && h.history_len == 0) &&
                  s.status != PS_ST_ERR_OBJECTIVE;
    REFUSE_IF(started && !h.error && !(isfinite(s.f) && isfinite(s.gnorm) && s.gnorm >= 0.0),
              "non-finite solver state (f %g, gradient norm %g)", s.f, s.gnorm);
    REFUSE_IF(s.phase < PS_PHASE_START || s.phase > PS_PHASE_DONE || s.phase != h.phase,
              "bad solver phase %d", s.phase);
    REFUSE_IF(s.lb.k < 0 || s.lb.k > s.m || s.lb.newest < 0 || s.lb.newest >= s.m,
              "bad L-BFGS memory state (k %d, newest %d)", s.lb.k, s.lb.newest);
    REFUSE_IF(s.iteration < 0 || s.evaluations < 0, "negative counters");
    REFUSE_IF((s.phase == PS_PHASE_DONE) != (s.status != PS_ST_RUNNING),
              "status %d does not match phase %d", s.status, s.phase);
    REFUSE_IF(h.error > 0 || (h.error != 0 && s.phase != PS_PHASE_DONE),
              "bad error status %d", h.error);
    /* a new round's START follows the rows of the iterations done */
    const int fresh_start = s.phase == PS_PHASE_START && !s.restart;
    REFUSE_IF(h.history_len > (uint64_t)s.iteration + 1 ||
                  (!fresh_start && s.phase != PS_PHASE_DONE &&
                   h.history_len != (uint64_t)s.iteration + 1) ||
                  (fresh_start && h.history_len != 0),
              "history of %llu rows at iteration %lld",
              (unsigned long long)h.history_len, (long long)s.iteration);
    REFUSE_IF(!(h.elapsed >= 0.0) || !isfinite(h.elapsed), "bad solve time");

    /* restore */
    ps_progress *hist = NULL;
    if (h.history_len) {
        hist = calloc(h.history_len, sizeof *hist);
        if (!hist)
            return PS_ERR_NO_MEMORY;
        const unsigned char *rows = b + len - TRAILER_LEN - h.history_len * size_row;
        for (uint64_t i = 0; i < h.history_len; i++) /* format 1 rows: round 0 */
            memcpy(hist + i, rows + i * size_row, size_row);
        for (uint64_t i = 0; i < h.history_len; i++) {
            int64_t it = hist[i].iteration;
            if (it != (int64_t)i) {
                free(hist);
                REFUSE_IF(1, "history row %llu is iteration %lld",
                          (unsigned long long)i, (long long)it);
            }
        }
    }
    cu.q = b + header_len + size_solver;
    get(&cu, c->x, n * sizeof(double));
    get(&cu, c->g, n * sizeof(double));
    /* the point, and its gradient once evaluated, are finite */
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(c->x[i]) || (started && !h.error && !isfinite(c->g[i]))) {
            free(hist);
            REFUSE_IF(1, "non-finite %s[%zu]", isfinite(c->x[i]) ? "g" : "x", i);
        }
    }
    get(&cu, c->xt, n * sizeof(double));
    get(&cu, c->gt, n * sizeof(double));
    get(&cu, c->d, n * sizeof(double));
    get(&cu, c->S, m * n * sizeof(double));
    get(&cu, c->Y, m * n * sizeof(double));
    c->s = s;
    /* the limits are the caller's */
    c->s.max_iterations = o->max_iterations;
    c->s.max_evaluations = o->max_evaluations;
    c->s.time_limit = o->time_limit;
    c->error = h.error;
    c->ft = h.ft;
    c->elapsed = h.elapsed;
    c->t0 = -1.0;
    free(c->history);
    c->history = hist;
    c->history_len = c->hist_cap = h.history_len;
    /* A solve stopped by a limit the new options lift, or by a cancel,
     * continues where it stopped (ps_solver_reopen); with the same limits
     * it stays finished with the same outcome. */
    if (c->s.phase == PS_PHASE_DONE && !c->error) {
        int st = c->s.status, lift = 0;
        if (st == PS_ST_MAX_ITERATIONS)
            lift = o->max_iterations == 0 || o->max_iterations > c->s.iteration;
        else if (st == PS_ST_MAX_EVALUATIONS)
            lift = o->max_evaluations == 0 || o->max_evaluations > c->s.evaluations;
        else if (st == PS_ST_TIME_LIMIT)
            lift = o->time_limit == 0.0 || o->time_limit > h.elapsed;
        else if (st == PS_ST_CANCELLED)
            lift = 1;
        /* a row per iteration done; none before the start was taken */
        size_t rows = c->s.resume_phase == PS_PHASE_START && !c->s.restart ? 0 : (size_t)c->s.iteration + 1;
        if (lift && c->history_len == rows)
            ps_solver_reopen(&c->s);
    }
    /* limits the new options set at or below what was already done */
    if (!c->error)
        ps_solver_limits_reached(&c->s, h.elapsed);
    return PS_CONVERGED;
}
