/*
 * The subcommands of `persolve` and what they share: loading a problem
 * from a file or a preset spec, default output names, option checks with
 * the library's log captured, JSON output.
 */
#ifndef PS_TOOLS_CMD_H
#define PS_TOOLS_CMD_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "cli_parse.h"
#include "persolve.h"

/* Each returns the process exit code (enum ps_exit). */
int ps_cmd_design(const ps_cli *cli);
int ps_cmd_eval(const ps_cli *cli);
int ps_cmd_preset(const ps_cli *cli);
int ps_cmd_info(const ps_cli *cli);
int ps_cmd_bench(const ps_cli *cli);
int ps_cmd_tune(const ps_cli *cli);
int ps_cmd_export(const ps_cli *cli);
/* design with several problems (ps_cli_is_batch): one batch (cmd_batch.c) */
int ps_cmd_design_batch(const ps_cli *cli);
/* bench --batch N SIZE: a batch against solo solves (cmd_bench_batch.c) */
int ps_cmd_bench_batch(const ps_cli *cli);

/* "persolve: <message>" on stderr. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void ps_cli_error(const char *fmt, ...);

/* The library's last error message, captured through ps_options.log. */
typedef struct ps_cli_log {
    char msg[512];
    char other[512]; /* the last one not from the GPU backend (src/cuda/): a
                      * probe that found no GPU logs there before auto runs
                      * the CPU, and its message explains no other error */
} ps_cli_log;

/* The library's message that goes with status st: a GPU status gets the
 * last message, any other the last one not from the GPU backend ("" when
 * there is none). */
const char *ps_cli_log_reason(const ps_cli_log *log, int st);

/* ps_log_fn that keeps the last error-level message in a ps_cli_log. */
void ps_cli_log_capture(void *user, int level, const char *file, int line,
                        const char *msg);

/*
 * Point o's log at `log` and run ps_options_validate(). Returns
 * PS_EXIT_OK, or prints the library's message and returns PS_EXIT_USAGE.
 */
int ps_cli_check_options(ps_options *o, ps_cli_log *log);

/*
 * The limits of a benchmark's solves: exactly `iters` iterations (no
 * evaluation or time limit, gtol = ftol = 0) and no progress callback, so
 * that every variant does the same work.
 */
void ps_cli_bench_limits(ps_options *o, int64_t iters);

/* A benchmark solve produced iterates (a normal end, or a line-search
 * failure after some). */
int ps_cli_has_iterates(int st, const ps_result *r);

/* Seconds a timed CPU benchmark solve is sized to, at most (bench's CPU
 * row, tune's thread counts). */
#define PS_CLI_CPU_RUN_BUDGET 2.0

/*
 * The iterations of a CPU benchmark's timed solves: one solve of one
 * iteration from x0 with o's settings on the CPU backend and the
 * benchmark's limits (ps_cli_bench_limits; it also warms the threads up),
 * then `iters` cut to what fits in PS_CLI_CPU_RUN_BUDGET seconds, at
 * least 1. *threads (if not NULL): the thread count the backend ran.
 * Returns 0 when that solve failed.
 */
int64_t ps_cli_cpu_fit_iterations(const ps_problem *p, const ps_options *o, int64_t iters, double *x,
                                  int *threads);

/*
 * Load PRESET|FILE: an existing file is read as HDF5, anything else is a
 * preset spec; if neither works both reasons are printed. base[baselen]
 * receives the name for default outputs (preset name, or the file's base
 * name without .h5). Returns an exit code (PS_EXIT_OK on success).
 */
int ps_cli_load_problem(const char *arg, ps_problem **out, char *base,
                        size_t baselen);

/* --strict: names a problem file holds that the reader does not know are
 * errors in ps_cli_load_problem (else warnings on stderr). */
void ps_cli_set_strict(int strict);

/* The flag a command's SIGINT and SIGTERM handlers set: reading a problem
 * file then stops (PS_EXIT_CANCELLED). NULL: none. */
void ps_cli_set_cancel(const volatile sig_atomic_t *flag);

/* The base name of the default outputs of a preset spec, its parameters
 * kept: "spiral2d:n=16,nt=300" -> "spiral2d_n=16_nt=300". */
void ps_cli_preset_base(const char *spec, char *base, size_t len);

