/*
 * persolve: a whole nonlinear optimization inside one persistent GPU kernel,
 * with a CPU backend that runs the same algorithm.
 *
 * Public C11 API. No CUDA types appear here. The library never prints and
 * never exits: every function returns a ps_status, and an optional log
 * callback (ps_options.log) receives the file:line and the failed condition.
 *
 * Units (docs/model.md): positions in cm, gradients in G/cm, RF in G
 * (complex b1 = u + i v), dt in s, off-resonance in Hz, T1/T2 in s,
 * gamma-bar in Hz/G. Unknowns x = (u_1..u_Nt, v_1..v_Nt): 2*Nt doubles.
 */
#ifndef PERSOLVE_H
#define PERSOLVE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PS_VERSION_MAJOR 0
#define PS_VERSION_MINOR 3
#define PS_VERSION_PATCH 0

/** Default gyromagnetic ratio over 2 pi, Hz/G (protons). */
#define PS_GAMMA_BAR_DEFAULT 4257.59

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * One status for every function. Values are pinned: 0 and small positives
 * are normal ends of a solve, negatives are errors (one per class).
 */
typedef enum ps_status {
    PS_CONVERGED            = 0,  ///< relative gradient norm below gtol
    PS_CONVERGED_FTOL       = 1,  ///< relative decrease of f over `past` iterations below ftol,
                                  ///< or no decrease measurable above f's noise (fnoise)
    PS_MAX_ITERATIONS       = 2,  ///< max_iterations reached
    PS_MAX_EVALUATIONS      = 3,  ///< max_evaluations reached
    PS_TIME_LIMIT           = 4,  ///< time_limit reached
    PS_CANCELLED            = 5,  ///< the progress callback asked to stop
    PS_YIELDED              = 6,  ///< (reserved for asynchronous runs)
    PS_RUNNING              = 7,  ///< asynchronous run: not finished yet (ps_run_wait
                                  ///< timed out; ps_snapshot.status before the end)
    PS_CONSTRAINT_VIOLATED  = 8,  ///< the solve converged, but after the last penalty round
                                  ///< (ps_options.max_rounds) a constraint is still violated
                                  ///< by more than constraint_tol (ps_result.violation)

    PS_ERR_NULL             = -1,  ///< a required pointer is NULL
    PS_ERR_SIZE             = -2,  ///< Ns = 0, Nt = 0 or a size too large
    PS_ERR_NONFINITE        = -3,  ///< NaN or Inf in an input array or scalar
    PS_ERR_DT               = -4,  ///< dt <= 0 (or gamma_bar <= 0)
    PS_ERR_NEGATIVE         = -5,  ///< a negative weight or lambda
    PS_ERR_RELAXATION       = -6,  ///< T1 or T2 <= 0
    PS_ERR_LOSS             = -7,  ///< unknown loss type or name
    PS_ERR_B1MAX            = -8,  ///< b1_max <= 0 or NaN
    PS_ERR_OPTION           = -9,  ///< an options field is out of range
    PS_ERR_LINE_SEARCH      = -10, ///< line search failed; x is the last good point
    PS_ERR_OBJECTIVE        = -11, ///< the objective is NaN/Inf at the start point
    PS_ERR_NO_MEMORY        = -12, ///< host allocation failed
    PS_ERR_NO_GPU           = -13, ///< no usable GPU (or built without CUDA)
    PS_ERR_GPU_UNSUPPORTED  = -14, ///< GPU lacks cooperative launch
    PS_ERR_GPU_MEMORY       = -15, ///< device allocation failed
    PS_ERR_GPU_LAUNCH       = -16, ///< kernel launch or execution failed
    PS_ERR_NOT_IMPLEMENTED  = -17, ///< feature not available in this build
    PS_ERR_PRESET           = -18, ///< unknown preset name or bad preset key/value
    PS_ERR_FILE             = -19, ///< file missing, unreadable or malformed
    PS_ERR_STATE            = -20, ///< asynchronous run: call not allowed in its state
    PS_ERR_CHECKPOINT       = -21, ///< checkpoint corrupted, truncated, of another problem,
                                   ///< version or algorithmic settings (reason logged)
    PS_ERR_CHANNELS         = -22, ///< transmit channels inconsistent: nc > 1 without a b1map,
                                   ///< a b1map together with a b1scale
    PS_ERR_SAR              = -23, ///< SAR constraint malformed: a VOP not Hermitian or not
                                   ///< positive semidefinite, sar_max or tr not positive
    PS_ERR_GRADIENT         = -24, ///< gradient design malformed: design_g with smax not positive,
                                   ///< gmax or g_end without design_g, g_end without gmax
    PS_ERR_RF_MASK          = -25, ///< rf_mask holds a value other than 0 or 1
    PS_ERR_SCALE            = -26, ///< values each finite that leave float32's range: a factor of
                                   ///< the spin loops (dt's rotation per G, B1 sensitivity, pulse
                                   ///< peak or limit, |r|, |g|, |df|) outside [1e-30, 1e30], a
                                   ///< step's rotation above 1e30 rad, lambda's penalty or the
                                   ///< gmax ratio overflowing
} ps_status;

