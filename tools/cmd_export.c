/*
 * persolve export RESULT.h5 --pulseq OUT.seq: the pulse and gradients of a
 * result file as Pulseq files (src/io/pulseq.h: v1.4.2, RF on the 1 us
 * raster, gradients on 10 us, one file per transmit channel). The problem
 * and the point come from the file through the library's HDF5 reader: the
 * designed /pulse/b1 and, with designed gradient axes, their /pulse/g.
 */
#include "cmd.h"

#include <stdlib.h>

#include "io/h5io.h"
#include "io/pulseq.h"

int ps_cmd_export(const ps_cli *cli)
{
    ps_problem *p = NULL;
    double *x = NULL;
    char err[1024];
    int code = PS_EXIT_INPUT;

    int st = ps_h5_read_problem_isolated(cli->input, NULL, 0.0, &p, err, sizeof err);
    if (st != 0) {
        ps_cli_error("%s", err);
        return ps_cli_exit_code(st) == PS_EXIT_SOLVER ? PS_EXIT_SOLVER : PS_EXIT_INPUT;
    }
    size_t nc = ps_problem_nc(p);
    x = malloc(ps_problem_nx(p) * sizeof *x);
    if (!x) {
        ps_cli_error("out of memory");
        code = PS_EXIT_SOLVER;
        goto done;
    }
    for (size_t c = 0; c < nc; c++) { /* every destination, before anything is written */
        char name[4200], buf[4200];
        if (ps_pulseq_channel_path(cli->pulseq, c, nc, name, sizeof name) != 0) {
            ps_cli_error("--pulseq %s: file name too long", cli->pulseq);
            goto done;
        }
        if (ps_cli_output_path(name, NULL, "", 1, buf, sizeof buf) != PS_EXIT_OK)
            goto done;
        if (ps_cli_same_file(name, cli->input)) {
            ps_cli_error("--pulseq %s: is the input result file", name);
            goto done;
        }
    }
    if ((st = ps_h5_read_x_isolated(cli->input, p, 0.0, x, err, sizeof err)) != 0 ||
        (st = ps_pulseq_export(cli->pulseq, p, x, err, sizeof err)) != 0) {
        ps_cli_error("%s", err);
        code = st == PS_ERR_NO_MEMORY ? PS_EXIT_SOLVER : PS_EXIT_INPUT;
        goto done;
    }
    for (size_t c = 0; c < nc; c++) {
        char name[4200];
        ps_pulseq_channel_path(cli->pulseq, c, nc, name, sizeof name);
        printf("%s\n", name);
    }
    code = PS_EXIT_OK;
done:
    free(x);
    ps_problem_free(p);
    return code;
}