/*
 * The output file: `given` if not NULL, else base + suffix in the current
 * directory. Fails (PS_EXIT_INPUT, message printed) when the file's
 * directory does not exist or is not writable, so a solve is never run
 * for a result that cannot be saved. With `replaced` (a file written
 * beside and renamed over the path: results, checkpoints), also when the
 * path exists and is not a writable regular file (a symbolic link, a
 * device, a FIFO), which the rename would replace.
 */
int ps_cli_output_path(const char *given, const char *base, const char *suffix,
                       int replaced, char *buf, size_t len);

/*
 * A text file written whole or not at all: its contents are collected in
 * memory (open_memstream) and ps_cli_memfile_commit puts them in place of
 * path through a temporary file beside it, synced and renamed
 * (common/atomic_file.h), so a full disk leaves the old file and one
 * message. ps_cli_memfile_open returns the stream (NULL: out of memory).
 */
typedef struct ps_cli_memfile {
    FILE *f;
    char *buf;
    size_t len;
} ps_cli_memfile;
FILE *ps_cli_memfile_open(ps_cli_memfile *m);
/* Returns an exit code (PS_EXIT_OK, or PS_EXIT_INPUT with the message
 * printed). */
int ps_cli_memfile_commit(ps_cli_memfile *m, const char *path);

/* A JSON report for path (bench, tune) in memory (ps_cli_memfile_commit
 * writes it), begun with "{", the version, the date and the command line
 * (the next member starts with ","); NULL (said) without memory. */
FILE *ps_cli_json_report(ps_cli_memfile *m, const char *path, const ps_cli *cli, const char *date);

/* JSON: a quoted, escaped string; a number (non-finite as null). */
void ps_json_string(FILE *f, const char *s);
void ps_json_number(FILE *f, double v);

/* The hardware constraints of a problem and their values at a pulse. */
typedef struct ps_cli_constraints {
    size_t nc, nq;                  /* channels, VOPs (0: no SAR limit) */
    int has_limit;                  /* a peak limit: limit[] holds it per channel */
    double limit[PS_MAX_CHANNELS];  /* G */
    double sar_max, tr;             /* W/kg, s (with VOPs) */
    int have_values;                /* peak[] and sar[] are those of the pulse */
    double peak[PS_MAX_CHANNELS];   /* max_k |b_ck| per channel, G */
    double sar[PS_MAX_VOPS];        /* SAR_q, W/kg */
    /* the gradient design (ps_problem_desc) and the values at x
     * (ps_gradient_constraints) of the designed axes, in the order x, y, z */
    unsigned design_g;              /* PS_AXIS_* bits (0: the gradient is fixed) */
    char axes[4];                   /* their name, "xy" */
    size_t ng;                      /* how many */
    double smax, gmax;              /* G/cm/s; G/cm (0: none) */
    int g_end;                      /* 1: they return to zero at the last step */
    double gpeak[3], slew[3], gend[3]; /* per designed axis: max |g| (G/cm), max |slew|
                                        * (G/cm/s), |g(T)| (G/cm), with have_values */
    size_t nt, rf_free;             /* steps, and those the RF mask leaves free */
} ps_cli_constraints;

/* The limits of p and, when x is not NULL, the values at x (solver layout)
 * by ps_constraints(). Returns its status (0: all filled). */
int ps_cli_constraint_values(const ps_problem *p, const double *x, ps_cli_constraints *out);

/*
 * The transmit channels and constraints of a pulse x (solver layout,
 * ps_problem_nx(p) values) as JSON members after a comma, `"channels":
 * Nc, "peak_b1": [..]` (max_k |b_ck| of each channel, G; null without x),
 * `"b1_max": [..]` (the peak limit per channel, null without one), `"nq":
 * Nq, "sar": [..]` (SAR_q of each VOP, W/kg; null without VOPs or x) and
 * `"sar_max": X` (null without VOPs), `"design_g": "xy"` (null without
 * designed axes), `"peak_g"`, `"peak_slew"`, `"end_g"` (per designed axis:
 * max |g| in G/cm, max |slew| in G/cm/s, |g(T)| in G/cm; null without
 * designed axes or x), `"gmax"`, `"smax"` (null when not set), `"g_end"`
 * (true, false) and `"rf_free_steps"` (the steps the RF mask leaves free,
 * Nt without one); and as text lines, labels padded to `width`: with
 * several channels "channels" and "peak |b1|" (G per channel, and the
 * limits), with VOPs "SAR" (W/kg per VOP, and sar_max), with designed
 * axes "gradient", "max |g|", "max slew" and "|g(T)|" (per axis, with the
 * limits), with an RF mask "RF free" (steps).
 */
