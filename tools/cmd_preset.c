/*
 * persolve preset NAME[:key=value,...] [-o FILE]: write a preset problem.
 */
#include "cmd.h"

#include <string.h>

#include "io/h5io.h"

int ps_cmd_preset(const ps_cli *cli)
{
    ps_problem *p = NULL;
    char err[1024], out[4096], base[256];
    int st = ps_preset_create(cli->input, &p, err, sizeof err);
    if (st != 0) {
        ps_cli_error("%s", err[0] ? err : ps_strerror(st));
        return st == PS_ERR_NO_MEMORY ? PS_EXIT_SOLVER : PS_EXIT_INPUT;
    }
    ps_cli_preset_base(cli->input, base, sizeof base);
    int code = ps_cli_output_path(cli->output, base, ".h5", 1, out, sizeof out);
    if (code == PS_EXIT_OK) {
        st = ps_h5_write_problem(out, p, err, sizeof err);
        if (st != 0) {
            ps_cli_error("%s", err);
            code = PS_EXIT_INPUT;
        } else {
            printf("wrote %s: %s, %zu spins, %zu time steps", out,
                   cli->input, ps_problem_ns(p), ps_problem_nt(p));
            if (ps_problem_nc(p) > 1)
                printf(", %zu channels", ps_problem_nc(p));
            if (ps_problem_nq(p))
                printf(", %zu VOPs", ps_problem_nq(p));
            ps_problem_desc d;
            char axes[4];
            if (ps_problem_describe(p, &d) == 0 && d.design_g &&
                ps_design_g_name(d.design_g, axes, sizeof axes) == 0)
                printf(", gradient %s designed", axes);
            putchar('\n');
        }
    }
    ps_problem_free(p);
    return code;
}
