/*
 * CPU backend of the objective: OpenMP over items of consecutive fixed
 * lanes of spins, each lane accumulating its own gradient, then a
 * fixed-order sum over lanes, so the result does not depend on the number
 * of threads. Within a thread's lanes, groups of PS_CPU_GROUP spins are
 * simulated together, a spin a vector slot (cpu/objective_tmpl.h), without
 * changing a bit of any spin's terms or of the order in which they are
 * summed.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/fpmode.h" /* before the template: PS_FLUSH_NOINLINE */
#include "cpu/objective.h"
#include "model/bloch_math.h"
#include "model/constraints.h"
#include "model/design.h"
#include "model/problem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define PS_CPU_PARALLEL_MIN 100000 /* spin-steps below which one thread is faster */
#define PS_CPU_GROUP 32 /* spins simulated together, one a vector slot (cpu/objective_tmpl.h) */

/* The spin loops of cpu/objective_tmpl.h per precision, in the build's
 * baseline instruction set (SSE2 on x86-64) and, on x86-64 with GCC, for
 * AVX2 and AVX-512 too, the widest the CPU has taken at run time
 * (ps_cpu_isa): the same operations, so the same bits, in vectors of 8 or
 * 16 floats instead of 4. */
#define PS_ISA(name) name
#include "cpu/objective_isa.h"
#undef PS_ISA

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PS_CPU_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define PS_ISA(name) name##_avx2
#include "cpu/objective_isa.h"
#undef PS_ISA
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,prefer-vector-width=512")
#define PS_ISA(name) name##_avx512
#include "cpu/objective_isa.h"
#undef PS_ISA
#pragma GCC pop_options
#endif

