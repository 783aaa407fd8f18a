/*
 * Command-line parsing of `persolve` (getopt_long), one option table per
 * subcommand. Fills ps_cli and its ps_options; prints nothing.
 */
#include "cli_parse.h"
#include "common/status.h"
#include "model/preset.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_BACKEND = 256,
    OPT_PRECISION,
    OPT_MAX_ITERS,
    OPT_MAX_EVALS,
    OPT_TIME_LIMIT,
    OPT_MEMORY,
    OPT_GTOL,
    OPT_FTOL,
    OPT_THREADS,
    OPT_JSON,
    OPT_X,
    OPT_SIZES,
    OPT_ITERS,
    OPT_REPEATS,
    OPT_CPU_ITERS,
    OPT_JSON_FILE,
    OPT_CHECKPOINT,
    OPT_EVERY,
    OPT_RESUME,
    OPT_NO_TUNE_CACHE,
    OPT_GPU_CONFIG,
    OPT_NO_CACHE,
    OPT_NO_WRITE,
    OPT_MAX_ROUNDS,
    OPT_CONSTRAINT_TOL,
    OPT_PENALTY_MU,
    OPT_STRICT,
    OPT_PULSEQ,
    OPT_BATCH,
    OPT_TEAM_BLOCKS,
    OPT_TEAM_BARRIER,
    OPT_VARIANTS,
    OPT_GPUS,
};

#define OPT_HELP {"help", no_argument, NULL, 'h'}
#define OPT_VERSION {"version", no_argument, NULL, 'V'}
#define OPT_END {NULL, 0, NULL, 0}
#define OPT_LAUNCH_SHAPE                                                       \
    {"no-tune-cache", no_argument, NULL, OPT_NO_TUNE_CACHE},                   \
        {"gpu-config", required_argument, NULL, OPT_GPU_CONFIG}

static const struct option top_options[] = {OPT_HELP, OPT_VERSION, OPT_END};

static const struct option design_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"output", required_argument, NULL, 'o'},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"max-iters", required_argument, NULL, OPT_MAX_ITERS},
    {"max-evals", required_argument, NULL, OPT_MAX_EVALS},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"gtol", required_argument, NULL, OPT_GTOL},
    {"ftol", required_argument, NULL, OPT_FTOL},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"every", required_argument, NULL, OPT_EVERY},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"max-rounds", required_argument, NULL, OPT_MAX_ROUNDS},
    {"constraint-tol", required_argument, NULL, OPT_CONSTRAINT_TOL},
    {"penalty-mu", required_argument, NULL, OPT_PENALTY_MU},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"team-blocks", required_argument, NULL, OPT_TEAM_BLOCKS},
    {"team-barrier", required_argument, NULL, OPT_TEAM_BARRIER},
    {"gpus", required_argument, NULL, OPT_GPUS},
    OPT_LAUNCH_SHAPE,
    OPT_END,
};

static const struct option eval_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"output", required_argument, NULL, 'o'},
    {"x", required_argument, NULL, OPT_X},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"json", no_argument, NULL, OPT_JSON},
    {"strict", no_argument, NULL, OPT_STRICT},
    OPT_LAUNCH_SHAPE,
    OPT_END,
};

/* --backend and --precision everywhere (SPEC 4): preset and export compute
 * nothing and take them as given; info --backend gpu exits 5 without a
 * usable GPU */
#define OPT_BACKEND_PRECISION                                                  \
    {"backend", required_argument, NULL, OPT_BACKEND},                         \
        {"precision", required_argument, NULL, OPT_PRECISION}

static const struct option preset_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"output", required_argument, NULL, 'o'},
    OPT_BACKEND_PRECISION,
    OPT_END,
};

static const struct option info_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"json", no_argument, NULL, OPT_JSON},
    OPT_BACKEND_PRECISION,
    OPT_END,
};

static const struct option bench_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"repeats", required_argument, NULL, OPT_REPEATS},
    {"json", required_argument, NULL, OPT_JSON_FILE},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"cpu-iters", required_argument, NULL, OPT_CPU_ITERS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"team-blocks", required_argument, NULL, OPT_TEAM_BLOCKS},
    {"team-barrier", required_argument, NULL, OPT_TEAM_BARRIER},
    {"variants", required_argument, NULL, OPT_VARIANTS},
    {"gpus", required_argument, NULL, OPT_GPUS},
    OPT_LAUNCH_SHAPE,
    OPT_END,
};

static const struct option tune_options[] = {
    OPT_HELP,
    OPT_VERSION,
    OPT_BACKEND_PRECISION,
    {"iters", required_argument, NULL, OPT_ITERS},
    {"repeats", required_argument, NULL, OPT_REPEATS},
    {"json", required_argument, NULL, OPT_JSON_FILE},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"no-cache", no_argument, NULL, OPT_NO_CACHE},
    {"no-write", no_argument, NULL, OPT_NO_WRITE},
    {"batch", required_argument, NULL, OPT_BATCH},
    OPT_END,
};

static const struct option export_options[] = {
    OPT_HELP,
    OPT_VERSION,
    {"pulseq", required_argument, NULL, OPT_PULSEQ},
    OPT_BACKEND_PRECISION,
    OPT_END,
};

/*
 * Leading '-': non-options come back in order as code 1 (whatever
 * POSIXLY_CORRECT says); ':' reports a missing value as ':'.
 */
