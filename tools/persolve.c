/*
 * persolve: the command-line tool.
 *
 *   persolve design PRESET|FILE [-o OUT.h5] [--backend auto|cpu|gpu]
 *                   [--precision single|double] [--max-iters N]
 *                   [--max-evals N] [--time-limit S] [--memory M] [--gtol X]
 *                   [--ftol X] [--threads N] [--json] [--quiet]
 *                   [--checkpoint FILE [--every S]] [--resume FILE]
 *   persolve design PRESET|FILE PRESET|FILE... | --batch LIST  -o DIR
 *                   [OPTIONS] [--team-blocks N]   (several problems: a batch)
 *   persolve eval PROBLEM [--x FILE] [-o OUT.h5] [--backend B]
 *                 [--precision P] [--threads N] [--json]
 *   persolve preset NAME[:key=value,...] [-o FILE]
 *   persolve info [--json]
 *   persolve bench [--sizes S,M,L,T] [--iters N] [--repeats R] [--json FILE]
 *                  [--precision P] [--backend auto|gpu|cpu] [--cpu-iters N]
 *                  [--memory M] [--threads N]
 *   persolve bench --batch N SIZE [--iters N] [--repeats R] [--json FILE]
 *   persolve tune [PRESET|FILE] [--precision P] [--iters N] [--repeats R]
 *                 [--memory M] [--json FILE] [--no-write] [--no-cache]
 *   (design, eval and bench also take --no-tune-cache and
 *   --gpu-config BLOCK,SB,REGS[,BPS])
 *   persolve export RESULT.h5 --pulseq OUT.seq
 *   persolve --help | --version, persolve COMMAND --help
 *
 * Exit codes:
 *   0    converged (PS_CONVERGED or PS_CONVERGED_FTOL), or success of a
 *        command that does not solve (eval, preset, info, bench, tune, --help)
 *   1    the solve ended without convergence (max iterations, max
 *        evaluations, time limit)
 *   2    usage error (bad command, option or option value)
 *   3    input error (bad, corrupt or unwritable file, a full disk, bad
 *        preset, invalid problem, a start where the gradient is zero,
 *        refused checkpoint)
 *   4    solver error (line-search failure, non-finite objective), or out of
 *        memory
 *   5    backend unavailable (--backend gpu and no usable GPU)
 *   6    tune --backend gpu (or --batch) without a usable GPU
 *   130  cancelled by SIGINT or SIGTERM (the best point is still written)
 */
#include <signal.h>
#include <stdio.h>

#include "cli_parse.h"
#include "cmd.h"

int main(int argc, char **argv)
{
    ps_cli cli;
    char err[512];

    if (ps_cli_parse(&cli, argc, argv, err, sizeof err) != PS_CLI_OK) {
        const char *name = ps_cli_command_name(cli.command);
        fprintf(stderr, "persolve: %s\n", err);
        if (argc < 2)
            ps_cli_usage(stderr, PS_CMD_NONE);
        else
            fprintf(stderr, "Try 'persolve%s%s --help'.\n", name ? " " : "",
                    name ? name : "");
        return PS_EXIT_USAGE;
    }
    if (cli.help) {
        ps_cli_usage(stdout, cli.command);
        return PS_EXIT_OK;
    }
    if (cli.version) {
        printf("persolve %s\n", ps_version());
        return PS_EXIT_OK;
    }
    ps_cli_set_strict(cli.strict);
    /* a write past the file size limit fails with EFBIG and is reported,
     * instead of killing the process */
    signal(SIGXFSZ, SIG_IGN);
    switch (cli.command) {
    case PS_CMD_DESIGN: return ps_cmd_design(&cli);
    case PS_CMD_EVAL:   return ps_cmd_eval(&cli);
    case PS_CMD_PRESET: return ps_cmd_preset(&cli);
    case PS_CMD_INFO:   return ps_cmd_info(&cli);
    case PS_CMD_BENCH:  return ps_cmd_bench(&cli);
    case PS_CMD_TUNE:   return ps_cmd_tune(&cli);
    case PS_CMD_EXPORT: return ps_cmd_export(&cli);
    case PS_CMD_NONE:   break;
    }
    ps_cli_usage(stderr, PS_CMD_NONE);
    return PS_EXIT_USAGE;
}
