/*
 * Command-line parsing of `persolve`: fills the library's ps_options and a
 * ps_cli struct from argv. It never prints and never exits, so tests can
 * link it and check what it parsed and the messages it wrote.
 */
#ifndef PS_TOOLS_CLI_PARSE_H
#define PS_TOOLS_CLI_PARSE_H

#include <stddef.h>
#include <stdio.h>

#include "persolve.h"

/* Exit codes of `persolve` (documented in `persolve --help`). */
enum ps_exit {
    PS_EXIT_OK = 0,          /* converged, or success of a non-solving command */
    PS_EXIT_NOT_CONVERGED = 1, /* max iterations / evaluations / time limit */
    PS_EXIT_USAGE = 2,       /* bad command line */
    PS_EXIT_INPUT = 3,       /* bad file, bad preset, invalid problem, I/O */
    PS_EXIT_SOLVER = 4,      /* line-search failure, non-finite objective, ... */
    PS_EXIT_BACKEND = 5,     /* requested backend unavailable (no GPU) */
    PS_EXIT_CANCELLED = 130, /* cancelled by SIGINT or SIGTERM */
};

typedef enum ps_cli_command {
    PS_CMD_NONE = 0, /* top level: --help, --version */
    PS_CMD_DESIGN,
    PS_CMD_EVAL,
    PS_CMD_PRESET,
    PS_CMD_INFO,
} ps_cli_command;

typedef struct ps_cli {
    ps_cli_command command;
    int help;            /* --help given: print usage of `command`, exit 0 */
    int version;         /* --version given */
    const char *input;   /* design: PRESET|FILE; eval: PROBLEM; preset: NAME */
    const char *output;  /* -o FILE (NULL: the command's default name) */
    const char *x_file;  /* eval --x FILE (NULL: the problem's start pulse) */
    int json;            /* --json: machine-readable summary on stdout */
    int quiet;           /* --quiet: no progress line and no summary */
    ps_options opts;     /* backend, precision, limits, tolerances, threads */
} ps_cli;

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
int ps_cli_parse(ps_cli *cli, int argc, char **argv, char *err, size_t errlen);

/* The exit code for a ps_status a command ended with (see enum ps_exit). */
int ps_cli_exit_code(int status);

/* Subcommand name ("design"), or NULL for PS_CMD_NONE. */
const char *ps_cli_command_name(ps_cli_command cmd);

/* Print the usage of cmd (PS_CMD_NONE: the top-level help) to f. */
void ps_cli_usage(FILE *f, ps_cli_command cmd);

#endif /* PS_TOOLS_CLI_PARSE_H */