static const struct {
    ps_cli_command cmd;
    const char *name;
    const struct option *options;
    const char *shortopts;
    int positional; /* number of positional arguments */
    int required;   /* how many of them must be given */
    const char *positional_name;
} commands[] = {
    {PS_CMD_NONE, NULL, top_options, "-:hV", 0, 0, NULL},
    {PS_CMD_DESIGN, "design", design_options, "-:hVo:q", PS_CLI_MAX_INPUTS, 1, "PRESET|FILE"},
    {PS_CMD_EVAL, "eval", eval_options, "-:hVo:", 1, 1, "PROBLEM"},
    {PS_CMD_PRESET, "preset", preset_options, "-:hVo:", 1, 1, "NAME"},
    {PS_CMD_INFO, "info", info_options, "-:hV", 0, 0, NULL},
    {PS_CMD_BENCH, "bench", bench_options, "-:hV", 1, 0, "SIZE"},
    {PS_CMD_TUNE, "tune", tune_options, "-:hV", 1, 0, "PRESET|FILE"},
    {PS_CMD_EXPORT, "export", export_options, "-:hV", 1, 1, "RESULT"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

const char *ps_cli_command_name(ps_cli_command cmd)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (commands[i].cmd == cmd)
            return commands[i].name;
    return NULL;
}

int ps_cli_exit_code(int status)
{
    switch (status) {
    case PS_CONVERGED:
    case PS_CONVERGED_FTOL:
        return PS_EXIT_OK;
    case PS_MAX_ITERATIONS:
    case PS_MAX_EVALUATIONS:
    case PS_TIME_LIMIT:
    case PS_YIELDED:
    case PS_CONSTRAINT_VIOLATED: /* converged, but the result breaks a constraint */
        return PS_EXIT_NOT_CONVERGED;
    case PS_CANCELLED:
        return PS_EXIT_CANCELLED;
    case PS_ERR_OPTION:
        return PS_EXIT_USAGE;
    case PS_ERR_NULL:
    case PS_ERR_SIZE:
    case PS_ERR_NONFINITE:
    case PS_ERR_DT:
    case PS_ERR_NEGATIVE:
    case PS_ERR_RELAXATION:
    case PS_ERR_LOSS:
    case PS_ERR_B1MAX:
    case PS_ERR_PRESET:
    case PS_ERR_FILE:
    case PS_ERR_CHECKPOINT:
    case PS_ERR_CHANNELS:
    case PS_ERR_SAR:
    case PS_ERR_GRADIENT:
    case PS_ERR_RF_MASK:
    case PS_ERR_SCALE:
        return PS_EXIT_INPUT;
    case PS_ERR_NO_GPU:
    case PS_ERR_GPU_UNSUPPORTED:
    case PS_ERR_NOT_IMPLEMENTED:
        return PS_EXIT_BACKEND;
    default: /* line search, objective, memory, GPU memory or launch */
        return PS_EXIT_SOLVER;
    }
}

/* Whole string is a decimal integer in [lo, hi]. */
static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s || !((*s >= '0' && *s <= '9') || *s == '+'))
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return 0;
    *out = (int64_t)v;
    return 1;
}

/* Whole string is a finite decimal number >= 0. */
static int parse_nonneg(const char *s, double *out)
{
    if (!s || !ps_is_decimal(s))
        return 0;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE && fabs(v) > 1.0)
        return 0;
    if (end == s || *end || !isfinite(v) || !(v >= 0.0))
        return 0;
    *out = v;
    return 1;
}

/*
 * --gpu-config BLOCK,SB,REGS[,BPS]: the launch shape forced into the
 * options, 0 in a field leaving it automatic. Each field is checked for
 * the range ps_options_validate() accepts, and named in the message.
 */
static int parse_gpu_config(ps_gpu_options *o, const char *arg, char *err, size_t errlen)
{
    static const char *const what[4] = {"block", "spins per tile", "registers", "blocks per SM"};
    int64_t v[4] = {0, 0, 0, 0};
    char field[32];
    int n = 0;
    const char *p = arg;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 4 || len >= sizeof field)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--gpu-config: '%s' is not BLOCK,SB,REGS[,BPS]", arg);
        memcpy(field, p, len);
        field[len] = '\0';
        int ok = parse_int(field, 0, 512, &v[n]);
        switch (n) {
        case 0: ok = ok && (v[0] == 0 || (v[0] >= 32 && v[0] % 32 == 0)); break;
        case 1: ok = ok && v[1] <= 32 && (v[1] & (v[1] - 1)) == 0; break;
        case 2: ok = ok && (v[2] == 0 || v[2] == 64 || v[2] == 128); break;
        default: ok = ok && v[3] <= 32; break;
        }
        if (!ok) {
            static const char *const range[4] = {"0 or a multiple of 32 in 32..512",
                                                 "0, 1, 2, 4, 8, 16 or 32", "0, 64 or 128",
                                                 "an integer in 0..32"};
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--gpu-config: %s '%s' is not %s", what[n], field,
                               range[n]);
        }
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (n < 3)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "--gpu-config: '%s' is not BLOCK,SB,REGS[,BPS]", arg);
    if (v[0] && v[1] > v[0])
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "--gpu-config: %lld spins per tile exceed the block of %lld threads",
                           (long long)v[1], (long long)v[0]);
    o->gpu_block = (int)v[0];
    o->gpu_spins_per_tile = (int)v[1];
    o->gpu_max_registers = (int)v[2];
    o->gpu_blocks_per_sm = (int)v[3];
    return PS_CLI_OK;
}

/* The name of the option getopt just returned, for messages. */
static const char *long_name(const struct option *opts, int code)
{
    for (const struct option *o = opts; o->name; o++)
        if (o->val == code)
            return o->name;
    return "?";
}

