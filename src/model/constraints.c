/*
 * The constraints of a problem on the host (model/constraints.h): its SAR
 * constraint, the SAR and peak values of a whole pulse, the amplitude,
 * slew and last value of a gradient waveform.
 */
#include <math.h>

#include "model/constraints.h"
#include "model/design.h"
#include "model/problem.h"

ps_sar ps_problem_sar(const ps_problem *p)
{
    ps_sar s;
    s.nq = (int)p->nq;
    s.nc = (int)p->nc;
    s.vop = p->vop;
    s.scale = p->nq ? p->dt / p->tr : 0.0;
    s.sar_max = p->nq ? p->sar_max : 1.0;
    return s;
}

void ps_sar_values(const ps_sar *S, size_t nt, const double *b, double *sar)
{
    for (int q = 0; q < S->nq; q++) {
        const double *Q = S->vop + (size_t)2 * S->nc * S->nc * q;
        double sum = 0.0;
        for (size_t k = 0; k < nt; k++)
            sum += ps_sar_quad(Q, S->nc, b + PS_X_U(nt, 0, k), b + PS_X_V(nt, 0, k), 2 * nt);
        sar[q] = ps_sar_of_sum(S, sum);
    }
}

void ps_peak_values(size_t nc, size_t nt, const double *b, double *peak)
{
    for (size_t c = 0; c < nc; c++) {
        double m = 0.0;
        for (size_t k = 0; k < nt; k++)
            m = fmax(m, hypot(b[PS_X_U(nt, c, k)], b[PS_X_V(nt, c, k)]));
        peak[c] = m;
    }
}

void ps_gradient_values(size_t nt, double dt, const double *g, size_t stride, double out[3])
{
    double peak = 0.0, slew = 0.0, prev = 0.0;
    for (size_t k = 0; k < nt; k++) {
        const double gk = g[k * stride];
        peak = fmax(peak, fabs(gk));
        slew = fmax(slew, fabs(gk - prev) / dt);
        prev = gk;
    }
    out[0] = peak;
    out[1] = slew;
    out[2] = fabs(prev);
}
