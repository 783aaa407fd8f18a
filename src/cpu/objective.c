/*
 * CPU backend of the objective: OpenMP over fixed lanes of spins, each lane
 * accumulating its own gradient, then a fixed-order sum over lanes, so the
 * result does not depend on the number of threads.
 */
#include <stdlib.h>
#include <string.h>

#include "model/bloch_math.h"
#include "cpu/objective.h"
#include "model/problem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define PS_PI_D 3.14159265358979323846
#define PS_CPU_LANES 64 /* spin lanes: the unit of parallel work and of summation */
#define PS_CPU_PARALLEL_MIN 100000 /* spin-steps below which one thread is faster */

#define PS_REAL float
#define PS_SFX(name) name##_f
#include "cpu/objective_tmpl.h"
#undef PS_REAL
#undef PS_SFX
#define PS_REAL double
#define PS_SFX(name) name##_d
#include "cpu/objective_tmpl.h"
#undef PS_REAL
#undef PS_SFX

void ps_objective_pulse(const ps_problem *p, const double *x, double *b)
{
    size_t nt = p->nt;
    if (!ps_problem_has_b1max(p)) {
        if (b != x)
            memcpy(b, x, 2 * nt * sizeof *b);
        return;
    }
    for (size_t k = 0; k < nt; k++) {
        double u, v;
        ps_reparam_forward(p->b1_max, x[k], x[nt + k], &u, &v);
        b[k] = u;
        b[nt + k] = v;
    }
}

void ps_objective_from_pulse(const ps_problem *p, const double *b, double *x)
{
    size_t nt = p->nt;
    if (!ps_problem_has_b1max(p)) {
        if (b != x)
            memcpy(x, b, 2 * nt * sizeof *x);
        return;
    }
    for (size_t k = 0; k < nt; k++) {
        double zp, zq;
        ps_reparam_inverse(p->b1_max, b[k], b[nt + k], &zp, &zq);
        x[k] = zp;
        x[nt + k] = zq;
    }
}

/* Segment length of the checkpointed backward sweep: ceil(sqrt(nt)). */
static size_t segment_length(size_t nt)
{
    size_t K = (size_t)sqrt((double)nt);
    while (K * K < nt)
        K++;
    return K;
}

/* F and dF/db at the physical pulse b (no reparametrization). */
int ps_objective_cpu_pulse(const ps_problem *p, int precision, int threads,
                           const double *x, double *f, double *grad, double *m)
{
    size_t nt = p->nt, ns = p->ns;
    size_t K = segment_length(nt), nseg = (nt + K - 1) / K;
    size_t nl = ns < PS_CPU_LANES ? ns : PS_CPU_LANES;
    int single = precision == PS_PRECISION_SINGLE;
    size_t rs = single ? sizeof(float) : sizeof(double);
    double gamma = 2.0 * PS_PI_D * p->gamma_bar;

    const double *b = x;
    double *lane_loss = calloc(nl, sizeof *lane_loss);
    double *gacc = grad ? calloc(nl * 2 * nt, sizeof *gacc) : NULL;
    /* pulse and per-step gradient rotation in the spin loop's precision */
    void *u = malloc(nt * rs), *v = malloc(nt * rs), *gdt = malloc(3 * nt * rs);
    int oom = !lane_loss || (grad && !gacc) || !u || !v || !gdt;
    if (!oom) {
        for (size_t k = 0; k < nt; k++) {
            double gk[3] = {p->dt * gamma * p->g[3 * k],
                            p->dt * gamma * p->g[3 * k + 1],
                            p->dt * gamma * p->g[3 * k + 2]};
            if (single) {
                ((float *)u)[k] = (float)b[k];
                ((float *)v)[k] = (float)b[nt + k];
                for (int c = 0; c < 3; c++)
                    ((float *)gdt)[3 * k + c] = (float)gk[c];
            } else {
                ((double *)u)[k] = b[k];
                ((double *)v)[k] = b[nt + k];
                for (int c = 0; c < 3; c++)
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
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) reduction(|| : oom) if (ns * nt >= PS_CPU_PARALLEL_MIN)
#endif
        for (size_t l = 0; l < nl; l++) {
            size_t j0 = l * ns / nl, j1 = (l + 1) * ns / nl;
            void *ck = malloc(3 * nseg * rs), *sg = malloc(3 * K * rs);
            double *ga = gacc ? gacc + l * 2 * nt : NULL;
            if (!ck || !sg) {
                oom = 1;
            } else if (single) {
                spin_ws_f ws = {u, v, gdt, ck, sg};
                lane_loss[l] = lane_eval_f(p, &ws, K, j0, j1, ga, m);
            } else {
                spin_ws_d ws = {u, v, gdt, ck, sg};
                lane_loss[l] = lane_eval_d(p, &ws, K, j0, j1, ga, m);
            }
            free(ck);
            free(sg);
        }
    }

    if (!oom) {
        /* fixed-order sums: lanes in order, then the power penalty */
        double loss = 0.0, power = 0.0;
        for (size_t l = 0; l < nl; l++)
            loss += lane_loss[l];
        for (size_t i = 0; i < 2 * nt; i++)
            power += b[i] * b[i];
        *f = loss + p->lambda * power;
        if (grad) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nthreads) if (ns * nt >= PS_CPU_PARALLEL_MIN)
#endif
            for (size_t i = 0; i < 2 * nt; i++) {
                double s = 0.0;
                for (size_t l = 0; l < nl; l++)
                    s += gacc[l * 2 * nt + i];
                grad[i] = s + 2.0 * p->lambda * b[i];
            }
        }
    }
    free(lane_loss);
    free(gacc);
    free(u);
    free(v);
    free(gdt);
    return oom ? PS_ERR_NO_MEMORY : PS_CONVERGED;
}

int ps_objective_cpu(const ps_problem *p, int precision, int threads,
                     const double *x, double *f, double *grad, double *m)
{
    if (!ps_problem_has_b1max(p))
        return ps_objective_cpu_pulse(p, precision, threads, x, f, grad, m);
    size_t nt = p->nt;
    double *b = malloc(2 * nt * sizeof *b);
    if (!b)
        return PS_ERR_NO_MEMORY;
    ps_objective_pulse(p, x, b);
    int st = ps_objective_cpu_pulse(p, precision, threads, b, f, grad, m);
    if (st == PS_CONVERGED && grad) {
        /* chain rule through b = bm tanh(|z|) z/|z| (model/bloch_math.h) */
        for (size_t k = 0; k < nt; k++)
            ps_reparam_backward(p->b1_max, x[k], x[nt + k], grad[k],
                                grad[nt + k], &grad[k], &grad[nt + k]);
    }
    free(b);
    return st;
}