static int parse_option(ps_cli *cli, const struct option *opts, int code,
                        const char *arg, char *err, size_t errlen)
{
    ps_options *o = &cli->opts;
    const char *name = long_name(opts, code);
    int64_t iv = 0;
    double dv = 0.0;

    switch (code) {
    case 'h':
        cli->help = 1;
        return PS_CLI_OK;
    case 'V':
        cli->version = 1;
        return PS_CLI_OK;
    case 'o':
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--output: empty file name");
        cli->output = arg;
        return PS_CLI_OK;
    case OPT_X:
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--x: empty file name");
        cli->x_file = arg;
        return PS_CLI_OK;
    case OPT_PULSEQ:
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--pulseq: empty file name");
        cli->pulseq = arg;
        return PS_CLI_OK;
    case 'q':
        cli->quiet = 1;
        return PS_CLI_OK;
    case OPT_JSON:
        cli->json = 1;
        return PS_CLI_OK;
    case OPT_STRICT:
        cli->strict = 1;
        return PS_CLI_OK;
    case OPT_BACKEND:
        if (!strcmp(arg, "auto"))
            o->backend = PS_BACKEND_AUTO;
        else if (!strcmp(arg, "cpu"))
            o->backend = PS_BACKEND_CPU;
        else if (!strcmp(arg, "gpu"))
            o->backend = PS_BACKEND_GPU;
        else
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--backend: '%s' is not auto, cpu or gpu", arg);
        return PS_CLI_OK;
    case OPT_PRECISION:
        if (!strcmp(arg, "single"))
            o->precision = PS_PRECISION_SINGLE;
        else if (!strcmp(arg, "double"))
            o->precision = PS_PRECISION_DOUBLE;
        else
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--precision: '%s' is not single or double", arg);
        return PS_CLI_OK;
    case OPT_MAX_ITERS:
    case OPT_MAX_EVALS:
        if (!parse_int(arg, 0, INT64_MAX, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--%s: '%s' is not a non-negative integer", name,
                               arg);
        if (code == OPT_MAX_ITERS)
            o->max_iterations = iv;
        else
            o->max_evaluations = iv;
        return PS_CLI_OK;
    case OPT_MEMORY:
    case OPT_MAX_ROUNDS: {
        const int hi = code == OPT_MEMORY ? 32 : 64;
        if (!parse_int(arg, 1, hi, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--%s: '%s' is not an integer in 1..%d", name, arg, hi);
        *(code == OPT_MEMORY ? &o->memory : &o->max_rounds) = (int)iv;
        return PS_CLI_OK;
    }
    case OPT_THREADS:
        if (!parse_int(arg, 0, 4096, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--threads: '%s' is not an integer in 0..4096",
                               arg);
        o->threads = (int)iv;
        return PS_CLI_OK;
    case OPT_SIZES: {
        ps_bench_size sz[PS_BENCH_MAX_SIZES];
        char why[256];
        if (ps_cli_bench_sizes(arg, sz, PS_BENCH_MAX_SIZES, why, sizeof why) < 0)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--sizes: %s", why);
        cli->sizes = arg;
        return PS_CLI_OK;
    }
    case OPT_ITERS:
    case OPT_CPU_ITERS:
        if (!parse_int(arg, code == OPT_ITERS ? 1 : 0, 100000000, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--%s: '%s' is not an integer in %d..100000000",
                               name, arg, code == OPT_ITERS ? 1 : 0);
        if (code == OPT_ITERS) {
            cli->iters = iv;
            cli->iters_given = 1;
        } else
            cli->cpu_iters = iv;
        return PS_CLI_OK;
    case OPT_REPEATS:
        if (!parse_int(arg, 1, 1000, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                               "--repeats: '%s' is not an integer in 1..1000", arg);
        cli->repeats = (int)iv;
        return PS_CLI_OK;
    case OPT_JSON_FILE:
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--json: empty file name");
        cli->json_file = arg;
        return PS_CLI_OK;
    case OPT_CHECKPOINT:
    case OPT_RESUME:
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--%s: empty file name", name);
        if (code == OPT_CHECKPOINT)
            cli->checkpoint = arg;
        else
            cli->resume = arg;
        return PS_CLI_OK;
    case OPT_BATCH:
        if (cli->command == PS_CMD_BENCH || cli->command == PS_CMD_TUNE) {
            if (!parse_int(arg, 1, PS_BATCH_MAX, &iv))
                return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                     "--batch: '%s' is not an integer in 1..%d", arg, PS_BATCH_MAX);
            cli->bench_batch = (int)iv;
            return PS_CLI_OK;
        }
        if (!*arg)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--batch: empty file name");
        cli->batch_list = arg;
        return PS_CLI_OK;
    case OPT_TEAM_BLOCKS:
        if (!parse_int(arg, 0, 1 << 20, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                 "--team-blocks: '%s' is not a non-negative integer (0: automatic)",
                                 arg);
        cli->gpu.batch_team_blocks = (int)iv;
        return PS_CLI_OK;
    case OPT_TEAM_BARRIER:
        if (!strcmp(arg, "auto"))
            cli->gpu.batch_team_barrier = PS_TEAM_BARRIER_AUTO;
        else if (!strcmp(arg, "range"))
            cli->gpu.batch_team_barrier = PS_TEAM_BARRIER_RANGE;
        else if (!strcmp(arg, "cluster"))
            cli->gpu.batch_team_barrier = PS_TEAM_BARRIER_CLUSTER;
        else
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                 "--team-barrier: '%s' is not auto, range or cluster", arg);
        return PS_CLI_OK;
    case OPT_VARIANTS:
        if (!ps_cli_parse_variants(arg, &cli->bench_variants))
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                 "--variants: '%s' is not a comma-separated list of batch, sequence "
                                 "and concurrent",
                                 arg);
        return PS_CLI_OK;
    case OPT_GPUS:
        if (cli->command == PS_CMD_BENCH) { /* a list of counts */
            const char *q = arg;
            cli->bench_ngpus = 0;
            do {
                char tok[16];
                const size_t len = strcspn(q, ",");
                if (len >= sizeof tok || cli->bench_ngpus == 8)
                    return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                         "--gpus: '%s' is not a list of at most 8 GPU counts (1..%d or all)", arg,
                                         PS_GPU_MAX_GPUS);
                memcpy(tok, q, len);
                tok[len] = 0;
                if (!strcmp(tok, "all"))
                    iv = -1;
                else if (!parse_int(tok, 1, PS_GPU_MAX_GPUS, &iv))
                    return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                         "--gpus: '%s' in '%s' is not a GPU count (1..%d or all)", tok, arg,
                                         PS_GPU_MAX_GPUS);
                cli->bench_gpus[cli->bench_ngpus++] = (int)iv;
                q += len;
            } while (*q++ == ',');
            return PS_CLI_OK;
        }
        if (!strcmp(arg, "all"))
            iv = -1;
        else if (!parse_int(arg, 1, PS_GPU_MAX_GPUS, &iv))
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--gpus: '%s' is not a GPU count (1..%d) or all", arg,
                                 PS_GPU_MAX_GPUS);
        cli->gpu.gpus = (int)iv;
        return PS_CLI_OK;
    case OPT_NO_TUNE_CACHE:
        cli->gpu.tune_cache = 0;
        return PS_CLI_OK;
    case OPT_NO_CACHE: /* tune: neither read nor write the cache */
        cli->gpu.tune_cache = 0;
        cli->no_write = 1;
        return PS_CLI_OK;
    case OPT_NO_WRITE:
        cli->no_write = 1;
        return PS_CLI_OK;
    case OPT_GPU_CONFIG:
        return parse_gpu_config(&cli->gpu, arg, err, errlen);
    case OPT_TIME_LIMIT:
    case OPT_GTOL:
    case OPT_FTOL:
    case OPT_EVERY:
    case OPT_CONSTRAINT_TOL:
    case OPT_PENALTY_MU: {
        /* --every, --constraint-tol, --penalty-mu > 0 (the library reads 0
         * as the default of the last two, which the option would hide) */
        const int positive = code == OPT_EVERY || code == OPT_CONSTRAINT_TOL ||
                             code == OPT_PENALTY_MU;
        if (!parse_nonneg(arg, &dv) || (positive && !(dv > 0.0)))
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "--%s: '%s' is not a %s number%s",
                               name, arg, positive ? "positive" : "non-negative",
                               code == OPT_EVERY ? " of seconds" : "");
        double *field = code == OPT_TIME_LIMIT       ? &o->time_limit
                        : code == OPT_GTOL           ? &o->gtol
                        : code == OPT_FTOL           ? &o->ftol
                        : code == OPT_EVERY          ? &cli->every
                        : code == OPT_CONSTRAINT_TOL ? &o->constraint_tol
                                                     : &o->penalty_mu;
        *field = dv;
        return PS_CLI_OK;
    }
    default:
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "internal: unhandled option %d", code);
    }
}

/* One positional argument: design keeps them all (inputs[]), the others
 * their one. */
