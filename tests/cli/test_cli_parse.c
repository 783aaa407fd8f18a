/*
 * The argument parser of `persolve` linked directly: what it fills into
 * ps_cli / ps_options, the message for each bad argument, and the status ->
 * exit code mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cli_parse.h"

static char err[512];

/* Parse the NULL-terminated arguments (program name added). */
static int parse(ps_cli *cli, ...)
{
    static char store[32][128];
    char *argv[33];
    int argc = 0;
    argv[argc++] = strcpy(store[0], "persolve");
    va_list ap;
    va_start(ap, cli);
    for (const char *a = va_arg(ap, const char *); a && argc < 32;
         a = va_arg(ap, const char *)) {
        snprintf(store[argc], sizeof store[argc], "%s", a);
        argv[argc] = store[argc];
        argc++;
    }
    va_end(ap);
    argv[argc] = NULL;
    memset(err, 0, sizeof err);
    int st = ps_cli_parse(cli, argc, argv, err, sizeof err);
    if (st != PS_CLI_OK)
        printf("-> %s\n", err);
    return st;
}

static void expect_usage(const char *needle1, const char *needle2, int st)
{
    assert_int_equal(st, PS_CLI_USAGE);
    if (!strstr(err, needle1) || (needle2 && !strstr(err, needle2))) {
        printf("message \"%s\" lacks \"%s\"/\"%s\"\n", err, needle1,
               needle2 ? needle2 : "");
        fail();
    }
}

static void test_design_all_options(void **state)
{
    (void)state;
    ps_cli c;
    int st = parse(&c, "design", "--backend", "gpu", "--precision", "double",
                   "--max-iters", "7", "--max-evals=9", "--time-limit", "1.5",
                   "--memory", "4", "--gtol", "1e-3", "--ftol", "0",
                   "--threads", "3", "--json", "-q", "-o", "out.h5",
                   "spiral2d:n=8", NULL);
    assert_int_equal(st, PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_DESIGN);
    assert_string_equal(c.input, "spiral2d:n=8");
    assert_string_equal(c.output, "out.h5");
    assert_int_equal(c.opts.backend, PS_BACKEND_GPU);
    assert_int_equal(c.opts.precision, PS_PRECISION_DOUBLE);
    assert_int_equal(c.opts.max_iterations, 7);
    assert_int_equal(c.opts.max_evaluations, 9);
    assert_true(c.opts.time_limit == 1.5);
    assert_int_equal(c.opts.memory, 4);
    assert_true(c.opts.gtol == 1e-3);
    assert_true(c.opts.ftol == 0.0);
    assert_int_equal(c.opts.threads, 3);
    assert_int_equal(c.json, 1);
    assert_int_equal(c.quiet, 1);
    assert_int_equal(c.help, 0);
    assert_int_equal(ps_options_validate(&c.opts), 0);

    /* defaults untouched when not given; positional first */
    st = parse(&c, "design", "slice1d", "--max-iters", "2", NULL);
    assert_int_equal(st, PS_CLI_OK);
    ps_options d;
    ps_options_default(&d);
    assert_string_equal(c.input, "slice1d");
    assert_null(c.output);
    assert_int_equal(c.opts.max_iterations, 2);
    assert_int_equal(c.opts.memory, d.memory);
    assert_true(c.opts.gtol == d.gtol);
    assert_int_equal(c.opts.backend, PS_BACKEND_AUTO);
    assert_int_equal(c.json, 0);
}