/** Static English text for a status (never NULL). */
const char *ps_strerror(int status);

/** Library version string, e.g. "0.2.0". */
const char *ps_version(void);

/* ------------------------------------------------------------------------ */
/* Problem                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum ps_loss {
    PS_LOSS_FULL = 0, ///< sum w |M - Mt|^2
    PS_LOSS_XY   = 1, ///< sum w ((Mx-Mtx)^2 + (My-Mty)^2)
    PS_LOSS_MLS  = 2, ///< sum w (|Mxy| - |Mtxy|)^2  (magnitude least squares)
    PS_LOSS_Z    = 3, ///< sum w (Mz - Mtz)^2
} ps_loss;

/** Parse "full" | "xy" | "mls" | "z". Returns PS_ERR_LOSS for anything else. */
int ps_loss_parse(const char *name, ps_loss *out);
/** Name of a loss type, or NULL if out of range. */
const char *ps_loss_name(ps_loss loss);

/** The most transmit channels a problem may have (ps_problem_desc.nc). */
#define PS_MAX_CHANNELS 64

/** The most VOPs a problem may have (ps_problem_desc.nq). */
#define PS_MAX_VOPS 256

/** Gradient axes a design may shape (ps_problem_desc.design_g, a bit mask). */
enum { PS_AXIS_X = 1, PS_AXIS_Y = 2, PS_AXIS_Z = 4 };

/**
 * Parse a set of gradient axes, as files and presets write design_g: "x",
 * "y", "z" or several of them in that order ("xy", "xz", "yz", "xyz"),
 * into PS_AXIS_* bits. PS_ERR_GRADIENT for anything else (empty, another
 * letter, an axis twice or out of order), PS_ERR_NULL for NULL.
 */
int ps_design_g_parse(const char *name, unsigned *axes);
/**
 * The name of a set of axes ("xy"; "" for none) into buf[len] (len >= 4,
 * else PS_ERR_SIZE). PS_ERR_GRADIENT for bits beyond PS_AXIS_X | PS_AXIS_Y
 * | PS_AXIS_Z.
 */
int ps_design_g_name(unsigned axes, char *buf, size_t len);

/** No peak constraint: the value of ps_problem_desc.b1_max for "none". */
#define PS_B1MAX_NONE HUGE_VAL

/**
 * Plain-array description of a problem (docs/model.md). Arrays are
 * row-major; the library copies them in ps_problem_create().
 */
typedef struct ps_problem_desc {
    size_t ns;              ///< number of spins (>= 1)
    size_t nt;              ///< number of time steps (>= 1)
    size_t nc;              ///< number of transmit channels, 1..PS_MAX_CHANNELS (0: 1)
    size_t nq;              ///< number of SAR VOPs, 0..PS_MAX_VOPS (0: no SAR limit)
    const double *r;        ///< [ns][3] positions, cm (required)
    const double *target;   ///< [ns][3] target magnetization (required)
    const double *df;       ///< [ns] off-resonance, Hz (NULL: 0)
    const double *b1scale;  ///< [ns] B1 scale s_j of the one channel (NULL: 1; NULL
                            ///< when b1map is given)
    const double *w;        ///< [ns] weights >= 0 (NULL: 1)
    const double *m0;       ///< [ns][3] start magnetization (NULL: (0,0,1))
    const double *t1;       ///< [ns] T1 > 0, s (NULL: no T1 relaxation)
    const double *t2;       ///< [ns] T2 > 0, s (NULL: no T2 relaxation)
    const double *b1map;    ///< [ns][nc][2] complex B1+ sensitivity S_jc (Re, Im) of
                            ///< every channel (NULL: nc = 1 and S_j1 = b1scale_j)
    const double *g;        ///< [nt][3] gradient waveform, G/cm (required)
    const double *b1;       ///< [nc][nt][2] start pulse (u, v) per channel, G (NULL: 0)
    const double *vop;      ///< [nq][nc][nc][2] VOP matrices Q_q (Re, Im; Hermitian, positive
                            ///< semidefinite), W/kg per G^2: SAR_q = (dt / tr) sum_k b_k^H Q_q b_k
                            ///< (NULL when nq = 0)
    const double *rf_mask;  ///< [nt] 1: the RF of every channel is free at that step, 0: it is
                            ///< held at zero (NULL: free everywhere); the pulse's variables at a
                            ///< held step are zero and their gradient is zero, so they are
                            ///< constants of the design, not unknowns
    double dt;              ///< time step, s (> 0)
    double gamma_bar;       ///< Hz/G (0: PS_GAMMA_BAR_DEFAULT)
    double lambda;          ///< RF power penalty weight (>= 0)
    ps_loss loss;           ///< loss type
    double b1_max;          ///< peak |b1| in G (> 0), or PS_B1MAX_NONE
    const double *b1_max_channel; ///< [nc] peak |b_c| per channel, G (> 0, finite; NULL: b1_max
                            ///< for every channel; given, b1_max must be PS_B1MAX_NONE)
    double sar_max;         ///< local SAR limit, W/kg (> 0 when nq > 0)
    double tr;              ///< repetition time of the SAR average, s (> 0 when nq > 0)
    unsigned design_g;      ///< gradient axes designed with the pulse (PS_AXIS_* bits; 0: g is
                            ///< fixed); their waveform is part of x (ps_problem_nx), g the start
    double smax;            ///< slew limit of the designed axes, G/cm/s (> 0 with design_g)
    double gmax;            ///< amplitude limit of the designed axes, G/cm (> 0; 0: none)
    int g_end;              ///< 1: the designed axes return to zero at the last step (needs gmax,
                            ///< the scale of its tolerance)
} ps_problem_desc;