void ps_cli_json_channels(FILE *f, const ps_problem *p, const double *x);
void ps_cli_text_channels(FILE *f, int width, const ps_problem *p, const double *x);

/* The command line as given, words joined by spaces (cut at len). */
void ps_cli_command_line(const ps_cli *cli, char *buf, size_t len);

/* The current UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void ps_cli_utc_now(char *buf, size_t len);

/* ---- design: what the solo command and a batch share (cmd_design.c) ---- */

/* Install handler fn for sig (sigaction flags) unless the signal is
 * ignored (a background job). */
void ps_cli_catch_signal(int sig, void (*fn)(int), int flags);
/* Block SIGINT, SIGTERM and SIGTSTP in this thread (the old mask into
 * *old): threads started meanwhile (a run's or a batch's workers) inherit
 * the mask, so that the main thread receives the signals. */
void ps_cli_block_signals(sigset_t *old);
void ps_cli_restore_signals(const sigset_t *old);
void ps_cli_nap(double seconds);

/* A start pulse that is zero where the gradient of F is exactly zero is
 * refused (message printed, PS_EXIT_INPUT); PS_EXIT_OK otherwise. */
int ps_cli_check_start(const ps_problem *p, const ps_options *o, ps_cli_log *log,
                       const double *x);

/* Write buf[len] to path atomically (a new temporary file beside it,
 * fsync, rename); -1 with the reason in why[] on failure. */
int ps_cli_write_atomic(const char *path, const void *buf, size_t len, char *why,
                        size_t whylen);
/* A checkpoint blob (buf[len], freed here) that a call ended with status
 * st written to path atomically; returns an exit code (message printed:
 * st's text, or why the file could not be written). */
int ps_cli_save_checkpoint(const char *path, int st, void *buf, size_t len);
/* A whole checkpoint file into *buf (malloc). Prints the reason and returns
 * an exit code on failure. */
int ps_cli_read_checkpoint(const char *path, void **buf, size_t *len);
/* Whether a and b name the same file (the same name, or one inode). */
int ps_cli_same_file(const char *a, const char *b);

/*
 * A file a command reads or writes: the option that names it ("-o",
 * "--json"), its path (NULL: none) and what it is, for the message
 * ("the input problem file", "the result file (-o)").
 */
typedef struct {
    const char *opt;
    const char *path;
    const char *role;
} ps_cli_file;

/*
 * Refuses (PS_EXIT_USAGE, message printed: "OPT PATH: is ROLE") an output
 * that is one of the inputs (those that exist) or an earlier output, so
 * that nothing a command writes replaces a file it reads or another file
 * it writes. Outputs are compared in order.
 */
int ps_cli_check_distinct(const ps_cli_file *in, size_t nin, const ps_cli_file *out,
                          size_t nout);
/* "backend B unavailable: ..." for a GPU selection status. */
void ps_cli_backend_error(const ps_options *o, int st, const ps_cli_log *log,
                          const char *what);

/* After a solve: x[nx] clamped into its peak limits, |grad F| in the
 * pulse's own variables into *gnorm_physical, the final magnetization into
 * m[ns][3] (ps_simulate). Returns an exit code (message printed). */
int ps_cli_design_final(const ps_problem *p, const ps_options *o, ps_cli_log *log, double *x,
                        double *m, double *gnorm_physical);
/* The result file `out` of a design of problem `input` (the problem, x,
 * m, r, the provenance). Returns an exit code (message printed). */
int ps_cli_design_save(const ps_cli *cli, const ps_options *o, const char *input,
                       const ps_problem *p, const ps_result *r, const double *x,
                       const double *m, double gnorm_physical, const char *out);
/* The JSON summary object of one design (x NULL: the solve left no
 * point; out NULL: not written). */
void ps_cli_design_json(FILE *f, const ps_cli *cli, const ps_options *o, const char *input,
                        const ps_problem *p, const ps_result *r, const double *x, double f0,
                        double gnorm_physical, const char *out, int exit_code);

const char *ps_cli_backend_name(ps_backend b);
const char *ps_cli_precision_name(ps_precision p);
/* A batch's team barrier as reported (ps_batch_report.team_barrier):
 * "range", "cluster", or "none" (the CPU, or not started). */
const char *ps_cli_team_barrier_name(int barrier);

#endif /* PS_TOOLS_CMD_H */