static void test_other_commands(void **state)
{
    (void)state;
    ps_cli c;
    assert_int_equal(parse(&c, "eval", "p.h5", "--x", "x.h5", "-o", "e.h5",
                           "--backend", "cpu", "--json", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_EVAL);
    assert_string_equal(c.input, "p.h5");
    assert_string_equal(c.x_file, "x.h5");
    assert_string_equal(c.output, "e.h5");
    assert_int_equal(c.opts.backend, PS_BACKEND_CPU);

    assert_int_equal(parse(&c, "preset", "inversion:nt=10", "-o", "i.h5", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_PRESET);
    assert_string_equal(c.input, "inversion:nt=10");

    assert_int_equal(parse(&c, "info", NULL), PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_INFO);

    /* help needs no positional argument */
    assert_int_equal(parse(&c, "design", "--help", NULL), PS_CLI_OK);
    assert_int_equal(c.help, 1);
    assert_int_equal(c.command, PS_CMD_DESIGN);
    assert_int_equal(parse(&c, "--help", NULL), PS_CLI_OK);
    assert_int_equal(c.help, 1);
    assert_int_equal(c.command, PS_CMD_NONE);
    assert_int_equal(parse(&c, "--version", NULL), PS_CLI_OK);
    assert_int_equal(c.version, 1);

    /* after "--" an argument starting with '-' is positional */
    assert_int_equal(parse(&c, "preset", "--", "-odd", NULL), PS_CLI_OK);
    assert_string_equal(c.input, "-odd");
}

static void test_bad_values(void **state)
{
    (void)state;
    ps_cli c;
    expect_usage("--max-iters: 'abc' is not a non-negative integer", NULL,
                 parse(&c, "design", "x", "--max-iters", "abc", NULL));
    expect_usage("--max-iters", "'-1'",
                 parse(&c, "design", "x", "--max-iters", "-1", NULL));
    expect_usage("--max-iters", "'1.5'",
                 parse(&c, "design", "x", "--max-iters", "1.5", NULL));
    expect_usage("--max-evals", "'99999999999999999999'",
                 parse(&c, "design", "x", "--max-evals", "99999999999999999999",
                       NULL));
    expect_usage("--memory", "'65'", parse(&c, "design", "x", "--memory", "65", NULL));
    expect_usage("--threads", "'x'", parse(&c, "design", "x", "--threads", "x", NULL));
    expect_usage("--time-limit", "'-1'",
                 parse(&c, "design", "x", "--time-limit", "-1", NULL));
    expect_usage("--gtol", "'inf'", parse(&c, "design", "x", "--gtol", "inf", NULL));
    /* plain decimal numbers only */
    expect_usage("--gtol", "'0x1p3'", parse(&c, "design", "x", "--gtol", "0x1p3", NULL));
    expect_usage("--gtol", "' 1e-3'", parse(&c, "design", "x", "--gtol", " 1e-3", NULL));
    expect_usage("--time-limit", "'1e'", parse(&c, "design", "x", "--time-limit", "1e", NULL));
    expect_usage("--ftol", "''", parse(&c, "design", "x", "--ftol", "", NULL));
    expect_usage("--backend", "'GPU'", parse(&c, "design", "x", "--backend", "GPU", NULL));
    expect_usage("--precision", "'half'",
                 parse(&c, "eval", "x", "--precision", "half", NULL));
    expect_usage("--output", "empty", parse(&c, "preset", "x", "-o", "", NULL));
}

static void test_bad_command_lines(void **state)
{
    (void)state;
    ps_cli c;
    expect_usage("missing command", NULL, parse(&c, NULL));
    expect_usage("unknown command 'solve'", NULL, parse(&c, "solve", NULL));
    expect_usage("--frob", NULL, parse(&c, "--frob", NULL));
    expect_usage("--bogus", "unknown", parse(&c, "design", "x", "--bogus", NULL));
    expect_usage("'-z'", NULL, parse(&c, "design", "x", "-z", NULL));
    expect_usage("--max-iters", "missing value",
                 parse(&c, "design", "x", "--max-iters", NULL));
    expect_usage("-o", "missing value", parse(&c, "design", "x", "-o", NULL));
    expect_usage("--json=1", "does not take a value",
                 parse(&c, "design", "x", "--json=1", NULL));
    expect_usage("PRESET|FILE", "missing", parse(&c, "design", NULL));
    expect_usage("PROBLEM", NULL, parse(&c, "eval", NULL));
    /* several problems are a batch, with or without a directory for the results */
    assert_int_equal(parse(&c, "design", "a", "b", NULL), PS_CLI_OK);
    assert_null(c.output);
    expect_usage("'x'", "unexpected", parse(&c, "info", "x", NULL));
    /* options of another command */
    expect_usage("--x", NULL, parse(&c, "design", "a", "--x", "f.h5", NULL));
    expect_usage("--max-iters", NULL, parse(&c, "eval", "a", "--max-iters", "3", NULL));
    expect_usage("--threads", NULL, parse(&c, "preset", "a", "--threads", "2", NULL));
    /* --backend and --precision everywhere (SPEC 4) */
#define EVERYWHERE(...)                                                                           \
    do {                                                                                          \
        assert_int_equal(parse(&c, __VA_ARGS__, "--backend", "cpu", "--precision", "double", NULL), \
                         PS_CLI_OK);                                                              \
        assert_int_equal(c.opts.backend, PS_BACKEND_CPU);                                         \
        assert_int_equal(c.opts.precision, PS_PRECISION_DOUBLE);                                  \
    } while (0)
    EVERYWHERE("design", "a");
    EVERYWHERE("eval", "a");
    EVERYWHERE("preset", "a");
    EVERYWHERE("info");
    EVERYWHERE("bench");
    EVERYWHERE("tune");
    EVERYWHERE("export", "a", "--pulseq", "a.seq");
#undef EVERYWHERE
    /* parsing again after errors still works */
    assert_int_equal(parse(&c, "design", "a", "--memory", "3", NULL), PS_CLI_OK);
    assert_int_equal(c.opts.memory, 3);
}

static void test_bench_options(void **state)
{
    (void)state;
    ps_cli c;
    assert_int_equal(parse(&c, "bench", NULL), PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_BENCH);
    assert_int_equal(c.iters, PS_BENCH_ITERS);
    assert_int_equal(c.repeats, PS_BENCH_REPEATS);
    assert_null(c.sizes);
    assert_null(c.json_file);
    assert_int_equal(c.cpu_iters, 0);
    assert_int_equal(c.argc, 2);

    assert_int_equal(parse(&c, "bench", "--sizes", "S,T", "--iters", "7", "--repeats", "3",
                           "--json", "b.json", "--precision", "double", "--backend", "cpu",
                           "--cpu-iters", "2", "--memory", "5", "--threads", "4", NULL),
                     PS_CLI_OK);
    assert_string_equal(c.sizes, "S,T");
    assert_int_equal(c.iters, 7);
    assert_int_equal(c.repeats, 3);
    assert_string_equal(c.json_file, "b.json");
    assert_int_equal(c.opts.precision, PS_PRECISION_DOUBLE);
    assert_int_equal(c.opts.backend, PS_BACKEND_CPU);
    assert_int_equal(c.cpu_iters, 2);
    assert_int_equal(c.opts.memory, 5);
    assert_int_equal(c.opts.threads, 4);

    expect_usage("--iters", "'0'", parse(&c, "bench", "--iters", "0", NULL));
    expect_usage("--repeats", "'x'", parse(&c, "bench", "--repeats", "x", NULL));
    expect_usage("--sizes", "empty item", parse(&c, "bench", "--sizes", "S,,L", NULL));
    expect_usage("--sizes", "empty", parse(&c, "bench", "--sizes", "", NULL));
    expect_usage("--json", "missing value", parse(&c, "bench", "--json", NULL));
    expect_usage("bench", "'extra'", parse(&c, "bench", "extra", NULL));

    /* the size list: named sizes, specs, key=value continuing a spec */
    ps_bench_size sz[PS_BENCH_MAX_SIZES];
    char why[256];
    int n = ps_cli_bench_sizes("S,M,L,T", sz, PS_BENCH_MAX_SIZES, why, sizeof why);
    assert_int_equal(n, 4);
    assert_string_equal(sz[0].label, "S");
    assert_string_equal(sz[0].spec, "spiral2d:n=32,nt=1000");
    assert_string_equal(sz[1].spec, "spiral2d:n=128,nt=5000");
    assert_string_equal(sz[2].spec, "spiral2d:n=256,nt=5000");
    assert_string_equal(sz[3].spec, "inversion");
    n = ps_cli_bench_sizes("S,spiral2d:n=64,nt=500,slice1d,p.h5,T", sz, PS_BENCH_MAX_SIZES, why,
                           sizeof why);
    assert_int_equal(n, 5);
    assert_string_equal(sz[1].spec, "spiral2d:n=64,nt=500");
    assert_string_equal(sz[1].label, "spiral2d:n=64,nt=500");
    assert_string_equal(sz[2].spec, "slice1d");
    assert_string_equal(sz[3].spec, "p.h5");
    assert_string_equal(sz[4].label, "T");
    /* the sizes with the gradient designed: their plain size's spec and the keys */
    n = ps_cli_bench_sizes("M,MG,P,PG,SG,S", sz, PS_BENCH_MAX_SIZES, why, sizeof why);
    assert_int_equal(n, 6);
    static const char *const labels[6] = {"M", "MG", "P", "PG", "SG", "S"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(sz[i].label, labels[i]);
    assert_string_equal(sz[1].spec, "spiral2d:n=128,nt=5000,design_g=xy,smax=15000,gmax=4,g_end=1");
    assert_string_equal(sz[3].spec, "ptx2d:design_g=xy,smax=15000,gmax=4,g_end=1");
    assert_string_equal(sz[4].spec, "spiral2d:n=32,nt=1000,design_g=xy,smax=15000,gmax=4,g_end=1");
    assert_string_equal(sz[0].spec, "spiral2d:n=128,nt=5000");
    assert_string_equal(sz[2].spec, "ptx2d");
    /* a key=value after a named size with a gradient continues its spec */
    n = ps_cli_bench_sizes("MG,gmax=3", sz, PS_BENCH_MAX_SIZES, why, sizeof why);
    assert_int_equal(n, 1);
    assert_string_equal(sz[0].spec, "spiral2d:n=128,nt=5000,design_g=xy,smax=15000,gmax=4,g_end=1,gmax=3");
    assert_int_equal(ps_cli_bench_sizes("S,M,L", sz, 2, why, sizeof why), -1);
    assert_non_null(strstr(why, "more than 2"));
}

static void test_checkpoint_options(void **state)
{
    (void)state;
    ps_cli c;
    assert_int_equal(parse(&c, "design", "slice1d", "--checkpoint", "c.bin", "--every",
                           "2.5", NULL),
                     PS_CLI_OK);
    assert_string_equal(c.checkpoint, "c.bin");
    assert_true(c.every == 2.5);
    assert_null(c.resume);
    assert_int_equal(parse(&c, "design", "--resume=c.bin", "slice1d", "--max-iters", "30",
                           NULL),
                     PS_CLI_OK);
    assert_string_equal(c.resume, "c.bin");
    assert_string_equal(c.input, "slice1d");
    assert_null(c.checkpoint);
    assert_true(c.every == 0.0);
    assert_int_equal(c.opts.max_iterations, 30);
    /* resume and keep checkpointing into the same file */
    assert_int_equal(parse(&c, "design", "p.h5", "--resume", "c.bin", "--checkpoint",
                           "c.bin", NULL),
                     PS_CLI_OK);
    assert_string_equal(c.resume, "c.bin");
    assert_string_equal(c.checkpoint, "c.bin");
    assert_int_equal(parse(&c, "design", "slice1d", NULL), PS_CLI_OK);
    assert_null(c.checkpoint);
    assert_null(c.resume);
    assert_true(c.every == 0.0);

    expect_usage("--every", "requires --checkpoint",
                 parse(&c, "design", "x", "--every", "5", NULL));
    expect_usage("--every: '0'", "positive",
                 parse(&c, "design", "x", "--checkpoint", "c", "--every", "0", NULL));
    expect_usage("--every: '-1'", NULL,
                 parse(&c, "design", "x", "--checkpoint", "c", "--every", "-1", NULL));
    expect_usage("--every: 'abc'", NULL,
                 parse(&c, "design", "x", "--checkpoint", "c", "--every", "abc", NULL));
    expect_usage("--every: 'inf'", NULL,
                 parse(&c, "design", "x", "--checkpoint", "c", "--every", "inf", NULL));
    expect_usage("--checkpoint", "empty",
                 parse(&c, "design", "x", "--checkpoint", "", NULL));
    expect_usage("--resume", "empty", parse(&c, "design", "x", "--resume=", NULL));
    expect_usage("--resume", "missing value", parse(&c, "design", "x", "--resume", NULL));
    expect_usage("PRESET|FILE", "missing", parse(&c, "design", "--resume", "c.bin", NULL));
    expect_usage("--checkpoint", NULL,
                 parse(&c, "eval", "x", "--checkpoint", "c.bin", NULL));
    expect_usage("--resume", NULL, parse(&c, "bench", "--resume", "c.bin", NULL));
}

static void test_tune_options(void **state)
{
    (void)state;
    ps_cli c;
    ps_options d;
    ps_options_default(&d);
    assert_int_equal(parse(&c, "tune", NULL), PS_CLI_OK);
    assert_int_equal(c.command, PS_CMD_TUNE);
    assert_string_equal(c.input, PS_TUNE_DEFAULT_INPUT);
    assert_int_equal(c.iters, PS_TUNE_ITERS);
    assert_int_equal(c.repeats, PS_TUNE_REPEATS);
    assert_int_equal(c.no_write, 0);
    assert_int_equal(c.opts.gpu->tune_cache, 1);
    assert_null(c.json_file);
    assert_int_equal(c.bench_batch, 0);

    assert_int_equal(parse(&c, "tune", "S", "--precision", "double", "--iters", "7", "--repeats",
                           "3", "--memory", "4", "--json", "t.json", "--no-write", NULL),
                     PS_CLI_OK);
    assert_string_equal(c.input, "S");
    assert_int_equal(c.opts.precision, PS_PRECISION_DOUBLE);
    assert_int_equal(c.iters, 7);
    assert_int_equal(c.repeats, 3);
    assert_int_equal(c.opts.memory, 4);
    assert_string_equal(c.json_file, "t.json");
    assert_int_equal(c.no_write, 1);
    assert_int_equal(c.opts.gpu->tune_cache, 1); /* --no-write still reads the cache */
    assert_int_equal(parse(&c, "tune", "--no-cache", "spiral2d:n=64,nt=500", NULL), PS_CLI_OK);
    assert_string_equal(c.input, "spiral2d:n=64,nt=500");
    assert_int_equal(c.no_write, 1);
    assert_int_equal(c.opts.gpu->tune_cache, 0);
    /* --batch N: the team size of a batch of N copies */
    assert_int_equal(parse(&c, "tune", "--batch", "8", "T", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_batch, 8);
    assert_string_equal(c.input, "T");
    assert_int_equal(c.iters, PS_TUNE_BATCH_ITERS);
    assert_int_equal(parse(&c, "tune", "--iters", "7", "--batch", "8", "T", NULL), PS_CLI_OK);
    assert_int_equal(c.iters, 7);
    assert_int_equal(parse(&c, "tune", "T", NULL), PS_CLI_OK);
    assert_int_equal(c.iters, PS_TUNE_ITERS);
    assert_int_equal(parse(&c, "tune", "--batch", "16384", "--no-write", "--json", "b.json", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_batch, 16384);
    assert_string_equal(c.input, PS_TUNE_DEFAULT_INPUT);
    assert_int_equal(c.no_write, 1);
    expect_usage("--batch", "'0'", parse(&c, "tune", "--batch", "0", NULL));
    expect_usage("--batch", "'16385'", parse(&c, "tune", "--batch", "16385", "T", NULL));
    expect_usage("--batch", "'x'", parse(&c, "tune", "--batch", "x", NULL));
    expect_usage("--batch", "missing value", parse(&c, "tune", "--batch", NULL));
    /* the bench defaults stay the bench's */
    assert_int_equal(parse(&c, "bench", NULL), PS_CLI_OK);
    assert_int_equal(c.iters, PS_BENCH_ITERS);

    expect_usage("--iters", "'0'", parse(&c, "tune", "--iters", "0", NULL));
    expect_usage("--repeats", "'1001'", parse(&c, "tune", "--repeats", "1001", NULL));
    expect_usage("--json", "missing value", parse(&c, "tune", "--json", NULL));
    expect_usage("tune", "'b'", parse(&c, "tune", "a", "b", NULL));
    expect_usage("--threads", NULL, parse(&c, "tune", "--threads", "2", NULL));
    expect_usage("--no-write", NULL, parse(&c, "design", "x", "--no-write", NULL));
    expect_usage("--gpu-config", NULL, parse(&c, "tune", "--gpu-config", "256,8,64", NULL));
}

static void test_launch_shape_options(void **state)
{
    (void)state;
    ps_cli c;
    assert_int_equal(parse(&c, "design", "x", "--gpu-config", "256,8,64,4", "--no-tune-cache", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.opts.gpu->gpu_block, 256);
    assert_int_equal(c.opts.gpu->gpu_spins_per_tile, 8);
    assert_int_equal(c.opts.gpu->gpu_max_registers, 64);
    assert_int_equal(c.opts.gpu->gpu_blocks_per_sm, 4);
    assert_int_equal(c.opts.gpu->tune_cache, 0);
    assert_int_equal(ps_options_validate(&c.opts), 0);
    assert_int_equal(parse(&c, "design", "x", "--gpu-config=512,0,128", NULL), PS_CLI_OK);
    assert_int_equal(c.opts.gpu->gpu_block, 512);
    assert_int_equal(c.opts.gpu->gpu_spins_per_tile, 0);
    assert_int_equal(c.opts.gpu->gpu_max_registers, 128);
    assert_int_equal(c.opts.gpu->gpu_blocks_per_sm, 0);
    assert_int_equal(c.opts.gpu->tune_cache, 1);
    assert_int_equal(parse(&c, "eval", "x", "--gpu-config", "0,32,0", NULL), PS_CLI_OK);
    assert_int_equal(c.opts.gpu->gpu_spins_per_tile, 32);
    assert_int_equal(parse(&c, "bench", "--gpu-config", "128,1,0,8", "--no-tune-cache", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.opts.gpu->gpu_block, 128);
    assert_int_equal(c.opts.gpu->gpu_blocks_per_sm, 8);
    assert_int_equal(c.opts.gpu->tune_cache, 0);
    assert_int_equal(ps_options_validate(&c.opts), 0);

    expect_usage("--gpu-config: block '100'", "multiple of 32",
                 parse(&c, "design", "x", "--gpu-config", "100,8,64", NULL));
    expect_usage("--gpu-config: block '1024'", NULL,
                 parse(&c, "design", "x", "--gpu-config", "1024,8,64", NULL));
    expect_usage("--gpu-config: spins per tile '3'", "1, 2, 4",
                 parse(&c, "design", "x", "--gpu-config", "256,3,64", NULL));
    expect_usage("--gpu-config: spins per tile '64'", NULL,
                 parse(&c, "design", "x", "--gpu-config", "256,64,64", NULL));
    expect_usage("--gpu-config: registers '96'", "64 or 128",
                 parse(&c, "design", "x", "--gpu-config", "256,8,96", NULL));
    expect_usage("--gpu-config: blocks per SM '33'", "0..32",
                 parse(&c, "design", "x", "--gpu-config", "256,8,64,33", NULL));
    expect_usage("--gpu-config: block 'x'", NULL,
                 parse(&c, "design", "x", "--gpu-config", "x,8,64", NULL));
    expect_usage("--gpu-config: '256,8'", "BLOCK,SB,REGS[,BPS]",
                 parse(&c, "design", "x", "--gpu-config", "256,8", NULL));
    expect_usage("--gpu-config: '256,8,64,2,5'", NULL,
                 parse(&c, "design", "x", "--gpu-config", "256,8,64,2,5", NULL));
    expect_usage("--gpu-config: spins per tile ''", NULL,
                 parse(&c, "design", "x", "--gpu-config", "256,,64", NULL));
    expect_usage("--gpu-config", "missing value", parse(&c, "design", "x", "--gpu-config", NULL));
    expect_usage("--no-tune-cache=1", "does not take a value",
                 parse(&c, "design", "x", "--no-tune-cache=1", NULL));
    expect_usage("--gpu-config", NULL, parse(&c, "preset", "x", "--gpu-config", "256,8,64", NULL));
}

static void test_batch_options(void **state)
{
    (void)state;
    ps_cli c;
    /* one PRESET|FILE: the solo design, as before */
    assert_int_equal(parse(&c, "design", "slice1d", NULL), PS_CLI_OK);
    assert_int_equal(c.ninputs, 1);
    assert_false(ps_cli_is_batch(&c));
    /* several, in order, options between them */
    assert_int_equal(parse(&c, "design", "a.h5", "--max-iters", "3", "slice1d", "-o", "dir",
                           "--team-blocks", "4", "ptx2d:b0=10", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.ninputs, 3);
    assert_string_equal(c.input, "a.h5");
    assert_string_equal(c.inputs[1], "slice1d");
    assert_string_equal(c.inputs[2], "ptx2d:b0=10");
    assert_true(ps_cli_is_batch(&c));
    assert_int_equal(c.gpu.batch_team_blocks, 4);
    assert_int_equal(ps_options_validate(&c.opts), 0);
    /* --batch LIST alone, or after arguments */
    assert_int_equal(parse(&c, "design", "--batch", "list.txt", "-o", "dir", NULL), PS_CLI_OK);
    assert_int_equal(c.ninputs, 0);
    assert_string_equal(c.batch_list, "list.txt");
    assert_true(ps_cli_is_batch(&c));
    assert_int_equal(parse(&c, "design", "slice1d", "--batch", "l", "-o", "d", "--checkpoint",
                           "ck", "--every", "1", NULL),
                     PS_CLI_OK);
    assert_true(ps_cli_is_batch(&c));
    assert_int_equal(parse(&c, "design", "--batch", "l", NULL), PS_CLI_OK);
    assert_true(ps_cli_is_batch(&c));
    assert_null(c.output);
    expect_usage("--batch: empty", NULL, parse(&c, "design", "--batch", "", "-o", "d", NULL));
    expect_usage("--team-blocks: '-1'", NULL, parse(&c, "design", "a", "--team-blocks", "-1", NULL));
    expect_usage("--team-barrier: 'grid'", "auto, range or cluster",
                 parse(&c, "design", "a", "b", "-o", "d", "--team-barrier", "grid", NULL));
    expect_usage("PRESET|FILE", NULL, parse(&c, "design", "-o", "d", NULL));

    /* bench --batch N SIZE */
    assert_int_equal(parse(&c, "bench", "--batch", "64", "S", "--team-blocks", "2", NULL),
                     PS_CLI_OK);
    assert_int_equal(c.bench_batch, 64);
    assert_string_equal(c.input, "S");
    assert_int_equal(c.gpu.batch_team_blocks, 2);
    assert_int_equal(c.gpu.batch_team_barrier, PS_TEAM_BARRIER_AUTO);
    assert_int_equal(parse(&c, "bench", "--batch", "64", "S", "--team-barrier", "cluster", NULL), PS_CLI_OK);
    assert_int_equal(c.gpu.batch_team_barrier, PS_TEAM_BARRIER_CLUSTER);
    assert_int_equal(parse(&c, "bench", "--batch", "64", "S", "--team-barrier", "range", NULL), PS_CLI_OK);
    assert_int_equal(c.gpu.batch_team_barrier, PS_TEAM_BARRIER_RANGE);
    expect_usage("missing SIZE", NULL, parse(&c, "bench", "--batch", "2", NULL));
    expect_usage("--batch: 'x'", "1..16384", parse(&c, "bench", "--batch", "x", "S", NULL));
    expect_usage("--batch: '16385'", NULL, parse(&c, "bench", "--batch", "16385", "S", NULL));
    expect_usage("'S'", "--batch N", parse(&c, "bench", "S", NULL));
    expect_usage("do not go together", NULL,
                 parse(&c, "bench", "--batch", "2", "S", "--sizes", "T", NULL));
    expect_usage("unexpected argument 'T'", NULL, parse(&c, "bench", "--batch", "2", "S", "T", NULL));
    /* --variants: which of batch (bit 0), sequence (1), concurrent (2) */
    assert_int_equal(parse(&c, "bench", "--batch", "4", "T", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_variants, 0);
    assert_int_equal(parse(&c, "bench", "--batch", "4", "T", "--variants", "batch,sequence", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_variants, 3);
    assert_int_equal(parse(&c, "bench", "--batch", "4", "T", "--variants", "concurrent", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_variants, 4);
    expect_usage("--variants: 'batch,solo'", "batch, sequence and concurrent",
                 parse(&c, "bench", "--batch", "4", "T", "--variants", "batch,solo", NULL));
    expect_usage("--variants: 'batch,'", NULL, parse(&c, "bench", "--batch", "4", "T", "--variants", "batch,", NULL));
    expect_usage("--variants: ''", NULL, parse(&c, "bench", "--batch", "4", "T", "--variants", "", NULL));
    expect_usage("goes with --batch", NULL, parse(&c, "bench", "--variants", "batch", NULL));
}

static void test_gpus_options(void **state)
{
    (void)state;
    ps_cli c;
    assert_int_equal(parse(&c, "design", "slice1d", NULL), PS_CLI_OK);
    assert_int_equal(c.gpu.gpus, 0);
    assert_int_equal(parse(&c, "design", "slice1d", "--gpus", "2", NULL), PS_CLI_OK);
    assert_int_equal(c.gpu.gpus, 2);
    assert_int_equal(ps_options_validate(&c.opts), 0);
    assert_int_equal(parse(&c, "design", "slice1d", "--gpus", "all", NULL), PS_CLI_OK);
    assert_int_equal(c.gpu.gpus, -1);
    assert_int_equal(ps_options_validate(&c.opts), 0);
    expect_usage("--gpus: '0'", "1..16", parse(&c, "design", "slice1d", "--gpus", "0", NULL));
    expect_usage("--gpus: '17'", NULL, parse(&c, "design", "slice1d", "--gpus", "17", NULL));
    expect_usage("--gpus: 'two'", NULL, parse(&c, "design", "slice1d", "--gpus", "two", NULL));
    expect_usage("a batch runs on one GPU", NULL, parse(&c, "design", "a", "b", "-o", "d", "--gpus", "2", NULL));
    /* bench --gpus LIST */
    assert_int_equal(parse(&c, "bench", "--sizes", "L,U", "--gpus", "1,2,all", NULL), PS_CLI_OK);
    assert_int_equal(c.bench_ngpus, 3);
    assert_int_equal(c.bench_gpus[0], 1);
    assert_int_equal(c.bench_gpus[1], 2);
    assert_int_equal(c.bench_gpus[2], -1);
    assert_int_equal(c.gpu.gpus, 0); /* the other rows stay on one GPU */
    expect_usage("--gpus: '3x'", NULL, parse(&c, "bench", "--gpus", "1,3x", NULL));
    expect_usage("--gpus: ''", NULL, parse(&c, "bench", "--gpus", "1,,2", NULL));
    expect_usage("at most 8", NULL, parse(&c, "bench", "--gpus", "1,2,3,4,5,6,7,8,9", NULL));
    expect_usage("do not go together", NULL, parse(&c, "bench", "--batch", "2", "S", "--gpus", "2", NULL));
    /* the option's range in the library */
    ps_gpu_options g;
    ps_options o;
    ps_options_default(&o);
    ps_gpu_options_default(&g);
    o.gpu = &g;
    g.gpus = PS_GPU_MAX_GPUS + 1;
    assert_int_equal(ps_options_validate(&o), PS_ERR_OPTION);
    g.gpus = -2;
    assert_int_equal(ps_options_validate(&o), PS_ERR_OPTION);
    g.gpus = 0;
    g.reserved_int = 1;
    assert_int_equal(ps_options_validate(&o), PS_ERR_OPTION);
}

static void test_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(ps_cli_exit_code(PS_CONVERGED), 0);
    assert_int_equal(ps_cli_exit_code(PS_CONVERGED_FTOL), 0);
    assert_int_equal(ps_cli_exit_code(PS_MAX_ITERATIONS), 1);
    assert_int_equal(ps_cli_exit_code(PS_MAX_EVALUATIONS), 1);
    assert_int_equal(ps_cli_exit_code(PS_TIME_LIMIT), 1);
    assert_int_equal(ps_cli_exit_code(PS_CONSTRAINT_VIOLATED), 1);
    assert_int_equal(ps_cli_exit_code(PS_CANCELLED), 130);
    assert_int_equal(ps_cli_exit_code(PS_ERR_OPTION), 2);
    static const int input[] = {PS_ERR_NULL, PS_ERR_SIZE, PS_ERR_NONFINITE,
                                PS_ERR_DT, PS_ERR_NEGATIVE, PS_ERR_RELAXATION,
                                PS_ERR_LOSS, PS_ERR_B1MAX, PS_ERR_PRESET,
                                PS_ERR_FILE, PS_ERR_CHANNELS, PS_ERR_SAR,
                                PS_ERR_GRADIENT, PS_ERR_RF_MASK, PS_ERR_SCALE};
    for (size_t i = 0; i < sizeof input / sizeof input[0]; i++)
        assert_int_equal(ps_cli_exit_code(input[i]), 3);
    assert_int_equal(ps_cli_exit_code(PS_ERR_CHECKPOINT), 3);
    assert_int_equal(ps_cli_exit_code(PS_ERR_LINE_SEARCH), 4);
    assert_int_equal(ps_cli_exit_code(PS_ERR_OBJECTIVE), 4);
    assert_int_equal(ps_cli_exit_code(PS_ERR_NO_MEMORY), 4);
    assert_int_equal(ps_cli_exit_code(PS_ERR_GPU_LAUNCH), 4);
    assert_int_equal(ps_cli_exit_code(PS_ERR_GPU_MEMORY), 4);
    assert_int_equal(ps_cli_exit_code(PS_ERR_NO_GPU), 5);
    assert_int_equal(ps_cli_exit_code(PS_ERR_GPU_UNSUPPORTED), 5);
    assert_int_equal(ps_cli_exit_code(PS_ERR_NOT_IMPLEMENTED), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_all_options),
        cmocka_unit_test(test_other_commands),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_command_lines),
        cmocka_unit_test(test_bench_options),
        cmocka_unit_test(test_checkpoint_options),
        cmocka_unit_test(test_tune_options),
        cmocka_unit_test(test_launch_shape_options),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_batch_options),
        cmocka_unit_test(test_gpus_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