/** Zero-filled description with gamma_bar default, loss full, no b1_max. */
void ps_problem_desc_init(ps_problem_desc *d);

typedef struct ps_problem ps_problem; ///< opaque, immutable once created

/**
 * Check every field of d. Returns its status class (PS_ERR_NULL,
 * PS_ERR_SIZE, PS_ERR_NONFINITE, PS_ERR_DT, PS_ERR_NEGATIVE,
 * PS_ERR_RELAXATION, PS_ERR_LOSS, PS_ERR_B1MAX, PS_ERR_CHANNELS) and, if msg is not NULL,
 * a message naming the field and element, e.g. "df[12] is NaN".
 */
int ps_problem_validate(const ps_problem_desc *d, char *msg, size_t len);

/** Validate d and copy it into a new problem. *out is NULL on error. */
int ps_problem_create(const ps_problem_desc *d, ps_problem **out);
/** Free a problem; NULL is accepted. */
void ps_problem_free(ps_problem *p);
/**
 * Borrow a view of the problem's arrays (valid while p lives). Optional
 * arrays the problem does not have are NULL; b1 is never NULL (x0 as
 * [nc][nt][2]). Returns PS_ERR_NULL on NULL arguments.
 */
int ps_problem_describe(const ps_problem *p, ps_problem_desc *out);
/** Start point x0 in solver layout into x[ps_problem_nx(p)]. */
int ps_problem_x0(const ps_problem *p, double *x);
size_t ps_problem_ns(const ps_problem *p);
size_t ps_problem_nt(const ps_problem *p);
/** Number of transmit channels (1 without a b1map); 0 for NULL. */
size_t ps_problem_nc(const ps_problem *p);
/** 1 if the problem has constraints met by penalty rounds (VOPs, gmax or
 *  g_end of designed gradient axes); 0 for NULL. */
int ps_problem_penalized(const ps_problem *p);
/** Number of SAR VOPs (0: no SAR limit; 0 for NULL). */
size_t ps_problem_nq(const ps_problem *p);
/** Number of unknowns of the design, the length of x, gradients and pulses
 *  in solver layout (2 nc nt, channel-major: u_c1..u_cNt, v_c1..v_cNt for
 *  c = 1..nc); 0 for NULL. */
size_t ps_problem_nx(const ps_problem *p);

/**
 * Build a preset (docs/presets.md): "slice1d", "spiral2d", "inversion", "ptx2d", with
 * optional overrides "NAME:key=value,key=value". On error returns
 * PS_ERR_PRESET (PS_ERR_SCALE where the parameters make a problem whose
 * scales leave float32's range, PS_ERR_NO_MEMORY where its arrays cannot
 * fit in memory) and, if err is not NULL, writes a message naming the
 * offending name, key or value into err[errlen].
 */
int ps_preset_create(const char *spec, ps_problem **out, char *err, size_t errlen);
/** NULL-terminated list of preset names. */
const char *const *ps_preset_names(void);

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum ps_backend {
    PS_BACKEND_AUTO = 0, ///< GPU when one is usable, else CPU
    PS_BACKEND_CPU  = 1,
    PS_BACKEND_GPU  = 2,
} ps_backend;

typedef enum ps_precision {
    PS_PRECISION_SINGLE = 0, ///< float32 spin loop (optimizer in float64)
    PS_PRECISION_DOUBLE = 1, ///< float64 everywhere
} ps_precision;

/** Log levels for ps_options.log. */
enum { PS_LOG_ERROR = 0, PS_LOG_WARNING = 1, PS_LOG_INFO = 2 };

/** Log sink: receives the source location and a one-line message. */
typedef void (*ps_log_fn)(void *user, int level, const char *file, int line,
                          const char *msg);

/** One iteration's progress (also one row of the history). */
typedef struct ps_progress {
    int64_t iteration;   ///< completed iterations (0 = the start point)
    double f;            ///< objective at the current point
    double gnorm;        ///< ||grad f||_2 at the current point
    double step;         ///< accepted step length alpha (0 at iteration 0)
    int64_t evaluations; ///< objective+gradient evaluations so far
    double seconds;      ///< wall time since the solve began
    int32_t round;       ///< penalty round of this point (0: the first; ps_options.max_rounds)
    int32_t reserved;    ///< zero
} ps_progress;

/**
 * Progress callback, called once per iteration (and at iteration 0) from the
 * thread that runs the solve. Return nonzero to cancel: the solve ends with
 * PS_CANCELLED and the best point so far.
 */
typedef int (*ps_progress_fn)(void *user, const ps_progress *p);

struct ps_gpu_options; /* persolve_gpu.h */

