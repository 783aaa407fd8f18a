/*
 * persolve eval PROBLEM [--x FILE]: F and its exact gradient at one pulse,
 * dF/dG (the gradient with respect to the gradient waveform, every axis),
 * the final magnetization, and the eval file (/eval/gradient,
 * /eval/gradient_g, f, /result/m). F, the gradient and M come from the
 * backend chosen; dF/dG from ps_eval_g, which the CPU computes (with
 * --backend auto also when a GPU ran the rest; --backend gpu refuses it).
 */
#include "cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5io.h"
#include "model/design.h"

int ps_cmd_eval(const ps_cli *cli)
{
    ps_options o = cli->opts;
    ps_cli_log log;
    ps_problem *p = NULL;
    double *x = NULL, *g = NULL, *gg = NULL, *m = NULL;
    char base[256], out[4096], err[1024];
    int code;

    if ((code = ps_cli_check_options(&o, &log)) != PS_EXIT_OK)
        return code;
    if ((code = ps_cli_load_problem(cli->input, &p, base, sizeof base)) != PS_EXIT_OK)
        return code;
    if ((code = ps_cli_output_path(cli->output, base, "_eval.h5", 1, out,
                                   sizeof out)) != PS_EXIT_OK)
        goto done;
    const ps_cli_file reads[] = {{"", cli->input, "the input problem file"},
                                 {"", cli->x_file, "the pulse's file (--x)"}};
    const ps_cli_file writes[] = {{"-o", out, "the eval file (-o)"}};
    if ((code = ps_cli_check_distinct(reads, 2, writes, 1)) != PS_EXIT_OK)
        goto done;

    size_t ns = ps_problem_ns(p), nt = ps_problem_nt(p), nx = ps_problem_nx(p);
    x = malloc(nx * sizeof(double));
    g = malloc(nx * sizeof(double));
    gg = malloc(3 * nt * sizeof(double));
    m = malloc(3 * ns * sizeof(double));
    if (!x || !g || !gg || !m) {
        ps_cli_error("out of memory");
        code = PS_EXIT_SOLVER;
        goto done;
    }
    int st;
    if (cli->x_file) {
        st = ps_h5_read_x_isolated(cli->x_file, p, 0.0, x, err, sizeof err);
        if (st != 0) {
            ps_cli_error("--x: %s", err);
            code = PS_EXIT_INPUT;
            goto done;
        }
    } else if ((st = ps_problem_x0(p, x)) != 0) {
        ps_cli_error("start pulse: %s", ps_strerror(st));
        code = ps_cli_exit_code(st);
        goto done;
    }

    /* the steps the RF mask holds are zero in the pulse evaluated, and so
     * in the pulse written */
    ps_problem_desc desc;
    if (ps_problem_describe(p, &desc) == 0 && desc.rf_mask) {
        size_t held = 0, nonzero = 0, nc = ps_problem_nc(p);
        for (size_t t = 0; t < nt; t++)
            if (desc.rf_mask[t] == 0.0) {
                held++;
                for (size_t c = 0; c < nc; c++) {
                    double *u = &x[PS_X_U(nt, c, t)], *v = &x[PS_X_V(nt, c, t)];
                    nonzero += *u != 0.0 || *v != 0.0;
                    *u = *v = 0.0;
                }
            }
        if (nonzero)
            ps_cli_error("warning: the pulse has RF at %zu of the %zu samples (steps x channels) "
                         "that /pulse/rf_mask holds at zero; F is evaluated, and the pulse "
                         "written, with those samples zero", nonzero, held * nc);
    }

    /* a pulse past the problem's peak constraint is evaluated as given */
    ps_cli_constraints k;
    if (ps_cli_constraint_values(p, NULL, &k) == 0 && k.has_limit) {
        size_t over = 0, worst = 0;
        double excess = 0.0, peak = 0.0; /* the largest |b_ck| / limit_c, and its |b_ck| */
        for (size_t c = 0; c < k.nc; c++)
            for (size_t t = 0; t < nt; t++) {
                double a = hypot(x[PS_X_U(nt, c, t)], x[PS_X_V(nt, c, t)]);
                over += a > k.limit[c];
                if (a / k.limit[c] > excess) {
                    excess = a / k.limit[c];
                    peak = a;
                    worst = c;
                }
            }
        if (over && k.nc == 1)
            ps_cli_error("warning: the pulse exceeds b1_max = %g G at %zu of %zu steps (peak %g "
                         "G); F is evaluated at the pulse as given", k.limit[0], over, nt,
                         peak);
        else if (over)
            ps_cli_error("warning: the pulse exceeds b1_max at %zu of %zu steps of its channels "
                         "(channel %zu: peak %g G, limit %g G); F is evaluated at the pulse as "
                         "given", over, k.nc * nt, worst, peak,
                         k.limit[worst]);
    }

    double f = NAN;
    st = ps_eval(p, &o, x, &f, g);
    if (st == 0)
        st = ps_simulate(p, &o, x, m);
    double fg;
    int gst = st == 0 ? ps_eval_g(p, &o, x, &fg, NULL, gg) : 0;
    if (gst == PS_ERR_NOT_IMPLEMENTED) {
        ps_cli_error("evaluation: dF/dG (/eval/gradient_g) is computed by the CPU backend "
                     "only: %s with --backend gpu (--backend auto computes it on the CPU)",
                     ps_strerror(gst));
        code = PS_EXIT_BACKEND;
        goto done;
    }
    st = st ? st : gst;
    if (st != 0) {
        ps_cli_error("evaluation failed: %s%s%s", ps_strerror(st),
                     ps_cli_log_reason(&log, st)[0] ? ": " : "", ps_cli_log_reason(&log, st));
        code = ps_cli_exit_code(st);
        if (code == PS_EXIT_OK || code == PS_EXIT_NOT_CONVERGED)
            code = PS_EXIT_SOLVER;
        goto done;
    }
    /* ||grad F||_2, summed in index order */
    double s = 0.0;
    for (size_t i = 0; i < nx; i++)
        s += g[i] * g[i];
    double gnorm = sqrt(s);
    if (!isfinite(f) || !isfinite(gnorm)) {
        ps_cli_error("evaluation: %s is not finite (%g) at this pulse: its values or the "
                     "problem's overflow the model",
                     isfinite(f) ? "the gradient's norm" : "F", isfinite(f) ? gnorm : f);
        code = PS_EXIT_SOLVER;
        goto done;
    }

    char opts[512], cmdline[4096], created[32];
    snprintf(opts, sizeof opts, "backend=%s precision=%s threads=%d strict=%d x=%s",
             ps_cli_backend_name(o.backend), ps_cli_precision_name(o.precision), o.threads,
             cli->strict, cli->x_file ? cli->x_file : "none");
    ps_cli_command_line(cli, cmdline, sizeof cmdline);
    ps_cli_utc_now(created, sizeof created);
    ps_h5_result_info info = {gnorm, NULL, cli->input, cmdline, opts, created};
    st = ps_h5_write_eval_info(out, p, x, f, g, gg, m, &info, err, sizeof err);
    if (st != 0) {
        ps_cli_error("%s", err);
        code = PS_EXIT_INPUT;
        goto done;
    }
    if (cli->json) {
        fputs("{\n  \"f\": ", stdout);
        ps_json_number(stdout, f);
        fputs(",\n  \"gnorm\": ", stdout);
        ps_json_number(stdout, gnorm);
        fprintf(stdout, ",\n  \"ns\": %zu,\n  \"nt\": %zu", ns, nt);
        ps_cli_json_channels(stdout, p, x);
        fputs(",\n  \"backend\": ", stdout);
        ps_json_string(stdout, ps_cli_backend_name(o.backend));
        fputs(",\n  \"precision\": ", stdout);
        ps_json_string(stdout, ps_cli_precision_name(o.precision));
        fputs(",\n  \"input\": ", stdout);
        ps_json_string(stdout, cli->input);
        fputs(",\n  \"x\": ", stdout);
        if (cli->x_file)
            ps_json_string(stdout, cli->x_file);
        else
            fputs("null", stdout);
        fputs(",\n  \"output\": ", stdout);
        ps_json_string(stdout, out);
        fputs("\n}\n", stdout);
    } else {
        printf("F         %.17g\n", f);
        printf("|grad F|  %.17g\n", gnorm);
        ps_cli_text_channels(stdout, 10, p, x);
        printf("output    %s\n", out);
    }
    code = PS_EXIT_OK;
done:
    free(m);
    free(gg);
    free(g);
    free(x);
    ps_problem_free(p);
    return code;
}
