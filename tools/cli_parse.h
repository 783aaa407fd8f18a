/*
 * Command-line parsing of `persolve`: fills the library's ps_options (and
 * its ps_gpu_options) and a ps_cli struct from argv. It never prints and
 * never exits, so tests can link it and check what it parsed and the
 * messages it wrote.
 */
#ifndef PS_TOOLS_CLI_PARSE_H
#define PS_TOOLS_CLI_PARSE_H

#include <stddef.h>
#include <stdio.h>

#include "persolve.h"
#include "persolve_gpu.h"

/* Exit codes of `persolve` (documented in `persolve --help`). */
enum ps_exit {
    PS_EXIT_OK = 0,          /* converged, or success of a non-solving command */
    PS_EXIT_NOT_CONVERGED = 1, /* max iterations / evaluations / time limit */
    PS_EXIT_USAGE = 2,       /* bad command line */
    PS_EXIT_INPUT = 3,       /* bad file, bad preset, invalid problem, I/O,
                                refused checkpoint */
    PS_EXIT_SOLVER = 4,      /* line-search failure, non-finite objective, ... */
    PS_EXIT_BACKEND = 5,     /* requested backend unavailable (no GPU) */
    PS_EXIT_NO_GPU = 6,      /* tune: no usable GPU to measure on */
    PS_EXIT_CANCELLED = 130, /* cancelled by SIGINT or SIGTERM */
};

typedef enum ps_cli_command {
    PS_CMD_NONE = 0, /* top level: --help, --version */
    PS_CMD_DESIGN,
    PS_CMD_EVAL,
    PS_CMD_PRESET,
    PS_CMD_INFO,
    PS_CMD_BENCH,
    PS_CMD_TUNE,
    PS_CMD_EXPORT,
} ps_cli_command;

/* bench: defaults of --iters and --repeats, the most --sizes items. */
#define PS_BENCH_ITERS 50
#define PS_BENCH_REPEATS 5
#define PS_BENCH_MAX_SIZES 16
/* tune: defaults of --iters and --repeats, and of its PRESET|FILE. */
#define PS_TUNE_ITERS 20
/* tune --batch: default --iters (persolve_gpu.h) */
#define PS_TUNE_BATCH_ITERS PS_TUNE_BATCH_ITERATIONS
#define PS_TUNE_REPEATS 5
#define PS_TUNE_DEFAULT_INPUT "M"
/* design: the most PRESET|FILE arguments on the command line (more: --batch LIST) */
#define PS_CLI_MAX_INPUTS 1024

typedef struct ps_cli {
    ps_cli_command command;
    int help;            /* --help given: print usage of `command`, exit 0 */
    int version;         /* --version given */
    const char *input;   /* design, tune: PRESET|FILE (design: the first); eval: PROBLEM;
                            preset: NAME; export: RESULT; bench --batch: SIZE */
    /* design: every PRESET|FILE argument, in order (inputs[0] == input) */
    const char *inputs[PS_CLI_MAX_INPUTS];
    int ninputs;
    const char *batch_list; /* design --batch LIST: a file of problems, one a line */
    const char *output;  /* -o FILE (NULL: the command's default name) */
    const char *x_file;  /* eval --x FILE (NULL: the problem's start pulse) */
    const char *pulseq;  /* export --pulseq OUT.seq */
    int json;            /* --json: machine-readable summary on stdout */
    int quiet;           /* --quiet: no progress line and no summary */
    int strict;          /* --strict (design, eval): unknown names in a problem
                            file are errors, not warnings */
    /* design: checkpoints */
    const char *checkpoint; /* --checkpoint FILE: write the run's state there */
    double every;           /* --every S: also every S seconds (> 0; 0: only at the end) */
    const char *resume;     /* --resume FILE: continue the run saved in FILE */
    ps_options opts;     /* backend, precision, limits, tolerances, threads;
                            opts.gpu points to gpu */
    ps_gpu_options gpu;  /* the tune cache (--no-tune-cache) and a forced launch
                            shape (--gpu-config) */
    /* bench */
    const char *sizes;     /* --sizes LIST (NULL: S,M,L,T) */
    int64_t iters;         /* --iters N: iterations of every run (default 50) */
    int iters_given;       /* 1: --iters was on the command line */
    int repeats;           /* --repeats R: timed runs per variant (default 5) */
    int64_t cpu_iters;     /* --cpu-iters N: CPU row's iterations (0: automatic) */
    const char *json_file; /* --json FILE: the tables as JSON (bench, tune) */
    int bench_batch;       /* bench --batch N: N copies of SIZE in one batch; tune --batch N:
                              the team size of a batch of N copies (0: no) */
    int bench_variants;    /* bench --variants LIST: bit i for variant i of batch,
                              sequence, concurrent (0: all three) */
    int bench_gpus[8];     /* bench --gpus LIST: the GPU counts to time (-1: all) */
    int bench_ngpus;       /* their number (0: no --gpus) */
    /* tune */
    int no_write;          /* --no-write (also --no-cache): do not write the cache */
    /* the command line as given (argv[0..argc-1]) */
    int argc;
    char **argv;
} ps_cli;