typedef struct ps_options {
    ps_backend backend;      ///< auto | cpu | gpu (default auto)
    ps_precision precision;  ///< spin-loop precision (default single)
    int memory;              ///< L-BFGS memory m, 1..32 (default 8)
    int64_t max_iterations;  ///< >= 0, 0 = unlimited (default 1000)
    int64_t max_evaluations; ///< >= 0, 0 = unlimited (default 0)
    double time_limit;       ///< seconds, >= 0, 0 = unlimited (default 0)
    double gtol;             ///< stop when ||g|| <= gtol ||g0|| (>= 0, default 1e-5)
    double ftol;             ///< stop when (f_{k-past} - f_k) <= max(ftol, fnoise) max(|f_k|, tiny);
                             ///< >= 0, 0 disables the test (default 1e-7)
    int past;                ///< iterations for the ftol test, 1..64 (default 10)
    double c1;               ///< sufficient decrease, 0 < c1 < c2 (default 1e-4)
    double c2;               ///< curvature, c1 < c2 < 1 (default 0.9)
    int max_linesearch;      ///< trials per line search, 1..100 (default 20)
    double fnoise;           ///< relative noise of f allowed in the sufficient-decrease
                             ///< test (approximate Wolfe, Hager & Zhang 2005), >= 0;
                             ///< 0 = automatic: 1e-5 single, 1e-12 double (default 0)
    int threads;             ///< CPU threads, >= 0, 0 = OpenMP default (default 0)
    ps_log_fn log;           ///< log sink (default NULL: silent)
    void *log_user;          ///< passed to log
    ps_progress_fn progress; ///< progress callback (default NULL)
    void *progress_user;     ///< passed to progress
    const struct ps_gpu_options *gpu; ///< GPU launch shape and tune cache (persolve_gpu.h);
                             ///< NULL = automatic: tune cache read, heuristic shape
                             ///< (default NULL)
    int max_rounds;          ///< penalty rounds for the constraints met by penalty (local SAR,
                             ///< gmax and g_end of designed gradient axes),
                             ///< 1..64; 0 = the default 8 (docs/algorithm.md)
    double constraint_tol;   ///< relative violation a round may end with: SAR_q <= sar_max
                             ///< (1 + constraint_tol), |g| <= gmax (1 + constraint_tol),
                             ///< |g(T)| <= constraint_tol gmax; >= 0, 0 = the default 1e-3
    double penalty_mu;       ///< penalty weight of the first round in units of the loss's scale
                             ///< (mu = penalty_mu sum_j w_j; x10 per round), > 0 and at most
                             ///< 1e30; 0 = the default 1
    int64_t reserved[12];    ///< must be zero
} ps_options;

/** Fill *o with the documented defaults. */
void ps_options_default(ps_options *o);
/** Check every field (and those of *o->gpu when set); returns PS_ERR_OPTION
 * (logged with the field name). */
int ps_options_validate(const ps_options *o);

/* ------------------------------------------------------------------------ */
/* Evaluation                                                               */
/* ------------------------------------------------------------------------ */

/**
 * F(x) and its exact gradient (w.r.t. the physical pulse x = (u, v), also
 * when the problem has b1_max). x[nx]; grad[nx] may be NULL (nx = ps_problem_nx(p)). o may be
 * NULL (defaults). Uses o->backend and o->precision.
 */
int ps_eval(const ps_problem *p, const ps_options *o, const double *x,
            double *f, double *grad);

/**
 * ps_eval and, into grad_g[nt][3], dF/dG_k: the gradient of F with respect
 * to the gradient waveform G_k (G/cm) of every axis, designed or not
 * (per unit of G/cm; docs/model.md). grad[nx] may be NULL, grad_g may
 * not. For a designed axis a, the part of grad of that axis equals
 * column a of grad_g. Computed by the CPU backend: with o->backend gpu
 * PS_ERR_NOT_IMPLEMENTED (the GPU does not compute dF/dG yet), with auto
 * the CPU runs it.
 */
int ps_eval_g(const ps_problem *p, const ps_options *o, const double *x, double *f,
              double *grad, double *grad_g);

/**
 * The hardware constraints at the pulse x[nx] (physical u, v): peak[nc] =
 * max_k |b_ck| per channel (G) and sar[nq] = SAR_q per VOP (W/kg); either
 * may be NULL (sar is left alone when the problem has no VOPs). The limits
 * are the problem's (ps_problem_describe: b1_max, b1_max_channel, sar_max).
 */
int ps_constraints(const ps_problem *p, const double *x, double *peak, double *sar);

/**
 * The gradient constraints (docs/model.md) at x[nx] (physical: after the
 * pulse, the waveform of each designed axis in G/cm, as results hold it),
 * per axis a = 0 (x), 1 (y), 2 (z) of the waveform in effect (x's for a
 * designed axis, the problem's g for the others):
 *     gpeak[a] = max_k |g_ak|                          (G/cm)
 *     slew[a]  = max_k |g_ak - g_a,k-1| / dt, g_a,-1 = 0   (G/cm/s)
 *     gend[a]  = |g_a,Nt-1|, the waveform's last step   (G/cm)
 * Any of the three may be NULL. The limits are the problem's
 * (ps_problem_describe: design_g, smax, gmax, g_end): a designed axis
 * keeps slew[a] < smax exactly, and gpeak[a] <= gmax and, with g_end,
 * gend[a] = 0 up to the penalty rounds' tolerance. PS_ERR_NULL,
 * PS_ERR_NONFINITE (x not finite).
 */