/* lanes_eval of precision P (f, d) in instruction set isa */
#ifdef PS_CPU_AVX2
#define LANES_EVAL(P, isa, ...)                                                           \
    ((isa) == PS_CPU_ISA_AVX512 ? lanes_eval_##P##_avx512(__VA_ARGS__)                   \
     : (isa) == PS_CPU_ISA_AVX2 ? lanes_eval_##P##_avx2(__VA_ARGS__)                     \
                                : lanes_eval_##P(__VA_ARGS__))
#else
#define LANES_EVAL(P, isa, ...) ((void)(isa), lanes_eval_##P(__VA_ARGS__))
#endif

/* ps_cpu_isa_limit's and ps_cpu_group_limit's limits (objective.h); set by
 * tests before any call */
static int isa_limit = PS_CPU_ISA_AVX512, group_limit = PS_CPU_GROUP;

int ps_cpu_group_limit(int limit)
{
    group_limit = limit < 1 ? 1 : limit > PS_CPU_GROUP ? PS_CPU_GROUP : limit;
    return group_limit;
}

int ps_cpu_isa_limit(int limit)
{
    isa_limit = limit;
    return ps_cpu_isa();
}

int ps_cpu_isa(void)
{
#ifdef PS_CPU_AVX2
    __builtin_cpu_init(); /* idempotent; needed if a constructor calls this */
    if (isa_limit >= PS_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return PS_CPU_ISA_AVX512;
    if (isa_limit >= PS_CPU_ISA_AVX2 && __builtin_cpu_supports("avx2"))
        return PS_CPU_ISA_AVX2;
#endif
    return PS_CPU_ISA_BASE;
}

/* Bytes of one group's states kept for the backward sweep (a thread's at a
 * time) up to which every state is kept; past it, checkpoints. */
#define PS_CPU_TRAJ_MAX ((size_t)16 << 20)

/* Segment length K of the backward sweep (cpu/objective_tmpl.h): nt (every
 * state kept) when 3 nt states of a group's spins, rs bytes each, fit in
 * PS_CPU_TRAJ_MAX, else ceil(sqrt(nt)) (checkpoints, a replay of each
 * segment). */
static size_t segment_length(size_t nt, size_t rs)
{
    if (3 * nt * PS_CPU_GROUP * rs <= PS_CPU_TRAJ_MAX)
        return nt;
    size_t K = (size_t)sqrt((double)nt);
    while (K * K < nt)
        K++;
    return K;
}

/*
 * Lanes a parallel item takes (consecutive lanes; cpu/objective_tmpl.h
 * fills groups of gw spins from an item's spins, the last one partial):
 * the fewest groups over all items, where fewer lanes an item do not cost
 * 5% more groups, and 2 items a thread at least. Items change only how the
 * work is shared, not the bits (the lanes sum).
 */
static size_t item_lanes(size_t ns, size_t nl, size_t gw, size_t nthreads)
{
    size_t best = 1, best_groups = 0, most = nl / (2 * nthreads);
    for (size_t lpi = 1; lpi == 1 || lpi <= most; lpi++) {
        size_t groups = 0;
        for (size_t L0 = 0; L0 < nl; L0 += lpi) {
            const size_t L1 = L0 + lpi < nl ? L0 + lpi : nl;
            groups += (L1 * ns / nl - L0 * ns / nl + gw - 1) / gw;
        }
        if (lpi == 1 || (double)groups < 0.95 * (double)best_groups) {
            best = lpi;
            best_groups = groups;
        }
    }
    return best;
}

/*
 * F and dF/dx at x in the variables of design des (model/design.h): the
 * pulse of every step, the spins' loss and gradient by lanes, the SAR
 * values and, with weight mu, their penalty (model/constraints.h), then
 * per step the penalties' gradient and the chain rule back to x. *viol
 * (may be NULL) receives the largest relative violation (0 when met).
 */
static int objective(const ps_problem *p, const ps_design *des, double mu, int precision,
                     int threads, size_t seg, const double *x, double *f, double *grad, double *grad_g,
                     double *m, double *viol)
{
    const ps_sar sar = ps_problem_sar(p);
    double sarv[PS_MAX_VOPS], sarw[PS_MAX_VOPS], vmax = 0.0;
    size_t nt = p->nt, ns = p->ns, nc = p->nc, nrf = PS_DESIGN_NX(nc, nt), nx = ps_problem_nx(p);
    const size_t ng = ps_problem_ng(p);
    const double dtg = des->dtg; /* dt gamma */
    /* dL/dG of every axis: asked for, or the designed axes' gradient */
    double *dfdg = !grad_g && ng && grad ? malloc(3 * nt * sizeof *dfdg) : NULL;
    if (!grad_g && ng && grad) {
        if (!dfdg)
            return PS_ERR_NO_MEMORY;
        grad_g = dfdg;
    }
    size_t nl = ns < PS_CPU_LANES ? ns : PS_CPU_LANES;
    int single = precision == PS_PRECISION_SINGLE;
    size_t rs = single ? sizeof(float) : sizeof(double);
    size_t K = seg ? (seg < nt ? seg : nt) : segment_length(nt, rs), nseg = (nt + K - 1) / K;

    double *b = malloc(nx * sizeof *b); /* the pulse, layout of x */
    double *lane_loss = calloc(nl, sizeof *lane_loss);
    double *gacc = grad ? calloc(nl * nx, sizeof *gacc) : NULL;
    double *gaccg = grad_g ? calloc(nl * 3 * nt, sizeof *gaccg) : NULL; /* [lane][nt][3] */
    /* pulse [nc][nt] and per-step gradient rotation in the spin loop's precision */
    void *u = malloc(nc * nt * rs), *v = malloc(nc * nt * rs), *gdt = malloc(3 * nt * rs);
    int oom = !b || !lane_loss || (grad && !gacc) || (grad_g && !gaccg) || !u || !v || !gdt;
    if (!oom) {
        for (size_t c = 0; c < nc; c++) {
            for (size_t k = 0; k < nt; k++) {
                const size_t iu = PS_X_U(nt, c, k), iv = PS_X_V(nt, c, k);
                ps_design_pulse(des, (int)c, x[iu], x[iv], &b[iu], &b[iv]);
                if (single) {
                    ((float *)u)[c * nt + k] = (float)b[iu];
                    ((float *)v)[c * nt + k] = (float)b[iv];
                } else {
                    ((double *)u)[c * nt + k] = b[iu];
                    ((double *)v)[c * nt + k] = b[iv];
                }
            }
        }
        /* the designed axes' waveforms, physical in b's tail */
        for (size_t i = 0; i < ng; i++) {
            const double *xi = x + PS_X_G(nc, nt, i, 0);
            double *bi = b + PS_X_G(nc, nt, i, 0);
            if (des->slew)
                ps_slew_waveform(des->smax, des->kappa[i], des->dt, nt, xi, bi);
            else
                memcpy(bi, xi, nt * sizeof *bi);
        }
        for (size_t k = 0; k < nt; k++) {
            double gk[3];
            ps_design_gdt(p, k, gk);
            for (size_t i = 0; i < ng; i++)
                gk[des->axis[i]] = dtg * b[PS_X_G(nc, nt, i, k)];
            for (int c = 0; c < 3; c++) {
                if (single)
                    ((float *)gdt)[3 * k + c] = (float)gk[c];
                else
                    ((double *)gdt)[3 * k + c] = gk[c];
            }
        }
    }
#ifdef _OPENMP
    const int nthreads = threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
#endif

    if (!oom) {
        const int isa = ps_cpu_isa(), gw = group_limit;
#ifdef _OPENMP
        const size_t lpi = item_lanes(ns, nl, (size_t)gw, (size_t)nthreads);
#else
        const size_t lpi = item_lanes(ns, nl, (size_t)gw, 1);
#endif
        const size_t nitem = (nl + lpi - 1) / lpi;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) reduction(|| : oom) if (ns * nt >= PS_CPU_PARALLEL_MIN)
#endif
        for (size_t it = 0; it < nitem; it++) {
            const size_t L0 = it * lpi, L1 = L0 + lpi < nl ? L0 + lpi : nl;
            /* the states for the backward sweep: only with a gradient */
            const size_t gs = 3 * PS_CPU_GROUP * rs;
            void *ck = malloc((gacc ? nseg : 1) * gs), *sg = malloc((gacc ? K : 1) * gs);
            if (!ck || !sg) {
                oom = 1;
            } else if (single) {
                const unsigned fp = ps_flush_begin(); /* subnormals flushed (cpu/fpmode.h) */
                oom |= LANES_EVAL(f, isa, p, u, v, gdt, ck, sg, K, nl, L0, L1, gacc, nx, gaccg, m,
                                  lane_loss, gw) != 0;
                ps_flush_end(fp);
            } else {
                oom |= LANES_EVAL(d, isa, p, u, v, gdt, ck, sg, K, nl, L0, L1, gacc, nx, gaccg, m,
                                  lane_loss, gw) != 0;
            }
            free(ck);
            free(sg);
        }
    }

    if (!oom) {
        /* fixed-order sums: lanes in order, then the power penalty */
        double loss = 0.0;
        for (size_t l = 0; l < nl; l++)
            loss += lane_loss[l];
        *f = loss + des->lambda * ps_design_power_sum(b, nrf);
        if (sar.nq) {
            ps_sar_values(&sar, nt, b, sarv);
            *f += ps_sar_penalty(&sar, mu, sarv, &vmax);
            for (int q = 0; q < sar.nq; q++)
                sarw[q] = ps_sar_weight(&sar, mu, sarv[q]);
        }
        if (grad_g) { /* dF/dG_k = dt gamma sum_j r_j gth_z,jk, lanes in order */
            for (size_t i = 0; i < 3 * nt; i++) {
                double acc = 0.0;
                for (size_t l = 0; l < nl; l++)
                    acc += gaccg[l * 3 * nt + i];
                grad_g[i] = dtg * acc;
            }
        }
        /* the designed axes: their limits' penalty, then dF/dg (physical) or
         * through the reverse cumulative sum and atan to dF/dt */
        for (size_t i = 0; i < ng; i++) {
            const int a = des->axis[i];
            const double *bi = b + PS_X_G(nc, nt, i, 0);
            double *gi = grad ? grad + PS_X_G(nc, nt, i, 0) : NULL;
            if (gi)
                for (size_t k = 0; k < nt; k++)
                    gi[k] = grad_g[3 * k + a];
            *f += ps_gradient_penalty(des->gmax, des->g_end, mu, nt, bi, gi, &vmax);
            if (gi && des->slew)
                ps_slew_backward(des->smax, des->kappa[i], des->dt, nt, x + PS_X_G(nc, nt, i, 0), gi, gi);
        }
        if (viol)
            *viol = vmax;
        if (grad) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nthreads) if (ns * nt >= PS_CPU_PARALLEL_MIN)
#endif
            for (size_t ck = 0; ck < nc * nt; ck++) {
                const size_t iu = PS_X_U(nt, ck / nt, ck % nt), iv = PS_X_V(nt, ck / nt, ck % nt);
                double gu = 0.0, gv = 0.0;
                for (size_t l = 0; l < nl; l++) {
                    gu += gacc[l * nx + iu];
                    gv += gacc[l * nx + iv];
                }
                if (sar.nq)
                    ps_sar_step_grad(&sar, sarw, (int)(ck / nt), b + ck % nt, b + nt + ck % nt, 2 * nt,
                                     &gu, &gv);
                ps_design_step_grad(des, (int)(ck / nt), (int)(ck % nt), x[iu], x[iv], b[iu], b[iv], gu, gv, &grad[iu],
                                    &grad[iv]);
            }
        }
    }
    free(b);
    free(lane_loss);
    free(gacc);
    free(gaccg);
    free(dfdg);
    free(u);
    free(v);
    free(gdt);
    return oom ? PS_ERR_NO_MEMORY : PS_CONVERGED;
}