/* The keys the benchmark sizes SG, MG and PG add to S, M and P: the x and
 * y gradient designed with the pulse at 150 T/m/s and 40 mT/m, ending at
 * zero. */
#define PS_BENCH_DESIGN_G "design_g=xy,smax=15000,gmax=4,g_end=1"

/* One benchmark size: its label (S, M, L, T, or the spec) and its
 * PRESET|FILE argument. */
typedef struct ps_bench_size {
    char label[64];
    char spec[512];
} ps_bench_size;

/*
 * Split a --sizes list: S, M, L and T name the benchmark sizes of
 * docs/presets.md (spiral2d:n=32,nt=1000; spiral2d:n=128,nt=5000;
 * spiral2d:n=256,nt=5000; inversion), P and U the pTx ones (ptx2d;
 * ptx2d:nsub=31,nb0=7,b0off=100), SG, MG and PG those of S, M and P with
 * the gradient designed (PS_BENCH_DESIGN_G added); any other item starts a preset spec
 * or names a problem file, and an item key=value continues the spec
 * before it (so "S,spiral2d:n=64,nt=500" is two sizes). Returns the number
 * of sizes (1..max) or -1 with a message in err[errlen].
 */
int ps_cli_bench_sizes(const char *list, ps_bench_size *out, int max, char *err,
                       size_t errlen);

/* The bench's size names, "S, M, L, T, P, U, SG, MG, PG". */
const char *ps_cli_bench_size_names(void);

/* ps_cli_parse() return values. */
enum {
    PS_CLI_OK = 0,    /* run cli->command (or print help/version) */
    PS_CLI_USAGE = 2, /* bad command line: err holds the reason */
};

/*
 * Parse argv[0..argc-1] (argv[0] is the program name) into *cli, starting
 * from ps_options_default(). On a bad command line returns PS_CLI_USAGE and
 * writes a message naming the option and the value into err[errlen], e.g.
 * "--max-iters: 'abc' is not a non-negative integer". argv may be permuted
 * (GNU getopt). Option values are checked here for their syntax and range;
 * the library's ps_options_validate() still runs before a solve.
 */
/* --variants LIST: a comma-separated list of batch, sequence and
 * concurrent into *mask (bit 0, 1, 2). 0 if a name is none of them. */
int ps_cli_parse_variants(const char *list, int *mask);

int ps_cli_parse(ps_cli *cli, int argc, char **argv, char *err, size_t errlen);

/* design: several problems (more than one PRESET|FILE, or --batch LIST),
 * solved as one batch (ps_batch_*) into the directory -o DIR. */
int ps_cli_is_batch(const ps_cli *cli);

/* The exit code for a ps_status a command ended with (see enum ps_exit). */
int ps_cli_exit_code(int status);

/* Subcommand name ("design"), or NULL for PS_CMD_NONE. */
const char *ps_cli_command_name(ps_cli_command cmd);

/* Print the usage of cmd (PS_CMD_NONE: the top-level help) to f. */
void ps_cli_usage(FILE *f, ps_cli_command cmd);

#endif /* PS_TOOLS_CLI_PARSE_H */