int ps_gradient_constraints(const ps_problem *p, const double *x, double gpeak[3],
                            double slew[3], double gend[3]);

/** Final magnetization M_Nt for pulse x[nx] into m[ns][3]. */
int ps_simulate(const ps_problem *p, const ps_options *o, const double *x,
                double *m);

/* ------------------------------------------------------------------------ */
/* Solve                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ps_result {
    int status;              ///< the ps_status the solve ended with
    int64_t iterations;      ///< completed iterations
    int64_t evaluations;     ///< objective+gradient evaluations
    double f;                ///< objective at the returned x (with penalty constraints: the last
                             ///< round's, F plus mu times what is left of the penalty)
    double gnorm;            ///< gradient norm at the returned x (optimizer variables)
    double seconds;          ///< wall time of the solve (transfers included)
    double kernel_seconds;   ///< GPU: time of the solve kernel alone (CUDA events); 0 on the CPU
    ps_backend backend;      ///< the backend that ran (cpu or gpu)
    int fell_back;           ///< 1 if auto fell back to the CPU
    char device[128];        ///< device description ("cpu: N threads", GPU name)
    ps_progress *history;    ///< [history_len], owned by the result
    size_t history_len;      ///< rows in history (iterations + 1)
    int rounds;              ///< penalty rounds run (1 without penalty constraints; 0 before
                             ///< the first evaluation)
    double mu;               ///< penalty weight of the last round (0 without penalty constraints)
    double violation;        ///< largest relative violation at x: of max(0, SAR_q / sar_max - 1),
                             ///< max(0, |g_ak| / gmax - 1) and |g_a(T)| / gmax (0 without penalty
                             ///< constraints)
} ps_result;

/** Release what a result owns (history); the struct itself is the caller's. */
void ps_result_free(ps_result *r);

/**
 * Minimize F over the pulse. x[nx] (nx = ps_problem_nx(p)): on entry the start point (physical
 * u, v; NULL is not allowed: use ps_problem_x0), on exit the last accepted
 * point (every accepted step lowers f, up to the noise allowance fnoise |f|
 * of the line search: with float32 spins a step may raise f by at most
 * that much). With b1_max the start point is projected strictly inside the
 * constraint (|b1| <= 0.9 b1_max), and r->gnorm and the history's gradient
 * norms are those of dF/dz in the optimizer's variables z. r receives the outcome (call ps_result_free afterwards). The
 * return value equals r->status. Runs the whole optimization on the chosen
 * backend: on the GPU inside one persistent cooperative kernel.
 *
 * On both backends this is the synchronous form of an asynchronous run:
 * ps_solve_start(), ps_run_wait() without a timeout, ps_run_free(). On the
 * CPU the progress callback is then called from the run's worker thread;
 * on the GPU the run's worker launches the persistent kernel and waits for
 * it (the progress callback is not called there).
 */
int solve_persistent(const ps_problem *p, const ps_options *o, double *x,
                     ps_result *r);

/* ------------------------------------------------------------------------ */
/* Asynchronous runs                                                        */
/* ------------------------------------------------------------------------ */

/*
 * A solve started with ps_solve_start() runs on a worker while the caller
 * watches it (ps_run_snapshot) and steers it (pause, resume, cancel, yield).
 * The worker obeys requests at its control points: between the phases of
 * the solver state machine, i.e. after every evaluation and at least once
 * per iteration and per line-search trial. A run that was paused or
 * yielded and resumed (also from a checkpoint) ends bit-identical to an
 * uninterrupted one: same x, f, iterations, evaluations and history f.
 *
 * Time spent paused or yielded does not count: ps_snapshot.seconds,
 * ps_result.seconds, the history's seconds and ps_options.time_limit all
 * measure solve time only.
 *
 * The problem must outlive the run (it is borrowed, not copied); the
 * options are copied at start (with the GPU options ps_options.gpu points to). Control calls may come from any thread;
 * ps_run_free must not race with other calls on the same run.
 *
 * Backends: the CPU backend runs the solve on a POSIX thread. The GPU
 * backend runs it in the persistent kernel, whose control point lies
 * after the reduction of every evaluation (a pause is acknowledged, PAUSED
 * with ps_snapshot.idle 0, as soon as the kernel reads it, and idle once
 * the kernel has stopped there); the kernel reads requests from mapped host
 * memory and publishes its progress there, so steering it needs no launch
 * and no copy (a yield ends the kernel with its state on the device;
 * resume launches it again). solve_persistent() is the synchronous form of the
 * same path on both backends.
 */

typedef struct ps_run ps_run; ///< opaque handle of one solve