static int add_positional(ps_cli *cli, size_t ci, int *npos, const char *arg, char *err,
                          size_t errlen)
{
    const char *cmdname = commands[ci].name;
    if (*npos >= commands[ci].positional) {
        if (cli->command == PS_CMD_DESIGN)
            return ps_status_msg(err, errlen, PS_CLI_USAGE,
                                 "design: more than %d PRESET|FILE arguments: list them in a "
                                 "file for --batch LIST", PS_CLI_MAX_INPUTS);
        if (cmdname)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s: unexpected argument '%s'",
                                 cmdname, arg);
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "unknown command '%s'", arg);
    }
    if (cli->command == PS_CMD_DESIGN)
        cli->inputs[cli->ninputs++] = arg;
    if (!cli->input)
        cli->input = arg;
    (*npos)++;
    return PS_CLI_OK;
}

int ps_cli_is_batch(const ps_cli *cli)
{
    return cli->command == PS_CMD_DESIGN && (cli->ninputs > 1 || cli->batch_list != NULL);
}

/* getopt_long over one command's table; argv[0] is the command name. */
static int parse_command(ps_cli *cli, size_t ci, int argc, char **argv,
                         char *err, size_t errlen)
{
    const struct option *opts = commands[ci].options;
    const char *cmdname = commands[ci].name;
    int npos = 0;
    int st = PS_CLI_OK;

    opterr = 0;
    optind = 0; /* glibc: full re-initialization, so parsing can repeat */
    for (;;) {
        int idx = -1;
        int code = getopt_long(argc, argv, commands[ci].shortopts, opts, &idx);
        if (code == -1)
            break;
        if (code == 1) {
            if ((st = add_positional(cli, ci, &npos, optarg, err, errlen)) != PS_CLI_OK)
                return st;
            continue;
        }
        if (code == '?' || code == ':') {
            const char *typed =
                optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            /* "design: ..." or, before a command, just the message (the
             * caller prefixes "persolve: ") */
            const char *where = cmdname ? cmdname : "";
            if (code == ':')
                return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s: missing value", typed);
            if (optopt != 0 && strncmp(typed, "--", 2) == 0)
                return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s: does not take a value",
                                   typed);
            if (optopt > 0 && optopt < 256)
                return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s%sunknown option '-%c'", where,
                                   cmdname ? ": " : "", optopt);
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s%sunknown or ambiguous option '%s'", where,
                               cmdname ? ": " : "", typed);
        }
        st = parse_option(cli, opts, code, optarg, err, errlen);
        if (st != PS_CLI_OK)
            return st;
    }
    /* After "--": the rest are positional. */
    for (int i = optind; i < argc; i++) {
        if (npos >= commands[ci].positional && cli->command != PS_CMD_DESIGN)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s: unexpected argument '%s'",
                               cmdname ? cmdname : "persolve", argv[i]);
        if ((st = add_positional(cli, ci, &npos, argv[i], err, errlen)) != PS_CLI_OK)
            return st;
    }
    if (cli->help || cli->version)
        return PS_CLI_OK;
    if (npos < commands[ci].required && !cli->batch_list)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "%s: missing %s argument", cmdname,
                           commands[ci].positional_name);
    if (cli->command == PS_CMD_TUNE && !cli->input)
        cli->input = PS_TUNE_DEFAULT_INPUT;
    if (cli->command == PS_CMD_TUNE && cli->bench_batch && !cli->iters_given)
        cli->iters = PS_TUNE_BATCH_ITERS;
    if (cli->every > 0.0 && !cli->checkpoint)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "--every: requires --checkpoint FILE");
    if (cli->command == PS_CMD_BENCH && cli->input && !cli->bench_batch)
        return ps_status_msg(err, errlen, PS_CLI_USAGE,
                             "bench: unexpected argument '%s' (a SIZE goes with --batch N; "
                             "--sizes LIST for the variants)", cli->input);
    if (cli->command == PS_CMD_BENCH && cli->bench_batch && !cli->input)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "bench --batch %d: missing SIZE argument",
                             cli->bench_batch);
    if (cli->command == PS_CMD_BENCH && cli->bench_variants && !cli->bench_batch)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "bench: --variants goes with --batch N SIZE");
    if (cli->command == PS_CMD_BENCH && cli->bench_batch && cli->sizes)
        return ps_status_msg(err, errlen, PS_CLI_USAGE,
                             "bench: --batch N SIZE and --sizes LIST do not go together");
    if (ps_cli_is_batch(cli) && cli->gpu.gpus != 0 && cli->gpu.gpus != 1)
        return ps_status_msg(err, errlen, PS_CLI_USAGE,
                             "design: --gpus goes with one problem (a batch runs on one GPU)");
    if (cli->command == PS_CMD_BENCH && cli->bench_ngpus && cli->bench_batch)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "bench: --gpus LIST and --batch N SIZE do not go together");
    if (cli->command == PS_CMD_EXPORT && !cli->pulseq)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "export: missing --pulseq OUT.seq");
    return PS_CLI_OK;
}

int ps_cli_parse_variants(const char *list, int *mask)
{
    static const char *const names[3] = {"batch", "sequence", "concurrent"};
    int m = 0;
    const char *s = list;
    for (;;) {
        const size_t len = strcspn(s, ",");
        int hit = -1;
        for (int i = 0; i < 3; i++)
            if (len == strlen(names[i]) && !strncmp(s, names[i], len))
                hit = i;
        if (hit < 0)
            return 0;
        m |= 1 << hit;
        if (!s[len])
            break;
        s += len + 1;
    }
    *mask = m;
    return 1;
}

int ps_cli_parse(ps_cli *cli, int argc, char **argv, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    memset(cli, 0, sizeof *cli);
    ps_options_default(&cli->opts);
    ps_gpu_options_default(&cli->gpu);
    cli->opts.gpu = &cli->gpu;
    cli->iters = PS_BENCH_ITERS;
    cli->repeats = PS_BENCH_REPEATS;
    cli->argc = argc;
    cli->argv = argv;
    if (argc < 2)
        return ps_status_msg(err, errlen, PS_CLI_USAGE, "missing command");

    const char *first = argv[1];
    if (first[0] == '-') {
        /* Top level: only --help and --version. */
        int st = parse_command(cli, 0, argc, argv, err, errlen);
        if (st == PS_CLI_OK && !cli->help && !cli->version)
            return ps_status_msg(err, errlen, PS_CLI_USAGE, "missing command");
        return st;
    }
    for (size_t i = 1; i < N_COMMANDS; i++) {
        if (!strcmp(first, commands[i].name)) {
            cli->command = commands[i].cmd;
            if (cli->command == PS_CMD_TUNE) {
                cli->iters = PS_TUNE_ITERS;
                cli->repeats = PS_TUNE_REPEATS;
            }
            return parse_command(cli, i, argc - 1, argv + 1, err, errlen);
        }
    }
    return ps_status_msg(err, errlen, PS_CLI_USAGE, "unknown command '%s'", first);
}

