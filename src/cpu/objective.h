/*
 * The objective F(x) = loss(M_Nt(x)) + lambda sum_k (u_k^2 + v_k^2) and its
 * exact gradient on the CPU (docs/model.md), in the optimizer's variables.
 */
#ifndef PS_SRC_OBJECTIVE_H
#define PS_SRC_OBJECTIVE_H

#include "persolve.h"

/* Spin lanes: the unit of summation. Lane i of nl = min(ns, PS_CPU_LANES)
 * holds spins [i ns/nl, (i+1) ns/nl); each lane sums its spins' loss and
 * gradient from 0 in spin order, then F and the gradient sum the lanes in
 * order, so the bits depend on neither the thread count nor on how the
 * spins are grouped for the vector units (cpu/objective_tmpl.h). */
#define PS_CPU_LANES 64

/* The instruction set of the spin loops: the build's baseline (SSE2 on
 * x86-64), or AVX2 or AVX-512 (F, DQ, VL) where the build has those paths
 * (x86-64, GCC) and the CPU the instructions. The same bits every way
 * (NaNs aside: their sign and payload follow the order of an operation's
 * operands). */
enum { PS_CPU_ISA_BASE = 0, PS_CPU_ISA_AVX2 = 1, PS_CPU_ISA_AVX512 = 2 };

/* The one the next calls take. */
int ps_cpu_isa(void);

/* Caps the instruction set of every later call at limit (PS_CPU_ISA_*; for
 * tests, before any call, not while one runs); returns ps_cpu_isa(). */
int ps_cpu_isa_limit(int limit);

/* Caps the spins simulated together (32) at limit (1: one spin at a time,
 * as a loop over spins; tests, as ps_cpu_isa_limit): the same bits for
 * every limit. Returns the cap now in force. */
int ps_cpu_group_limit(int limit);

/*
 * CPU evaluation. x[nx] is the optimizer's variable: the pulse (u, v)
 * itself, or with a finite b1_max the reparametrized z (model/design.h).
 * grad[nx] (may be NULL) is dF/dx in the same variables; m[ns][3] (may be
 * NULL) receives M_Nt. precision: PS_PRECISION_SINGLE | _DOUBLE; threads:
 * 0 = OpenMP default. Results do not depend on the thread count.
 * Returns PS_CONVERGED (0) or PS_ERR_NO_MEMORY.
 */
int ps_objective_cpu(const ps_problem *p, int precision, int threads,
                     const double *x, double *f, double *grad, double *m);

/*
 * The same with the penalty of the constraints met by penalty (local SAR,
 * model/constraints.h) at weight mu: the objective of a penalty round.
 * *viol (may be NULL) receives the largest relative violation at x (0 when
 * every constraint is met). ps_objective_cpu is this at mu = 0.
 */
int ps_objective_cpu_penalty(const ps_problem *p, int precision, int threads, double mu,
                             const double *x, double *f, double *grad, double *m, double *viol);

/* The same at the physical pulse with, into grad_g[nt][3], dF/dG_k: the
 * gradient with respect to the gradient waveform itself (every axis, G/cm;
 * SPEC 3's /eval/gradient_g), from the adjoint's z component: dF/dG_ka =
 * gamma dt sum_j r_ja dL/dtheta_z,jk. grad and grad_g must not be NULL
 * (PS_ERR_NULL). */
int ps_objective_cpu_pulse_g(const ps_problem *p, int precision, int threads, const double *x,
                             double *f, double *grad, double *grad_g);

/* F and dF/dx at the physical pulse x = (u, v), whatever b1_max is, without
 * the penalty. */
int ps_objective_cpu_pulse(const ps_problem *p, int precision, int threads,
                           const double *x, double *f, double *grad, double *m);

/* ps_objective_cpu with the backward sweep's segment length seg (steps;
 * 0: the automatic one, every state kept unless a group's states pass
 * 16 MiB, past 43,690 steps in float32 and 21,845 in float64, with groups
 * of 32 spins): seg < nt keeps checkpoints every seg steps and replays each
 * segment from its own, seg >= nt keeps every state. The same results bit
 * for bit for every seg. */
int ps_objective_cpu_segments(const ps_problem *p, int precision, int threads, size_t seg,
                              const double *x, double *f, double *grad, double *m);

#endif /* PS_SRC_OBJECTIVE_H */