/** What a run is doing. */
typedef enum ps_run_state {
    PS_RUN_RUNNING  = 0, ///< the worker is solving (or about to obey a request)
    PS_RUN_PAUSED   = 1, ///< the worker waits at a control point (no CPU used); a GPU
                         ///< kernel says PAUSED as soon as it takes the request, and
                         ///< idle once the evaluation in flight is done (ps_snapshot.idle)
    PS_RUN_YIELDED  = 2, ///< the state is saved and the worker has exited
    PS_RUN_FINISHED = 3, ///< the solve ended; ps_snapshot.status holds how
} ps_run_state;

/** A consistent copy of a run's progress (ps_run_snapshot). */
typedef struct ps_snapshot {
    uint64_t sequence;    ///< even; grows with every publication by the run
    int64_t iteration;    ///< completed iterations at the current point
    double f;             ///< objective at the current point (0 before the first evaluation)
    double gnorm;         ///< ||grad f||_2 at the current point
    double step;          ///< last accepted step length (0 at iteration 0)
    int64_t evaluations;  ///< objective+gradient evaluations so far (trials included)
    double seconds;       ///< solve time so far, s (paused and yielded time excluded)
    uint64_t heartbeat;   ///< grows at every control point: the solver is alive
    int state;            ///< ps_run_state
    int phase;            ///< solver phase: 0 start, 1 direction, 2 trial, 3 update, 4 done
    int status;           ///< final ps_status once FINISHED, else PS_RUNNING
    int round;            ///< penalty round (0: the first)
    int idle;             ///< 1 when the solver has stopped: PAUSED with the GPU kernel at its
                          ///< control point and its state stored (0 while PAUSED: acknowledged,
                          ///< the evaluation in flight still finishing; iteration, f, gnorm,
                          ///< step, evaluations and phase do not move), YIELDED, FINISHED
} ps_snapshot;

/**
 * Validate p, o and the start pulse x0[nx] (as solve_persistent) and
 * start the solve on a worker. *out receives the handle (NULL on error).
 * Returns PS_CONVERGED (0) when started, else an error status:
 * PS_ERR_NULL, PS_ERR_OPTION, PS_ERR_NONFINITE, PS_ERR_NO_MEMORY, the GPU
 * selection errors, PS_ERR_NOT_IMPLEMENTED (the GPU would run it).
 */
int ps_solve_start(const ps_problem *p, const ps_options *o, const double *x0,
                   ps_run **out);

/**
 * Copy the latest published progress into *s without blocking and without
 * ever returning a torn copy; iteration, evaluations, heartbeat and
 * sequence never decrease between calls. PS_ERR_NULL on NULL arguments.
 */
int ps_run_snapshot(const ps_run *r, ps_snapshot *s);

/**
 * Ask the run to pause: it stops at its next control point (state PAUSED;
 * on the GPU, PAUSED may come first and ps_snapshot.idle once the kernel
 * has stopped) and waits without using the CPU. Returns at once. Pausing a paused or
 * yielded run does nothing; PS_ERR_STATE once FINISHED.
 */
int ps_run_pause(ps_run *r);

/**
 * Continue a PAUSED run, or a YIELDED one (a new worker starts where the
 * old one stopped), or withdraw a pause or yield request not yet obeyed.
 * PS_ERR_STATE when the run is running with nothing to withdraw, or
 * FINISHED.
 */
int ps_run_resume(ps_run *r);

/**
 * End the run at its next control point (at once if paused or yielded)
 * with PS_CANCELLED and the last accepted point. Does nothing (returns 0)
 * once FINISHED.
 */
int ps_run_cancel(ps_run *r);

/**
 * Ask the run to yield: at its next control point the worker keeps its
 * state and exits, freeing the CPU (state YIELDED); ps_run_resume
 * continues it. Yielding a yielded run does nothing; PS_ERR_STATE once
 * FINISHED.
 */
int ps_run_yield(ps_run *r);

/**
 * Wait until the run finishes, at most timeout_s seconds (< 0: no limit;
 * 0: just look; NaN: PS_ERR_NONFINITE). Returns the final status, or PS_RUNNING when the time
 * passed first (a paused or yielded run only finishes once resumed or
 * cancelled). When finished, fills res as solve_persistent does (a copy of
 * the history: call ps_result_free) and the best pulse into x[nx]; res
 * and x may be NULL; may be called again.
 */
int ps_run_wait(ps_run *r, double timeout_s, ps_result *res, double *x);

/**
 * Serialize a PAUSED, YIELDED or FINISHED run (PS_ERR_STATE otherwise,
 * including while a pause is requested but not yet reached) into a
 * self-describing blob: *buf from malloc (release with free()), *len
 * bytes. The blob records a format version, the byte order and type sizes
 * of this machine, the problem's sizes and a hash of its arrays (all
 * arrays but the start pulse), the algorithmic options and a checksum; it
 * can be written to a file and resumed in another process.
 */
int ps_run_checkpoint(const ps_run *r, void **buf, size_t *len);

