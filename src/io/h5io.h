/*
 * HDF5 problem, result and eval files (docs/file-format.md), through the
 * HDF5 C library. Used by the CLI; the core library does not depend on HDF5.
 *
 * Every function returns a ps_status (PS_ERR_FILE for any file problem, or
 * the validation status of the problem read) and, on error, writes a
 * message into err[errlen] that names the file, the dataset or attribute,
 * and what is wrong ("/spins/r: expected shape [Ns,3], got [400,2]").
 * Pulses are passed in solver layout x (model/design.h: channel-major,
 * u_c1..u_cNt, v_c1..v_cNt for each channel c); files hold rows (u, v):
 * [Nt,2] for one channel, [Nc,Nt,2] for several.
 */
#ifndef PS_SRC_H5IO_H
#define PS_SRC_H5IO_H

#include <stddef.h>

#include "persolve.h"

/* Read a problem file into a new problem: its datasets and root
 * attributes, the gradient design's too (design_g, smax, gmax, g_end) and
 * the RF mask /pulse/rf_mask [Nt]. */
int ps_h5_read_problem(const char *path, ps_problem **out, char *err,
                       size_t errlen);

/* Write a problem file (the problem's x0 as /pulse/b1; with several
 * channels /spins/b1map [Ns,Nc,2] and /pulse/b1 [Nc,Nt,2]; with VOPs
 * /sar/vop [Nq,Nc,Nc,2] and its attributes sar_max, tr; per-channel peak
 * limits as the root attribute b1_max [Nc], one limit as a scalar; with
 * designed gradient axes the root attributes design_g ("xy"), smax, gmax
 * (when set) and g_end (int32); /pulse/rf_mask [Nt] when the problem has
 * one). It reads back into a problem of the same hash (opt/checkpoint.h). */
int ps_h5_write_problem(const char *path, const ps_problem *p, char *err,
                        size_t errlen);

/*
 * Write a result file: the problem's groups, /pulse/b1 = x (in the shape
 * of the problem's /pulse/b1), /pulse/g with the designed axes' columns
 * x's waveforms (the others the problem's), /result/m =
 * m[ns][3], /result/history [rows][7] (iteration, f, gradient norm, step,
 * evaluations, seconds, penalty round), the attributes status,
 * iterations, evaluations, f, backend, device on /result, and
 * /result/constraints: the attributes rounds, mu, violation of r, the
 * peak |b_ck| of x per channel (peak_b1 [Nc]), the limits (b1_max [Nc],
 * with a peak limit) and SAR_q of x (sar [Nq] with attribute sar_max, with
 * VOPs), by ps_constraints(), the attribute rf_free_steps (the steps the
 * RF mask leaves free, Nt without one) and, with designed gradient axes,
 * by ps_gradient_constraints() the attribute design_g and per designed
 * axis peak_g [Ng] (max |g|, G/cm, attribute gmax when set), peak_slew
 * [Ng] (max |slew|, G/cm/s, attribute smax) and end_g [Ng] (|g(T)|, G/cm,
 * attribute g_end).
 */
int ps_h5_write_result(const char *path, const ps_problem *p, const double *x,
                       const double *m, const ps_result *r, char *err,
                       size_t errlen);

/*
 * Write an eval file: the problem's groups with /pulse/b1 = x (and /pulse/g
 * as in a result file), /eval/gradient (dF/du, dF/dv: the RF part of
 * grad[nx]) in the shape of /pulse/b1 ([Nt,2], or [Nc,Nt,2] for several
 * channels), /eval/gradient_g [Nt,3] = grad_g (dF/dG of every axis,
 * ps_eval_g; not written when grad_g is NULL), attribute f on /eval,
 * /result/m.
 */
int ps_h5_write_eval(const char *path, const ps_problem *p, const double *x,
                     double f, const double *grad, const double *grad_g, const double *m,
                     char *err, size_t errlen);

/* Read /pulse/b1 of nc channels of nt steps ([nt,2] for nc = 1, a rank-3
 * [1,nt,2] too; [nc,nt,2] for several) of any file into x[2*nc*nt]. */
int ps_h5_read_pulse(const char *path, size_t nc, size_t nt, double *x, char *err,
                     size_t errlen);

/* Read a whole point x[ps_problem_nx(p)] of p from any file: /pulse/b1 as
 * ps_h5_read_pulse and, for each designed gradient axis, its column of
 * /pulse/g [Nt,3] (finite), the waveform after the pulse (as a result
 * file holds the designed waveforms). */
int ps_h5_read_x(const char *path, const ps_problem *p, double *x, char *err, size_t errlen);

#endif /* PS_SRC_H5IO_H */