static const struct {
    const char *label, *spec;
} bench_named[] = {
    {"S", "spiral2d:n=32,nt=1000"},
    {"M", "spiral2d:n=128,nt=5000"},
    {"L", "spiral2d:n=256,nt=5000"},
    {"T", "inversion"},
    {"P", "ptx2d"},
    {"U", "ptx2d:nsub=31,nb0=7,b0off=100"},
    /* with the gradient designed too: the same problems, x and y designed */
    {"SG", "spiral2d:n=32,nt=1000," PS_BENCH_DESIGN_G},
    {"MG", "spiral2d:n=128,nt=5000," PS_BENCH_DESIGN_G},
    {"PG", "ptx2d:" PS_BENCH_DESIGN_G},
};

const char *ps_cli_bench_size_names(void)
{
    static char names[64];
    if (!names[0])
        for (size_t i = 0; i < sizeof bench_named / sizeof bench_named[0]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     bench_named[i].label);
    return names;
}

int ps_cli_bench_sizes(const char *list, ps_bench_size *out, int max, char *err,
                       size_t errlen)
{
    int n = 0;
    const char *p = list;
    if (!list || !*list) {
        ps_status_msg(err, errlen, PS_CLI_USAGE, "empty list");
        return -1;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) {
            ps_status_msg(err, errlen, PS_CLI_USAGE, "empty item in '%s'", list);
            return -1;
        }
        int named = -1;
        for (int i = 0; i < (int)(sizeof bench_named / sizeof bench_named[0]); i++)
            if (strlen(bench_named[i].label) == len && !strncmp(p, bench_named[i].label, len))
                named = i;
        int cont = named < 0 && n > 0 && memchr(p, '=', len) && !memchr(p, ':', len);
        if (cont) {
            /* key=value: continues the spec before it */
            ps_bench_size *b = &out[n - 1];
            size_t have = strlen(b->spec);
            if (have + 1 + len >= sizeof b->spec) {
                ps_status_msg(err, errlen, PS_CLI_USAGE, "spec too long in '%s'", list);
                return -1;
            }
            b->spec[have] = ',';
            memcpy(b->spec + have + 1, p, len);
            b->spec[have + 1 + len] = '\0';
            snprintf(b->label, sizeof b->label, "%.63s", b->spec);
        } else {
            if (n >= max) {
                ps_status_msg(err, errlen, PS_CLI_USAGE, "more than %d sizes", max);
                return -1;
            }
            ps_bench_size *b = &out[n++];
            if (named >= 0) {
                snprintf(b->label, sizeof b->label, "%s", bench_named[named].label);
                snprintf(b->spec, sizeof b->spec, "%s", bench_named[named].spec);
            } else {
                if (len >= sizeof b->spec) {
                    ps_status_msg(err, errlen, PS_CLI_USAGE, "spec too long in '%s'", list);
                    return -1;
                }
                memcpy(b->spec, p, len);
                b->spec[len] = '\0';
                snprintf(b->label, sizeof b->label, "%.63s", b->spec);
            }
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Usage                                                                    */
/* ------------------------------------------------------------------------ */

static void usage_exit_codes(FILE *f)
{
    fputs("exit codes:\n"
          "  0    converged (gtol or ftol test), or success of eval, preset, info,\n"
          "       bench, tune\n"
          "  1    solve ended without convergence (max iterations, max\n"
          "       evaluations or time limit), or converged with a constraint\n"
          "       still violated after the last penalty round (status 8: the\n"
          "       result is written, its SAR above sar_max (1 + constraint-tol),\n"
          "       or its gradient past gmax or g_end)\n"
          "  2    usage error (bad command, option or value)\n"
          "  3    input error (bad, corrupt or unwritable file, a full disk, bad\n"
          "       preset, invalid problem, a start where the gradient is zero,\n"
          "       refused checkpoint)\n"
          "  4    solver error (line-search failure, non-finite objective), or out\n"
          "       of memory\n"
          "  5    backend unavailable (--backend gpu and no usable GPU; eval\n"
          "       --backend gpu, whose dF/dG only the CPU computes)\n"
          "  6    tune --backend gpu (or --batch) without a usable GPU\n"
          "  130  cancelled by SIGINT or SIGTERM (the best point is still written)\n",
          f);
}

static void usage_launch_shape(FILE *f)
{
    fputs("      --no-tune-cache do not take the GPU launch shape from the tune cache\n"
          "                      (persolve tune); the heuristic chooses it\n"
          "      --gpu-config BLOCK,SB,REGS[,BPS]\n"
          "                      force the GPU launch shape: threads per block (a\n"
          "                      multiple of 32 up to 512), spins per tile (1, 2,\n"
          "                      4, ..., 32), register cap (64 or 128) and blocks\n"
          "                      per SM (1..32); 0 leaves a field automatic\n",
          f);
}

static void usage_presets(FILE *f)
{
    fputs("presets (docs/presets.md), NAME[:key=value,...]:\n"
          "  slice1d    nz=400 nt=500 dt=4e-6 thk=0.5 tbw=4 trans=0.1\n"
          "  spiral2d   n=64 nt=2000 fov=24 dt=4e-6 flip=30 res=1.5\n"
          "  inversion  ndf=201 nb1=10 nt=375 dt=4e-6\n"
          "  ptx2d      n=64 nc=8 nt=1000 fov=24 dt=4e-6 flip=30 res=4 ring=14.4\n"
          "             height=2 wave=12 obj=10 b0=30 nsub=1 nb0=1 b0off=0 sar=0\n"
          "             (sar=1: 4 local SAR VOPs, TR 10 ms, sar_max half the\n"
          "             start pulse's largest SAR)\n"
          "  every preset also takes lambda=X (default 0) and b1_max=G\n"
          "  (default 0: no peak constraint)\n",
          f);
}

void ps_cli_usage(FILE *f, ps_cli_command cmd)
{
    ps_options d;
    ps_options_default(&d);
    switch (cmd) {
    case PS_CMD_NONE:
        fputs("usage: persolve COMMAND [OPTIONS] [ARGS]\n"
              "\n"
              "Design MRI RF pulses by minimizing a Bloch-simulation loss with\n"
              "L-BFGS, on the GPU inside one persistent kernel or on the CPU.\n"
              "\n"
              "commands:\n"
              "  design PRESET|FILE   optimize the pulse, write the result file (several\n"
              "                       problems: one batch)\n"
              "  eval PROBLEM         objective F and its gradient at a pulse\n"
              "  preset NAME          write a preset problem to an HDF5 file\n"
              "  info                 version, build features and GPUs\n"
              "  bench                the GPU solve variants side by side (--batch N SIZE:\n"
              "                       a batch against solo solves)\n"
              "  tune [PRESET|FILE]   measure the GPU launch shapes, cache the fastest\n"
              "  export RESULT        write a result's pulse as a Pulseq file\n"
              "\n"
              "  persolve COMMAND --help   options of COMMAND\n"
              "  persolve --version        print the version\n"
              "\n"
              "A PRESET|FILE or PROBLEM argument naming an existing file is read\n"
              "as an HDF5 problem file; otherwise it is a preset spec such as\n"
              "spiral2d:n=32,nt=1000.\n"
              "\n",
              f);
        usage_exit_codes(f);
        break;
    case PS_CMD_DESIGN:
        fputs("usage: persolve design PRESET|FILE [OPTIONS]\n"
                "       persolve design PRESET|FILE PRESET|FILE... [-o DIR] [OPTIONS]\n"
                "       persolve design --batch LIST [-o DIR] [OPTIONS]\n"
                "\n"
                "Minimize the Bloch loss over the RF pulse with L-BFGS, from the\n"
                "problem's start pulse (/pulse/b1 of FILE, or the preset's x0), and\n"
                "write the result file (problem, optimized /pulse/b1, /result/m,\n"
                "/result/history, /result/constraints). With a peak limit (b1_max)\n"
                "every |b_ck| stays below it exactly; with local SAR VOPs\n"
                "(/sar/vop) the SAR limit is met by penalty rounds, and the summary\n"
                "reports each SAR_q against sar_max, the rounds, the last penalty\n"
                "weight mu and the violation. A progress line is shown on stderr\n"
                "when it is a terminal. Ctrl-C or SIGTERM stops the solve and still\n"
                "writes the best point (exit 130); a second Ctrl-C kills. Ctrl-Z\n"
                "(SIGTSTP) first yields the run (its state is kept, the GPU kernel\n"
                "or the CPU solver threads exit, so the GPU is free for other\n"
                "work), then stops the process; fg (SIGCONT) resumes it where it\n"
                "stopped, with the same result as a run never stopped. Checkpoints\n"
                "(--checkpoint, --resume) work on both backends, and one written on\n"
                "the GPU resumes on the CPU backend and back.\n"
                "\n"
                "Several problems (more than one PRESET|FILE, or --batch LIST) are\n"
                "solved as one batch: on the GPU in one persistent launch whose teams\n"
                "of blocks take the problems from a queue, on the CPU by --threads\n"
                "workers of one thread each. Each problem's result file, the same as\n"
                "a solo design writes, goes into the directory -o DIR (created if\n"
                "missing) as NNN_NAME.h5: NNN its number in the batch from 000, NAME\n"
                "the preset spec or the file's base name, ':' ',' and other\n"
                "characters a file name trips on replaced by '_'; without -o, where\n"
                "a solo design writes it (NAME_result.h5 here; two problems of one\n"
                "name are refused). Its iterates equal\n"
                "those of a solo design of that problem with --threads 1 (CPU), or\n"
                "with the team's launch shape (GPU). The progress line counts the\n"
                "problems done, running, paused and queued and shows the slowest\n"
                "unfinished one's iteration; Ctrl-C cancels every problem and still\n"
                "writes every result (exit 130); --json prints one object with an\n"
                "array \"problems\" (one solo summary each, with its \"index\") and\n"
                "the totals under \"batch\". The exit code is the first failing\n"
                "problem's (2..6), else 1 when one did not converge, else 0.\n"
                "--checkpoint FILE [--every S] saves the whole batch (yielded for the\n"
                "moment) and --resume FILE continues it, given the same problems in\n"
                "the same order.\n"
                "\n", f);
        fprintf(f,
                "options:\n"
                "  -o, --output FILE   result file (default NAME_result.h5 in the\n"
                "                      current directory, NAME the preset name or\n"
                "                      FILE's base name without .h5); with several\n"
                "                      problems the directory of their result files\n"
                "                      (required)\n"
                "      --batch LIST    the problems of a batch, one PRESET|FILE a line\n"
                "                      (files relative to the current directory; blank\n"
                "                      lines and lines starting with # skipped), after\n"
                "                      those on the command line\n"
                "      --team-blocks N blocks per team of a GPU batch (0: automatic,\n"
                "                      the heuristic or the tune cache)\n"
                "      --team-barrier B  the GPU batch teams' barrier: auto | range (in\n"
                "                      device memory) | cluster (thread-block clusters,\n"
                "                      teams of 2..8 blocks) (default auto: range)\n"
                "      --gpus N|all    split the spins of one problem over N GPUs\n"
                "                      (devices 0..N-1; all: every GPU), one persistent\n"
                "                      kernel on each (default 1; not with a batch)\n"
                "      --backend B     auto | cpu | gpu (default auto: the GPU when\n"
                "                      one is usable, else the CPU)\n"
                "      --precision P   single | double spin loop (default single)\n"
                "      --max-iters N   iteration limit, 0 = none (default %lld)\n"
                "      --max-evals N   evaluation limit, 0 = none (default %lld)\n"
                "      --time-limit S  wall-time limit in seconds, 0 = none\n"
                "                      (default %g)\n"
                "      --memory M      L-BFGS memory, 1..32 (default %d)\n"
                "      --gtol X        stop when |grad f| <= X |grad f0| (default %g)\n"
                "      --ftol X        stop when f decreased by at most X |f| over\n"
                "                      the last %d iterations (default %g; with\n"
                "                      float32 spins at least 1e-5, f's noise)\n"
                "      --threads N     CPU threads, 0 = OpenMP default (default %d)\n"
                "      --max-rounds N  penalty rounds of the local SAR constraint,\n"
                "                      1..64 (default %d): whenever a solve ends with\n"
                "                      a SAR_q above sar_max (1 + X), mu grows x10,\n"
                "                      the L-BFGS memory is cleared and it goes on\n"
                "      --constraint-tol X\n"
                "                      relative SAR violation a round may end with,\n"
                "                      > 0 (default %g)\n"
                "      --penalty-mu X  penalty weight mu of the first round, > 0 and\n"
                "                      at most 1e30 (default %g)\n"
                "      --json          JSON summary on stdout instead of the text\n"
                "      --strict        a dataset or attribute of the problem file that\n"
                "                      persolve does not know is an error (default: a\n"
                "                      warning naming the closest known name)\n"
                "  -q, --quiet         no progress line and no summary\n"
                "      --checkpoint FILE\n"
                "                      write the run's state to FILE at the end (also\n"
                "                      after Ctrl-C) and every --every seconds, each\n"
                "                      time replacing FILE atomically (a new\n"
                "                      FILE.tmp-PID-N, fsync, rename); a run stopped by\n"
                "                      a limit is saved\n"
                "                      before the limit, so a resume with a higher\n"
                "                      limit continues it\n"
                "      --every S       also write the checkpoint every S seconds of\n"
                "                      wall time (> 0; needs --checkpoint)\n"
                "      --resume FILE   continue the run saved in FILE (PRESET|FILE\n"
                "                      must be the problem it was written for; the\n"
                "                      limits may change, --precision, --memory,\n"
                "                      --gtol, --ftol and, with VOPs, --max-rounds,\n"
                "                      --constraint-tol and --penalty-mu must be the\n"
                "                      same); a corrupted, truncated or foreign FILE\n"
                "                      is refused (exit 3). The result equals that\n"
                "                      of a run never interrupted\n",
                (long long)d.max_iterations, (long long)d.max_evaluations,
                d.time_limit, d.memory, d.gtol, d.past, d.ftol, d.threads, d.max_rounds,
                d.constraint_tol, d.penalty_mu);
        usage_launch_shape(f);
        fputs("  -h, --help          this help\n\n", f);
        usage_presets(f);
        fputc('\n', f);
        usage_exit_codes(f);
        break;
    case PS_CMD_EVAL:
        fputs("usage: persolve eval PROBLEM [OPTIONS]\n"
              "\n"
              "Evaluate the objective F and its exact gradient at one pulse.\n"
              "Prints F and the gradient norm (with several channels also the\n"
              "peak |b_ck| of each, with local SAR VOPs each SAR_q and sar_max,\n"
              "with designed gradient axes max |g|, max |slew| and |g(T)| of each,\n"
              "with an RF mask its free steps; F has no penalty term); writes the\n"
              "problem with /pulse/b1 (and the designed axes' /pulse/g),\n"
              "/eval/gradient [Nt,2] (dF/du, dF/dv; [Nc,Nt,2] with several\n"
              "channels), /eval/gradient_g [Nt,3] (dF/dG, every axis: computed\n"
              "on the CPU; --backend gpu exits 5), attribute f on /eval, and the\n"
              "final magnetization /result/m [Ns,3]. PROBLEM is an HDF5 problem\n"
              "file or a preset spec.\n"
              "\n"
              "options:\n"
              "      --x FILE        take the pulse from FILE's /pulse/b1 [Nt,2]\n"
              "                      ([Nc,Nt,2]; designed gradient axes: their\n"
              "                      columns of /pulse/g; default: the problem's\n"
              "                      start)\n"
              "  -o, --output FILE   output file (default NAME_eval.h5)\n"
              "      --backend B     auto | cpu | gpu (default auto)\n"
              "      --precision P   single | double spin loop (default single)\n"
              "      --threads N     CPU threads, 0 = OpenMP default (default 0)\n"
              "      --json          JSON on stdout instead of the text lines\n"
              "      --strict        a dataset or attribute of the problem file that\n"
              "                      persolve does not know is an error (default: a\n"
              "                      warning naming the closest known name)\n",
              f);
        usage_launch_shape(f);
        fputs("  -h, --help          this help\n\n", f);
        usage_exit_codes(f);
        break;
    case PS_CMD_PRESET:
        fputs("usage: persolve preset NAME[:key=value,...] [-o FILE]\n"
              "\n"
              "Write a preset problem (with its start pulse as /pulse/b1) to an\n"
              "HDF5 problem file.\n"
              "\n"
              "options:\n"
              "  -o, --output FILE   output file (default NAME.h5)\n"
              "      --backend B, --precision P\n"
              "                      accepted as by every command; a preset is the\n"
              "                      same whatever they say\n"
              "  -h, --help          this help\n"
              "\n",
              f);
        usage_presets(f);
        break;
    case PS_CMD_EXPORT:
        fputs("usage: persolve export RESULT.h5 --pulseq OUT.seq\n"
              "\n"
              "Write the pulse and gradients of a result file (or any file with\n"
              "/pulse/b1) as a Pulseq v1.4.2 sequence: one block, RF on the 1 us\n"
              "raster, gradients on the 10 us raster, each raster interval the mean\n"
              "of the waveform over it. Several channels give one file per channel,\n"
              "OUT_ch0.seq .. (Pulseq has no dynamic parallel transmit).\n"
              "\n"
              "options:\n"
              "      --pulseq FILE   the Pulseq file to write (required)\n"
              "      --backend B, --precision P\n"
              "                      accepted as by every command; the export is the\n"
              "                      same whatever they say\n"
              "  -h, --help          this help\n",
              f);
        break;
    case PS_CMD_INFO:
        fputs("usage: persolve info [--json] [--backend B]\n"
              "\n"
              "Print the version, the build features (CUDA, OpenMP, HDF5) and the\n"
              "GPUs the library can use.\n"
              "\n"
              "options:\n"
              "      --json          JSON on stdout instead of text\n"
              "      --backend B     with gpu: exit 5 when no GPU is usable (the report\n"
              "                      printed all the same); auto and cpu change nothing\n"
              "      --precision P   accepted as everywhere; changes nothing\n"
              "  -h, --help          this help\n",
              f);
        break;
    case PS_CMD_BENCH:
        fputs(
                "usage: persolve bench [OPTIONS]\n"
                "       persolve bench --batch N SIZE [OPTIONS]\n"
                "\n"
                "Time the GPU solve three ways, in one process, on the same problems\n"
                "with the same launch shape and the same number of iterations:\n"
                "  persistent  the whole solve in one cooperative kernel\n"
                "  host loop   ordinary kernels per phase, the host waits for the\n"
                "              scalars of every evaluation\n"
                "  graph       a CUDA graph whose conditional WHILE node runs one\n"
                "              cooperative kernel per iteration\n"
                "All three give bit-identical iterates (column 'same'). Every run\n"
                "has gtol = ftol = 0, so it runs exactly N iterations (unless the\n"
                "line search fails); a warm-up run precedes the R timed runs and\n"
                "the table shows their median. Per size and variant: ms per\n"
                "iteration, the overhead per iteration (time per iteration minus\n"
                "evaluations per iteration x the median in-kernel time of one\n"
                "evaluation), evaluations, final f, spin-steps per second\n"
                "(Ns Nt evaluations / time) and the time relative to the persistent\n"
                "kernel. A fourth row, 'with control', is the persistent kernel as\n"
                "solve_persistent runs it, with its control points (the price of\n"
                "being steerable). On the first size it also times steering a\n"
                "running solve: pause (request to the kernel's PAUSED), resume,\n"
                "yield (request to the kernel's exit) and relaunch, medians and\n"
                "99th percentiles. --backend cpu times the CPU backend instead; so\n"
                "does --backend auto (the default) without a usable GPU, saying so;\n"
                "--backend gpu without one exits 5.\n"
                "\n", f);
        fputs("--batch N SIZE instead times N copies of one size (S, T, ... or a\n"
                "spec; copy k starts from x0 scaled by 1 + 0.01 k) solved three ways,\n"
                "each with the same --iters N iterations (gtol = ftol = 0): one batch\n"
                "(ps_batch_*: on the GPU one launch), N solo solves one after the\n"
                "other, and N solo solves started together (ps_solve_start N times,\n"
                "then wait for all: on the GPU N kernels on N streams, each forced to\n"
                "the batch's team shape; cancelled after 20 times the slower of the\n"
                "other two, and runs that do not end within 10 s of the cancel are left\n"
                "to the process's exit, with an error). It prints the wall time of\n"
                "each, the aggregate spin-steps/s (Ns Nt evaluations summed over the\n"
                "copies / wall time), the batch's speed-up over the other two, whether\n"
                "every copy's iterates agree between them (column same: on the CPU they\n"
                "do with --threads 1, where a solo solve runs at one thread as a batch\n"
                "problem does; on the GPU where the solo launch shape equals a team's,\n"
                "as in the concurrent runs), and on the GPU the batch's set-up and\n"
                "kernel seconds. It runs on the backend --backend picks (auto: the GPU\n"
                "when usable, else the CPU).\n"
                "\n", f);
        fprintf(f, "options:\n"
                "      --sizes LIST    comma-separated sizes (default S,M,L,T):\n"
                "                        S  spiral2d:n=32,nt=1000\n"
                "                        M  spiral2d:n=128,nt=5000\n"
                "                        L  spiral2d:n=256,nt=5000\n"
                "                        T  inversion\n"
                "                        P  ptx2d (8 channels)\n"
                "                        U  ptx2d:nsub=31,nb0=7,b0off=100 (8 channels,\n"
                "                           390,000 spins: a universal pulse)\n"
                "                        SG, MG, PG  S, M and P with the gradient's x\n"
                "                           and y designed too (" PS_BENCH_DESIGN_G "):\n"
                "                           --sizes M,MG compares a fixed and a\n"
                "                           designed gradient\n"
                "                      or preset specs and problem files; a key=value\n"
                "                      item continues the spec before it\n"
                "                      (S,spiral2d:n=64,nt=500 is two sizes)\n"
                "      --iters N       iterations of every run (default %d)\n"
                "      --repeats R     timed runs per variant (default %d)\n"
                "      --json FILE     also write the tables, the GPU, the date and\n"
                "                      the command line as JSON to FILE\n"
                "      --precision P   single | double spin loop (default single)\n"
                "      --backend B     auto | gpu: the GPU variants (default auto);\n"
                "                      cpu: adds the CPU backend as a row (alone when\n"
                "                      there is no GPU)\n"
                "      --cpu-iters N   iterations of the CPU row (default 0: as many\n"
                "                      of N as fit in about 2 s a run; the table says\n"
                "                      when it ran fewer than N)\n"
                "      --memory M      L-BFGS memory, 1..32 (default %d)\n"
                "      --threads N     CPU threads, 0 = OpenMP default (default %d)\n"
                "      --batch N       N copies of SIZE: batch against solo solves\n"
                "                      (1..16384)\n"
                "      --team-blocks N blocks per team of the GPU batch (0: automatic)\n"
                "      --team-barrier B  its teams' barrier: auto | range | cluster\n"
                "      --variants LIST with --batch: which of batch, sequence and\n"
                "                      concurrent to run (default all three)\n"
                "      --gpus LIST     GPU counts (e.g. 1,2 or 1,all): each size's\n"
                "                      solve split over that many GPUs, the scaling\n"
                "                      against one and the exchange per evaluation\n",
                PS_BENCH_ITERS, PS_BENCH_REPEATS, d.memory, d.threads);
        usage_launch_shape(f);
        fputs("  -h, --help          this help\n\n", f);
        usage_exit_codes(f);
        break;
    case PS_CMD_TUNE:
        fprintf(f,
                "usage: persolve tune [PRESET|FILE] [OPTIONS]\n"
                "\n"
                "Measure every candidate launch shape of the persistent GPU kernel on\n"
                "one problem (default %s; S, M, L and T name the benchmark sizes of\n"
                "persolve bench) and write the fastest to the tune cache, which every\n"
                "later GPU solve of the same GPU, driver, build and problem-size class\n"
                "reads. Candidates: blocks of 128, 256 and 512 threads; the kernel built\n"
                "for up to 128 and for up to 64 registers a thread; 1, 2, ..., 32 spins\n"
                "per tile (the block's threads split time into block / SB segments);\n"
                "2 blocks per SM and, where more fit, all resident blocks. Each shape\n"
                "runs one warm-up solve and R timed solves of N iterations (gtol = ftol\n"
                "= 0) from the problem's start pulse; the table shows per shape the\n"
                "registers per thread, spilled bytes, static and dynamic shared memory,\n"
                "the blocks that fit on an SM, the blocks per SM and grid used, and the\n"
                "median time per iteration of the solve kernel; '*' marks the fastest,\n"
                "'h' the heuristic's shape, 'c' the shape cached before this run.\n"
                "On the CPU backend (--backend cpu, or auto without a usable GPU,\n"
                "which it says) there is no launch shape: it times the solve at 1, 2,\n"
                "4, ... threads and the OpenMP default instead (each run sized to at\n"
                "most 2 s), reports the fastest as --threads K and caches nothing.\n"
                "--backend gpu (or --batch) without a usable GPU exits 6.\n"
                "\n"
                "The cache is $PERSOLVE_CACHE_DIR, else $XDG_CACHE_HOME/persolve, else\n"
                "~/.cache/persolve; the size class is the precision, round(log2 Ns),\n"
                "round(log2 Nt) and whether the problem relaxes.\n"
                "\n"
                "options:\n"
                "      --backend B     auto | gpu | cpu (default auto)\n"
                "      --precision P   single | double spin loop (default single)\n"
                "      --iters N       iterations of every timed solve (default %d)\n"
                "      --repeats R     timed solves per shape (default %d)\n"
                "      --memory M      L-BFGS memory, 1..32 (default %d)\n"
                "      --json FILE     also write the table, the GPU, the key and the\n"
                "                      command line as JSON to FILE\n"
                "      --no-write      measure and report, do not write the cache\n"
                "      --no-cache      ignore the cache: compare with the heuristic\n"
                "                      only, and do not write it\n"
                "      --batch N       tune the team shape of a GPU batch of N copies\n"
                "                      (1..16384) instead: per block size, teams of 1,\n"
                "                      2, 4, ... blocks and the heuristic's size, and the\n"
                "                      cached shape, each timed by the batch's time from\n"
                "                      start to end (--iters default %d)\n"
                "  -h, --help          this help\n"
                "\n",
                PS_TUNE_DEFAULT_INPUT, PS_TUNE_ITERS, PS_TUNE_REPEATS, d.memory, PS_TUNE_BATCH_ITERS);
        usage_exit_codes(f);
        break;
    }
}