/**
 * Start a run from a checkpoint of ps_run_checkpoint on the same problem.
 * o may change the limits (max_iterations, max_evaluations, time_limit,
 * which count from the start of the original solve), threads, log and
 * progress; the algorithmic settings (precision, memory, past, gtol, ftol,
 * c1, c2, max_linesearch, fnoise) must equal the checkpoint's. A run that
 * was stopped by a limit that o raises, or cancelled, continues where it
 * stopped, bit-identical to a solve that was never stopped; any other
 * finished checkpoint resumes as a finished run with the same outcome. A
 * limit of o that the checkpoint has already reached stops the run before
 * it evaluates again (PS_MAX_ITERATIONS, PS_MAX_EVALUATIONS or
 * PS_TIME_LIMIT; later raised, it continues the same way). A run that ends before it evaluates gives the
 * checkpoint's point as its x (ps_run_wait). Returns
 * PS_ERR_CHECKPOINT (with the reason logged through o) for a corrupted,
 * truncated, foreign-problem, wrong-version or mismatching blob.
 */
int ps_solve_resume(const ps_problem *p, const ps_options *o, const void *buf,
                    size_t len, ps_run **out);

/** Free a run; NULL is accepted. A running run is cancelled and joined first. */
void ps_run_free(ps_run *r);

/* ------------------------------------------------------------------------ */
/* Batches                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Many independent problems solved together (README "Batches"). On the GPU
 * ONE persistent cooperative kernel runs them all: its grid is split into
 * teams of blocks (ps_gpu_options.batch_team_blocks, else a heuristic from
 * the problems' sizes), each team with its own barrier solves one problem
 * at a time with the phases of a solo solve and takes the next one from a
 * device-side queue when its problem ends, is cancelled or is paused: a
 * paused problem parks its state in device memory and gives its blocks to
 * the next. On the CPU the batch runs on worker threads (ps_options.threads
 * of them; 0: one per core), each solving one problem at a time with one
 * thread, the same queue discipline.
 *
 * A problem's iterates depend only on its team's shape: they equal, bit for
 * bit, a solo solve forced to that shape (the GPU: grid = the team's
 * blocks, the same block, tile and register cap, ps_batch_shape; the CPU:
 * threads = 1), whatever else runs in the batch and however it is paused.
 *
 * Problems are borrowed (they must outlive the batch); options are copied
 * at creation and apply to every problem. Control calls may come from any
 * thread; ps_batch_free must not race with other calls on the same batch.
 */

typedef struct ps_batch ps_batch; ///< opaque handle of a batch

/** All problems of a batch, for ps_batch_pause, _resume and _cancel. */
#define PS_BATCH_ALL ((size_t)-1)

/** What a batch is doing (ps_batch_report.state). */
typedef enum ps_batch_state {
    PS_BATCH_IDLE     = 0, ///< created (or restored), not started
    PS_BATCH_RUNNING  = 1, ///< started: problems are being solved or wait in the queue
    PS_BATCH_YIELDED  = 2, ///< the kernel (the workers) exited with every state kept
    PS_BATCH_FINISHED = 3, ///< every problem has finished (a later ps_batch_add runs again)
} ps_batch_state;

/** Aggregate progress of a batch. */
typedef struct ps_batch_report {
    size_t problems;          ///< problems added
    size_t queued;            ///< waiting for a team (never started, or resumed)
    size_t running;           ///< on a team now
    size_t paused;            ///< parked by ps_batch_pause (or a yield of the batch)
    size_t finished;          ///< ended (converged, limits, cancelled, or an error of their own)
    size_t failed;            ///< of the finished, those that ended with an error status
    int64_t slowest_iteration; ///< the fewest completed iterations of an unfinished problem
                              ///< (of all, once every problem has finished)
    int64_t iterations;       ///< completed iterations, summed over the problems
    double seconds;           ///< wall time since ps_batch_start (yielded time excluded)
    int state;                ///< ps_batch_state
    int teams;                ///< teams of the batch's kernel (GPU) or its workers (CPU) once
                              ///< started; 0 before
    int team_blocks;          ///< GPU: blocks per team (0 on the CPU or before the start)
    double setup_seconds;     ///< GPU: host time spent setting the problems up on the device
                              ///< (in ps_batch_start and ps_batch_add); 0 on the CPU
    double kernel_seconds;    ///< GPU: CUDA-event time of the batch kernel's launches that
                              ///< have ended; 0 on the CPU
    int team_barrier;         ///< GPU: the teams' barrier, PS_TEAM_BARRIER_RANGE or
                              ///< PS_TEAM_BARRIER_CLUSTER (persolve_gpu.h); 0 on the CPU or
                              ///< before the start
    int block;                ///< GPU: threads per block of the batch's kernel (0 on the CPU
                              ///< or before the start)
} ps_batch_report;

/**
 * A new, empty batch for options o (NULL: defaults), on the backend they
 * pick (auto: the GPU when one is usable). PS_ERR_OPTION for invalid options.
 */
int ps_batch_create(const ps_options *o, ps_batch **out);

/**
 * Add problem p with start pulse x0[ps_problem_nx(p)] (NULL: ps_problem_x0)
 * as problem number *index (0, 1, ... in the order of adding; index may be
 * NULL). Allowed before ps_batch_start and while the batch runs (the new
 * problem is queued at once). A problem that the batch cannot run (too
 * large for a team's shared memory, a start point that is not finite, a
 * GPU error while it is set up) is still added and finishes at once with
 * its own error status, which this call returns too; the other problems
 * go on. PS_ERR_NULL, PS_ERR_SIZE (more than PS_BATCH_MAX problems: not
 * added, *index left alone; a problem is added exactly when *index is set).
 */
