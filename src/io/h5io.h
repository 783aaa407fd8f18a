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

#include <signal.h>
#include <stdint.h>
#include <stddef.h>

#include "persolve.h"

/* Read a problem file into a new problem: its datasets and root
 * attributes, the gradient design's too (design_g, smax, gmax, g_end) and
 * the RF mask /pulse/rf_mask [Nt]. Numbers may be float or integer. Only a
 * regular file is opened (a FIFO, device or directory is refused first).
 * This reads in the calling process: a file that crashes or hangs libhdf5
 * does so here (ps_h5_read_problem_isolated does not). */
int ps_h5_read_problem(const char *path, ps_problem **out, char *err,
                       size_t errlen);

/* How a problem file is read. */
typedef struct ps_h5_read_opts {
    int strict; /* 1: a name the reader does not know is an error */
    /* receives each warning, "FILE: /spins/T1: unknown dataset, ignored
     * (the closest known name is /spins/t1)" (NULL: none) */
    void (*warn)(void *user, const char *msg);
    void *warn_user;
    /* ps_h5_read_problem_isolated: when this becomes nonzero (a signal
     * handler's flag) the reading child is killed and the read returns
     * PS_CANCELLED (NULL: never) */
    const volatile sig_atomic_t *cancel;
    /* told, with warn_user, the bytes of each array before it is read
     * (ps_h5_read_problem_isolated: in the calling process once the
     * reading child has ended, as it reported them; its default time
     * limit grows by them as they come) (NULL: not told) */
    void (*reading)(void *user, uint64_t bytes);
    /* the memory the arrays may take, bytes (0: ps_memory_bytes()):
     * arrays whose copies held at once would pass it are refused before
     * they are read (PS_ERR_NO_MEMORY) */
    double memory;
    /* those copies: 0 or 2 for ps_h5_read_problem_ex (the arrays read and
     * the problem made from them); ps_h5_read_problem_isolated's child
     * reads with 4 (its two, the pipe's buffer and the calling process's
     * problem) */
    int copies;
} ps_h5_read_opts;

/* ps_h5_read_problem with names checked: every top-level group, dataset
 * of /spins, /pulse and /sar, root attribute and attribute of /sar/vop
 * that the reader does not know is a warning through opts->warn naming
 * the closest known name, or with opts->strict an error (PS_ERR_FILE).
 * opts NULL: no check. */
int ps_h5_read_problem_ex(const char *path, const ps_h5_read_opts *opts, ps_problem **out,
                          char *err, size_t errlen);

/* The default time limit of an isolated read: PS_H5_READ_TIMEOUT seconds
 * and one more per PS_H5_READ_RATE bytes of the file (a slow disk's
 * 20 MB/s: the time limit is for a reader that loops, not one that
 * reads). */
#define PS_H5_READ_TIMEOUT 10.0
#define PS_H5_READ_RATE 20e6

/*
 * ps_h5_read_problem_ex in a child process (fork): the child reads the
 * file and sends the problem's arrays and scalars (and the warnings) back
 * through a pipe, the parent builds the same problem from them. A child
 * that crashes (libhdf5 on a corrupted file) or does not finish within
 * timeout_s seconds (<= 0: PS_H5_READ_TIMEOUT, PS_H5_READ_RATE) is killed and the file
 * reported as corrupt (PS_ERR_FILE), so no file can crash or hang the
 * caller. The child dies with its parent.
 */
int ps_h5_read_problem_isolated(const char *path, const ps_h5_read_opts *opts, double timeout_s,
                                ps_problem **out, char *err, size_t errlen);

/* ps_h5_read_x in a child process, as ps_h5_read_problem_isolated. */
int ps_h5_read_x_isolated(const char *path, const ps_problem *p, double timeout_s, double *x,
                          char *err, size_t errlen);

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

/* What a result file records beside the result itself. Any member may be
 * NULL (not written) or, for gnorm_physical, NaN. */
typedef struct ps_h5_result_info {
    double gnorm_physical;    /* |grad F| at x in the pulse's own variables (u, v in G and
                               * the designed waveforms), as eval reports it */
    const char *gnorm_test;   /* the variables of r->gnorm, which the convergence test
                               * used ("physical", or the optimizer's reparametrization) */
    const char *input;        /* the problem file's name or the preset spec */
    const char *command_line; /* as given */
    const char *options;      /* every option in effect, "backend=auto precision=..." */
    const char *created;      /* UTC date and time, ISO 8601 */
} ps_h5_result_info;

/* ps_h5_write_result with its provenance on /result: the attributes
 * persolve_version, build_id (this library's, PS_BUILD_ID), input,
 * command_line, options, created, gnorm_physical and gnorm_test from info
 * (NULL: none of them). */
int ps_h5_write_result_info(const char *path, const ps_problem *p, const double *x,
                            const double *m, const ps_result *r,
                            const ps_h5_result_info *info, char *err, size_t errlen);

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

/* ps_h5_write_eval with the provenance of ps_h5_write_result_info on
 * /eval (info NULL: none; its gnorm_physical is |grad F| of the pulse). */
int ps_h5_write_eval_info(const char *path, const ps_problem *p, const double *x, double f,
                          const double *grad, const double *grad_g, const double *m,
                          const ps_h5_result_info *info, char *err, size_t errlen);

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
