/*
 * An independent float64 reference of the Bloch model of docs/model.md,
 * for the tests. It shares no code with src/: the step is Rodrigues'
 * formula R(n, -phi) written plainly in n = b/|b| and phi = |b| dt, the
 * whole trajectory M_0..M_Nt of each spin is stored, and the exact gradient
 * is a reverse sweep over that stored trajectory whose per-step Jacobians
 * (with respect to u_k, v_k and M_{k-1}) come from forward-mode dual numbers
 * pushed through the same plain step.
 *
 * Everything takes a ps_problem_desc (only its data fields are read:
 * b1_max is ignored, the pulse x is always the physical pulse) and the
 * pulse x[2 nc nt] in G, channel-major as the library's unknowns
 * (SPEC 1.1): x[2 c nt + k] = u_ck, x[(2 c + 1) nt + k] = v_ck; one
 * channel: (u_1..u_Nt, v_1..v_Nt). With a b1map [ns][nc][2] the field is
 * sum_c S_jc (u_ck + i v_ck); without one, nc = 1 and S_j1 = b1scale_j.
 */
#ifndef PS_TESTS_REF_BLOCH_H
#define PS_TESTS_REF_BLOCH_H

#include <stddef.h>
#include <stdint.h>

#include "persolve.h"

/* The most channels the reference handles (its dual numbers carry
 * 2 REF_MAX_NC + 3 derivatives); problems with more are refused (-1). */
#define REF_MAX_NC 8

/* Channels of d: nc, 0 meaning 1. */
size_t ref_nc(const ps_problem_desc *d);

/*
 * Trajectory of spin j: traj[(nt+1)][3] receives M_0..M_Nt.
 * Returns 0, or -1 on a bad argument.
 */
int ref_trajectory(const ps_problem_desc *d, const double *x, size_t j,
                   double *traj);

/* Final magnetization M_Nt of every spin into m[ns][3]. Returns 0 or -1. */
int ref_simulate(const ps_problem_desc *d, const double *x, double *m);

/*
 * F(x) = loss + lambda sum_c sum_k (u_ck^2 + v_ck^2) into *f, the exact
 * gradient dF/d(u, v) into grad[2 nc nt] (may be NULL; the layout of x) and
 * M_Nt into m[ns][3] (may be NULL). Returns 0, or -1 on a bad argument
 * (more than REF_MAX_NC channels, nc > 1 without a b1map) or allocation
 * failure.
 */
int ref_eval(const ps_problem_desc *d, const double *x, double *f, double *grad,
             double *m);

/*
 * One plain step for one spin, exposed for the model tests: from M (m[3])
 * with field b[3] (rad/s) for dt seconds, then relaxation when relax != 0
 * (e1 = exp(-dt/T1), e2 = exp(-dt/T2)). out[3] receives M'.
 */
void ref_step(const double b[3], double dt, int relax, double e1, double e2,
              const double m[3], double out[3]);

/* ---- random test problems ---- */

/* Relaxation of a random problem. */
enum {
    REF_RELAX_NONE = 0,   /* no T1/T2 */
    REF_RELAX_MILD = 1,   /* T1, T2 of the order of the pulse length */
    REF_RELAX_STRONG = 2, /* T2 a fraction of the pulse length */
};

typedef struct ref_problem_opts {
    size_t ns, nt;
    ps_loss loss;
    int relax;     /* REF_RELAX_* */
    double lambda; /* >= 0 */
    double b1_max; /* PS_B1MAX_NONE or > 0 */
    int zero_spin; /* 1: spin 0 has r = 0, df = 0, and the pulse (and z)
                         is zero at every step k with k % 3 == 1 (every
                         channel), so that |b| = 0 there for that spin */
    size_t nc;     /* 0: one channel with the B1 scale (b1scale, no b1map);
                      1..REF_MAX_NC: that many channels through a random
                      complex b1map (b1scale NULL) */
    uint64_t seed;
} ref_problem_opts;

/*
 * A random problem with owned arrays: positions up to 3 cm, a smooth
 * three-axis gradient waveform up to 2 G/cm plus noise, df up to 300 Hz,
 * B1 scales 0.7..1.3, weights 0..2 (one zero), m0 and targets on the unit
 * sphere, dt = 4 us; rotations per step from far below to well above the
 * series switch of src/model/bloch_math.h. x is a random physical pulse (G),
 * z random optimizer variables for a b1_max problem (|z| up to ~2.5).
 * With nc > 0: a b1map of random complex S_jc (|S| 0.4..1.2, any phase;
 * spin 1 has S = 0.9 i on channel 0 and S = 0.7 on channel 1), and each
 * channel's pulse 1/sqrt(nc) times the one-channel size. nc = 0 draws
 * exactly the problems it drew before channels existed.
 */
typedef struct ref_problem {
    ps_problem_desc d;
    double *r, *target, *df, *b1scale, *w, *m0, *t1, *t2, *g, *b1;
    double *b1map; /* [ns][nc][2], or NULL (nc = 0) */
    double *x; /* [2 nc nt] pulse (u, v) per channel, G */
    double *z; /* [2 nc nt] optimizer variables for b1_max */
} ref_problem;

/* Returns 0, or -1 on allocation failure (then nothing is owned). */
int ref_problem_random(const ref_problem_opts *o, ref_problem *rp);
void ref_problem_free(ref_problem *rp);

#endif /* PS_TESTS_REF_BLOCH_H */