int ps_batch_add(ps_batch *b, const ps_problem *p, const double *x0, size_t *index);

/** The most problems one batch holds. */
#define PS_BATCH_MAX 16384

/**
 * Start solving the problems added so far (and those added later), or
 * continue a batch restored by ps_batch_restore. Zero problems are allowed:
 * the batch is FINISHED at once. PS_ERR_STATE if already started.
 */
int ps_batch_start(ps_batch *b);

/** Aggregate progress (never blocks; counts are a consistent copy). */
int ps_batch_progress(const ps_batch *b, ps_batch_report *out);

/**
 * Progress of problem i as ps_run_snapshot reports a run's: state RUNNING
 * while queued or on a team, PAUSED (idle) once parked, YIELDED while the
 * batch is yielded, FINISHED with its status. PS_ERR_SIZE for i out of range.
 */
int ps_batch_snapshot(const ps_batch *b, size_t i, ps_snapshot *s);

/**
 * Pause problem i (PS_BATCH_ALL: every unfinished one): at its next control
 * point it parks its state and its team takes the next problem; a queued
 * problem parks when a team takes it. Returns at once; pausing a paused
 * problem does nothing; PS_ERR_STATE once it has finished.
 */
int ps_batch_pause(ps_batch *b, size_t i);

/**
 * Resume paused problem i (it re-enters the queue), or withdraw a pause not
 * yet obeyed. PS_BATCH_ALL: every paused problem, and a yielded batch (its
 * kernel or workers start again). PS_ERR_STATE when there is nothing to
 * resume (i running, or finished).
 */
int ps_batch_resume(ps_batch *b, size_t i);

/**
 * Cancel problem i (PS_BATCH_ALL: every unfinished one): it ends with
 * PS_CANCELLED and its best point, at once if it is queued, paused or
 * yielded. Does nothing once it has finished.
 */
int ps_batch_cancel(ps_batch *b, size_t i);

/**
 * Wait until every problem has finished, at most timeout_s seconds (< 0:
 * no limit; 0: just look; NaN: PS_ERR_NONFINITE). Returns PS_CONVERGED (0)
 * when all have finished (each problem's own status: ps_batch_result),
 * PS_RUNNING when the time passed first (paused problems and a yielded
 * batch never finish by themselves), or an error of the batch's launches.
 */
int ps_batch_wait(ps_batch *b, double timeout_s);

/**
 * Yield the batch: every problem on a team parks at its next control
 * point and the kernel (the workers) exits, freeing the GPU (the CPU);
 * state YIELDED once it has. Waits for that (the kernel ends within one
 * evaluation of each running problem). ps_batch_resume(b, PS_BATCH_ALL)
 * continues it. Does nothing on a yielded or finished batch.
 */
int ps_batch_yield(ps_batch *b);

/**
 * Serialize a batch that is not running (IDLE, YIELDED or FINISHED;
 * PS_ERR_STATE otherwise: yield it first) into one self-describing blob
 * (*buf from malloc, *len bytes): for every problem its start pulse or its
 * run's checkpoint (ps_run_checkpoint's format) and whether it was paused.
 */
int ps_batch_checkpoint(const ps_batch *b, void **buf, size_t *len);

/**
 * A batch from a checkpoint of ps_batch_checkpoint over the same problems,
 * in the same order (problems[n]; each checked against the hash its
 * checkpoint holds), for options o as ps_solve_resume takes them; state
 * IDLE: ps_batch_start continues it (paused problems stay paused).
 * PS_ERR_CHECKPOINT for a corrupted blob, another number of problems or a
 * mismatching problem or option.
 */
int ps_batch_restore(const ps_options *o, const ps_problem *const *problems, size_t n,
                     const void *buf, size_t len, ps_batch **out);

/**
 * Outcome of problem i: returns its final status and fills res and x as
 * ps_run_wait does (res and x may be NULL), or PS_RUNNING (res and x left
 * alone) while it has not finished. A problem that finished without a run
 * (cancelled in the queue before it started on the CPU, or failed at its
 * setup) has res->f and res->gnorm NaN and x its start pulse. PS_ERR_SIZE
 * for i out of range.
 */
int ps_batch_result(const ps_batch *b, size_t i, ps_result *res, double *x);

/** Number of problems added (0 for NULL). */
size_t ps_batch_size(const ps_batch *b);

/** Free a batch; NULL is accepted. A running batch is cancelled first. */
void ps_batch_free(ps_batch *b);

/* ------------------------------------------------------------------------ */
/* Build and devices                                                        */
/* ------------------------------------------------------------------------ */

/** 1 if the library was built with CUDA support. */
int ps_have_cuda(void);
/** 1 if the library was built with OpenMP. */
int ps_have_openmp(void);
/** Number of usable CUDA devices (0 without CUDA or without a GPU). */
int ps_gpu_count(void);
/**
 * Describe GPU `index` into buf ("NAME, sm_XY, N SMs, cooperative yes/no").
 * Returns PS_ERR_NO_GPU if there is no such device.
 */
int ps_gpu_describe(int index, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PERSOLVE_H */
