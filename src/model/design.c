/*
 * The design variables of a problem on the host: its ps_design, the pulse
 * of a whole x and back, and the per-spin and per-step constants that both
 * backends round into their precision (model/design.h).
 */
#include "model/design.h"
#include "model/problem.h"

#define PS_PI 3.14159265358979323846

size_t ps_problem_nx(const ps_problem *p)
{
    return p ? PS_DESIGN_NX(p->nc, p->nt) + ps_problem_ng(p) * p->nt : 0;
}

ps_design ps_problem_design(const ps_problem *p, int physical)
{
    ps_design d;
    d.has_b1max = !physical && ps_problem_has_b1max(p);
    d.lambda = p->lambda;
    /* one channel's own limit is the limit of all */
    d.b1max = d.has_b1max ? ps_problem_b1max_of(p, 0) : 0.0;
    d.b1max_c = d.has_b1max && p->nc > 1 ? p->b1_max_channel : NULL;
    d.rf_mask = p->rf_mask;
    d.ng = (int)ps_problem_ng(p);
    for (int i = 0; i < 3; i++) {
        d.axis[i] = i < d.ng ? (int)ps_design_axis(p, (size_t)i) : 0;
        d.kappa[i] = i < d.ng ? p->slew_scale[d.axis[i]] : 1.0;
    }
    d.smax = p->smax;
    d.gmax = p->gmax;
    d.g_end = p->g_end;
    d.dt = p->dt;
    d.dtg = p->dt * 2.0 * PS_PI * p->gamma_bar;
    d.slew = !physical && p->design_g != 0;
    return d;
}

/* out = fn(in) step by step and channel by channel, in the layout of x
 * (out may equal in), the steps the RF mask holds at zero. */
static void each_step(const ps_problem *p, const double *in, double *out,
                      void (*fn)(const ps_design *, int, double, double, double *, double *))
{
    const ps_design d = ps_problem_design(p, 0);
    const size_t nt = p->nt;
    for (size_t c = 0; c < p->nc; c++)
        for (size_t k = 0; k < nt; k++)
            fn(&d, (int)c, in[PS_X_U(nt, c, k)], in[PS_X_V(nt, c, k)], &out[PS_X_U(nt, c, k)],
               &out[PS_X_V(nt, c, k)]);
    ps_design_hold(p, out);
}

/* The designed axes' part of x: from slew variables to waveforms (dir 1)
 * or back (0). */
static void each_axis(const ps_problem *p, const double *in, double *out, int to_g)
{
    const size_t nt = p->nt, ng = ps_problem_ng(p);
    for (size_t i = 0; i < ng; i++) {
        const double *a = in + PS_X_G(p->nc, nt, i, 0);
        double *o = out + PS_X_G(p->nc, nt, i, 0);
        const double kappa = p->slew_scale[ps_design_axis(p, i)];
        if (to_g)
            ps_slew_waveform(p->smax, kappa, p->dt, nt, a, o);
        else
            ps_slew_variables(p->smax, kappa, p->dt, p->gmax, nt, a, o);
    }
}

void ps_design_pulse_of_x(const ps_problem *p, const double *x, double *b)
{
    each_step(p, x, b, ps_design_pulse);
    each_axis(p, x, b, 1);
}

void ps_design_x_of_pulse(const ps_problem *p, const double *b, double *x)
{
    each_step(p, b, x, ps_design_from_pulse);
    each_axis(p, b, x, 0);
}

double ps_slew_scale(const ps_problem_desc *d, size_t a)
{
    double rmax = 0.0;
    for (size_t j = 0; j < d->ns; j++)
        rmax = fmax(rmax, fabs(d->r[3 * j + a]));
    if (!(rmax > 0.0))
        rmax = 1.0;
    return 1.0 / (rmax * d->dt * d->smax);
}

void ps_design_hold(const ps_problem *p, double *x)
{
    for (size_t c = 0; p->rf_mask && c < p->nc; c++)
        for (size_t k = 0; k < p->nt; k++)
            if (p->rf_mask[k] == 0.0)
                x[PS_X_U(p->nt, c, k)] = x[PS_X_V(p->nt, c, k)] = 0.0;
}

size_t ps_design_axis(const ps_problem *p, size_t i)
{
    size_t seen = 0;
    for (size_t a = 0; a < 3; a++)
        if (p->design_g >> a & 1u) {
            if (seen == i)
                return a;
            seen++;
        }
    return 3;
}

void ps_design_x_of_rows(size_t nc, size_t nt, const double *rows, double *x)
{
    for (size_t c = 0; c < nc; c++)
        for (size_t k = 0; k < nt; k++) {
            x[PS_X_U(nt, c, k)] = rows[2 * (c * nt + k)];
            x[PS_X_V(nt, c, k)] = rows[2 * (c * nt + k) + 1];
        }
}

void ps_design_rows_of_x(size_t nc, size_t nt, const double *x, double *rows)
{
    for (size_t c = 0; c < nc; c++)
        for (size_t k = 0; k < nt; k++) {
            rows[2 * (c * nt + k)] = x[PS_X_U(nt, c, k)];
            rows[2 * (c * nt + k) + 1] = x[PS_X_V(nt, c, k)];
        }
}

double ps_design_power_sum(const double *b, size_t nx)
{
    double power = 0.0;
    for (size_t i = 0; i < nx; i++)
        power += b[i] * b[i];
    return power;
}

void ps_design_spin(const ps_problem *p, size_t j, ps_spin_consts *s)
{
    const double gamma = 2.0 * PS_PI * p->gamma_bar;
    for (int c = 0; c < 3; c++) {
        s->r[c] = p->r[3 * j + c];
        s->m0[c] = p->m0 ? p->m0[3 * j + c] : (c == 2 ? 1.0 : 0.0);
    }
    for (size_t c = 0; c < p->nc; c++) {
        if (p->b1map) { /* [ns][nc][2] */
            const double *S = p->b1map + 2 * (j * p->nc + c);
            s->gS[c][0] = p->dt * gamma * S[0];
            s->gS[c][1] = p->dt * gamma * S[1];
        } else {
            s->gS[c][0] = p->dt * gamma * (p->b1scale ? p->b1scale[j] : 1.0);
            s->gS[c][1] = 0.0;
        }
    }
    s->wz = p->dt * 2.0 * PS_PI * (p->df ? p->df[j] : 0.0);
    ps_relax_decrements(p->dt, p->t1 ? p->t1[j] : 0.0, &s->a1, &s->b1);
    ps_relax_decrements(p->dt, p->t2 ? p->t2[j] : 0.0, &s->a2, &s->b2);
    s->w = p->w ? p->w[j] : 1.0;
}

void ps_design_gdt(const ps_problem *p, size_t k, double gdt[3])
{
    const double gamma = 2.0 * PS_PI * p->gamma_bar;
    for (int c = 0; c < 3; c++)
        gdt[c] = p->dt * gamma * p->g[3 * k + c];
}

int ps_design_axis_zero(const ps_problem *p, int c)
{
    return (int)(p->zero_axes >> c & 1u);
}

int ps_design_has_gradient(const ps_problem *p)
{
    return p->zero_axes != (PS_AXIS_X | PS_AXIS_Y | PS_AXIS_Z);
}