/* F and dF/db at the physical pulse b (no reparametrization, no penalty). */
int ps_objective_cpu_pulse(const ps_problem *p, int precision, int threads,
                           const double *x, double *f, double *grad, double *m)
{
    const ps_design des = ps_problem_design(p, 1);
    return objective(p, &des, 0.0, precision, threads, 0, x, f, grad, NULL, m, NULL);
}

int ps_objective_cpu_pulse_g(const ps_problem *p, int precision, int threads, const double *x,
                             double *f, double *grad, double *grad_g)
{
    if (!grad || !grad_g)
        return PS_ERR_NULL;
    const ps_design des = ps_problem_design(p, 1);
    return objective(p, &des, 0.0, precision, threads, 0, x, f, grad, grad_g, NULL, NULL);
}

int ps_objective_cpu(const ps_problem *p, int precision, int threads,
                     const double *x, double *f, double *grad, double *m)
{
    return ps_objective_cpu_segments(p, precision, threads, 0, x, f, grad, m);
}

int ps_objective_cpu_penalty(const ps_problem *p, int precision, int threads, double mu,
                             const double *x, double *f, double *grad, double *m, double *viol)
{
    const ps_design des = ps_problem_design(p, 0);
    return objective(p, &des, mu, precision, threads, 0, x, f, grad, NULL, m, viol);
}

int ps_objective_cpu_segments(const ps_problem *p, int precision, int threads, size_t seg,
                              const double *x, double *f, double *grad, double *m)
{
    const ps_design des = ps_problem_design(p, 0);
    return objective(p, &des, 0.0, precision, threads, seg, x, f, grad, NULL, m, NULL);
}
