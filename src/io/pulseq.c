/*
 * Pulseq export (pulseq.h): the specification's v1.4.x text format,
 * written from the specification's sections [VERSION], [DEFINITIONS],
 * [BLOCKS], [RF], [GRADIENTS] and [SHAPES].
 */
#include "io/pulseq.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "model/design.h"

/* Shapes are quantized to this step (of a normalized shape) before the
 * derivative is taken, so that equal derivatives are exactly equal. */
#define PS_PULSEQ_QUANTUM 1e-7

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
}

/* dt and raster as a common time unit: whole nanoseconds when both are
 * (so that every boundary below is an exact integer), else as given. */
static void time_units(double dt, double raster, double *td, double *tr)
{
    double nd = dt * 1e9, nr = raster * 1e9;
    double rd = nearbyint(nd), rr = nearbyint(nr);
    if (rd >= 1.0 && rr >= 1.0 && fabs(nd - rd) <= 1e-6 * rd && fabs(nr - rr) <= 1e-6 * rr &&
        rd < 1e12 && rr < 1e12) {
        *td = rd;
        *tr = rr;
    } else {
        *td = dt;
        *tr = raster;
    }
}

size_t ps_pulseq_raster_count(size_t n, double dt, double raster)
{
    if (n == 0 || !(dt > 0.0) || !isfinite(dt) || !(raster > 0.0) || !isfinite(raster))
        return 0;
    double td, tr;
    time_units(dt, raster, &td, &tr);
    double r = (double)n * td / tr;
    double c = ceil(r - 1e-9 * r);
    if (!(c <= (double)PS_PULSEQ_MAX_SAMPLES)) /* also NaN: checked before the conversion */
        return 0;
    return c < 1.0 ? 1 : (size_t)c;
}

/*
 * Interval i = [i tr, (i+1) tr) and step k = [k td, (k+1) td):
 *     out_i = (1/tr) sum_k w_k |[i tr, (i+1) tr) ∩ [k td, (k+1) td)|
 */
int ps_pulseq_resample(const double *w, size_t n, double dt, double raster, double *out,
                       size_t nout)
{
    if (!w || !out)
        return PS_ERR_NULL;
    size_t want = ps_pulseq_raster_count(n, dt, raster);
    if (want == 0)
        return PS_ERR_DT;
    if (nout != want)
        return PS_ERR_SIZE;
    double td, tr;
    time_units(dt, raster, &td, &tr);
    size_t k = 0;
    for (size_t i = 0; i < nout; i++) {
        double a = (double)i * tr, b = (double)(i + 1) * tr, acc = 0.0;
        while (k < n && (double)(k + 1) * td <= a)
            k++;
        if (k < n && (double)k * td <= a && b <= (double)(k + 1) * td) {
            out[i] = w[k]; /* inside one step: its value, exactly */
            continue;
        }
        for (size_t j = k; j < n && (double)j * td < b; j++) {
            double lo = fmax(a, (double)j * td), hi = fmin(b, (double)(j + 1) * td);
            if (hi > lo)
                acc += w[j] * (hi - lo);
        }
        out[i] = acc / tr;
    }
    return PS_CONVERGED;
}

int ps_pulseq_channel_path(const char *path, size_t c, size_t nc, char *buf, size_t len)
{
    if (!path || !buf)
        return PS_ERR_NULL;
    int n;
    if (nc <= 1) {
        n = snprintf(buf, len, "%s", path);
    } else {
        size_t l = strlen(path);
        int has_ext = l > 4 && strcmp(path + l - 4, ".seq") == 0;
        n = snprintf(buf, len, "%.*s_ch%zu.seq", (int)(has_ext ? l - 4 : l), path, c);
    }
    return n < 0 || (size_t)n >= len ? PS_ERR_SIZE : PS_CONVERGED;
}

/* ---- shapes ---------------------------------------------------------- */

/*
 * One shape of s[n] (normalized): "shape_id", "num_samples" and the
 * values. Compressed: q_i = round(s_i / quantum), d_i = q_i - q_{i-1}
 * (q_{-1} = 0), each run of L >= 2 equal d written as d, d, L - 2 and a
 * single d as itself; the reader takes the cumulative sum of the expanded
 * values. When that is not shorter than n values, the n values of s.
 */
static int write_shape(FILE *f, int id, const double *s, size_t n)
{
    long long *d = malloc((n ? n : 1) * sizeof *d);
    if (!d)
        return PS_ERR_NO_MEMORY;
    long long prev = 0;
    for (size_t i = 0; i < n; i++) {
        long long q = llround(s[i] / PS_PULSEQ_QUANTUM);
        d[i] = q - prev;
        prev = q;
    }
    size_t tokens = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && d[j] == d[i])
            j++;
        tokens += j - i >= 2 ? 3 : 1;
        i = j;
    }
    fprintf(f, "shape_id %d\nnum_samples %zu\n", id, n);
    if (tokens >= n) {
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%.9g\n", s[i]);
    } else {
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && d[j] == d[i])
                j++;
            double v = (double)d[i] * PS_PULSEQ_QUANTUM;
            if (j - i >= 2)
                fprintf(f, "%.9g\n%.9g\n%zu\n", v, v, j - i - 2);
            else
                fprintf(f, "%.9g\n", v);
            i = j;
        }
    }
    fputc('\n', f);
    free(d);
    return PS_CONVERGED;
}

/* ---- one file -------------------------------------------------------- */

typedef struct pulseq_waves {
    size_t nrf, ng;          /* samples on the RF and gradient rasters */
    double *u, *v;           /* [nrf] the channel's RF on its raster, G */
    double *g[3];            /* [ng] each axis on the gradient raster, G/cm */
    double *mag, *phase;     /* [nrf] normalized shapes */
    double *gs;              /* [ng] a normalized gradient shape */
} pulseq_waves;

static void free_waves(pulseq_waves *w)
{
    free(w->u);
    free(w->v);
    for (int a = 0; a < 3; a++)
        free(w->g[a]);
    free(w->mag);
    free(w->phase);
    free(w->gs);
}

static double max_abs(const double *w, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(w[i]));
    return m;
}

/* The text of channel c's file into f. */
static int write_channel(FILE *f, const ps_problem_desc *d, size_t c, size_t nc,
                         pulseq_waves *w, char *err, size_t errlen)
{
    const double tau = 2.0 * 3.14159265358979323846;
    double gamma_bar = d->gamma_bar > 0.0 ? d->gamma_bar : PS_GAMMA_BAR_DEFAULT; /* Hz/G */
    size_t nb = ps_pulseq_raster_count(d->nt, d->dt, PS_PULSEQ_BLOCK_RASTER);
    double total = (double)nb * PS_PULSEQ_BLOCK_RASTER;

    /* RF: amplitude in Hz, magnitude in [0, 1], phase in turns [0, 1) */
    double amp = 0.0;
    for (size_t i = 0; i < w->nrf; i++)
        amp = fmax(amp, hypot(w->u[i], w->v[i]));
    for (size_t i = 0; i < w->nrf; i++) {
        double a = hypot(w->u[i], w->v[i]);
        w->mag[i] = amp > 0.0 ? a / amp : 0.0;
        double t = a > 0.0 ? atan2(w->v[i], w->u[i]) / tau : 0.0;
        w->phase[i] = t < 0.0 ? t + 1.0 : t;
        if (w->phase[i] >= 1.0)
            w->phase[i] = 0.0;
    }
    double gamp[3];
    int gid[3], next_g = 0;
    for (int a = 0; a < 3; a++) {
        gamp[a] = max_abs(w->g[a], w->ng);
        gid[a] = gamp[a] > 0.0 ? ++next_g : 0;
    }
    int rf = amp > 0.0;
    /* amplitudes past the double range (finite samples whose magnitude or
     * mean overflows) would write "inf" and wrapped shape values */
    if (!isfinite(amp * gamma_bar)) {
        fail(err, errlen, "export: channel %zu: the RF amplitude (%g G) is past the range of the "
                          "file's numbers", c, amp);
        return PS_ERR_NONFINITE;
    }
    for (int a = 0; a < 3; a++)
        if (!isfinite(gamp[a] * gamma_bar * 100.0)) {
            fail(err, errlen, "export: the gradient amplitude on axis %c (%g G/cm) is past the "
                              "range of the file's numbers", "xyz"[a], gamp[a]);
            return PS_ERR_NONFINITE;
        }

    fprintf(f, "# Pulseq sequence file\n# Created by persolve %s\n", ps_version());
    fprintf(f, "# Transmit channel %zu of %zu (Pulseq has no dynamic parallel transmit: one file "
               "per channel)\n", c, nc);
    fprintf(f, "# Designed on steps of dt = %.9g s (%zu steps); RF and gradients are the means "
               "of the piecewise-constant waveforms over each raster interval\n\n",
            d->dt, d->nt);
    fprintf(f, "[VERSION]\nmajor 1\nminor 4\nrevision 2\n\n");
    fprintf(f, "[DEFINITIONS]\n");
    fprintf(f, "AdcRasterTime %.9g\n", PS_PULSEQ_ADC_RASTER);
    fprintf(f, "BlockDurationRaster %.9g\n", PS_PULSEQ_BLOCK_RASTER);
    fprintf(f, "GradientRasterTime %.9g\n", PS_PULSEQ_GRAD_RASTER);
    fprintf(f, "RadiofrequencyRasterTime %.9g\n", PS_PULSEQ_RF_RASTER);
    fprintf(f, "TotalDuration %.9g\n\n", total);

    fprintf(f, "# Format of blocks:\n# NUM DUR RF  GX  GY  GZ  ADC  EXT\n[BLOCKS]\n");
    fprintf(f, "1 %zu %d %d %d %d 0 0\n\n", nb, rf, gid[0], gid[1], gid[2]);

    int shape = 0;
    if (rf) {
        fprintf(f, "# Format of RF events:\n"
                   "# id amplitude mag_id phase_id time_shape_id delay freq phase\n"
                   "# ..        Hz   ....     ....          ....    us   Hz   rad\n[RF]\n");
        fprintf(f, "1 %.12g 1 2 0 0 0 0\n\n", amp * gamma_bar);
        shape = 2;
    }
    if (next_g) {
        fprintf(f, "# Format of arbitrary gradients:\n"
                   "#   time_shape_id of 0 means default timing (stepping with grad_raster "
                   "starting at 1/2 of grad_raster)\n"
                   "# id amplitude amp_shape_id time_shape_id delay\n"
                   "# ..      Hz/m       ..         ..          us\n[GRADIENTS]\n");
        int s = shape;
        for (int a = 0; a < 3; a++)
            if (gid[a])
                fprintf(f, "%d %.12g %d 0 0\n", gid[a], gamp[a] * gamma_bar * 100.0, ++s);
        fputc('\n', f);
    }
    fprintf(f, "[SHAPES]\n\n");
    int st = PS_CONVERGED;
    if (rf) {
        st = write_shape(f, 1, w->mag, w->nrf);
        if (st == 0)
            st = write_shape(f, 2, w->phase, w->nrf);
    }
    for (int a = 0; a < 3 && st == 0; a++) {
        if (!gid[a])
            continue;
        for (size_t i = 0; i < w->ng; i++)
            w->gs[i] = w->g[a][i] / gamp[a];
        st = write_shape(f, ++shape, w->gs, w->ng);
    }
    return st;
}

int ps_pulseq_export(const char *path, const ps_problem *p, const double *x, char *err,
                     size_t errlen)
{
    if (!path || !p || !x) {
        fail(err, errlen, "export: a required argument is NULL");
        return PS_ERR_NULL;
    }
    ps_problem_desc d;
    int st = ps_problem_describe(p, &d);
    if (st != 0)
        return st;
    size_t nt = d.nt, nc = ps_problem_nc(p), nx = ps_problem_nx(p);
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(x[i])) {
            fail(err, errlen, "export: the pulse is not finite (x[%zu] = %g)", i, x[i]);
            return PS_ERR_NONFINITE;
        }

    pulseq_waves w;
    memset(&w, 0, sizeof w);
    w.nrf = ps_pulseq_raster_count(nt, d.dt, PS_PULSEQ_RF_RASTER);
    w.ng = ps_pulseq_raster_count(nt, d.dt, PS_PULSEQ_GRAD_RASTER);
    if (w.nrf == 0 || w.ng == 0) {
        fail(err, errlen, "export: the pulse (%zu steps of dt = %g s) is longer than the %g s of "
                          "%zu samples on the %g s RF raster that an exported file may hold",
             nt, d.dt, (double)PS_PULSEQ_MAX_SAMPLES * PS_PULSEQ_RF_RASTER, PS_PULSEQ_MAX_SAMPLES,
             PS_PULSEQ_RF_RASTER);
        return PS_ERR_DT;
    }
    double *col = malloc(nt * sizeof *col);
    w.u = malloc(w.nrf * sizeof(double));
    w.v = malloc(w.nrf * sizeof(double));
    w.mag = malloc(w.nrf * sizeof(double));
    w.phase = malloc(w.nrf * sizeof(double));
    w.gs = malloc(w.ng * sizeof(double));
    int ok = col && w.u && w.v && w.mag && w.phase && w.gs;
    for (int a = 0; a < 3; a++)
        ok = ok && (w.g[a] = malloc(w.ng * sizeof(double))) != NULL;
    if (!ok) {
        st = PS_ERR_NO_MEMORY;
        fail(err, errlen, "export: out of memory");
        goto done;
    }

    /* every destination, before any file is written: replaced, never
     * written through, so never a link, a device, a FIFO or a directory */
    for (size_t c = 0; c < nc; c++) {
        char name[4096];
        const char *refused;
        if (ps_pulseq_channel_path(path, c, nc, name, sizeof name) != 0) {
            st = PS_ERR_FILE;
            fail(err, errlen, "%s: file name too long", path);
            goto done;
        }
        if ((refused = ps_replace_refusal(name)) != NULL) {
            st = PS_ERR_FILE;
            fail(err, errlen, "%s: cannot write: %s", name, refused);
            goto done;
        }
    }

    /* the gradient in effect: the designed axes (in the order x, y, z)
     * from x, the others the problem's */
    size_t designed = 0;
    for (int a = 0; a < 3; a++) {
        int is_designed = (d.design_g >> a) & 1u;
        for (size_t k = 0; k < nt; k++)
            col[k] = is_designed ? x[PS_X_G(nc, nt, designed, k)] : d.g[3 * k + (size_t)a];
        designed += (size_t)is_designed;
        if ((st = ps_pulseq_resample(col, nt, d.dt, PS_PULSEQ_GRAD_RASTER, w.g[a], w.ng)) != 0) {
            fail(err, errlen, "export: the gradient cannot be resampled (dt = %g s)", d.dt);
            goto done;
        }
    }

    for (size_t c = 0; c < nc && st == 0; c++) {
        if ((st = ps_pulseq_resample(x + PS_X_U(nt, c, 0), nt, d.dt, PS_PULSEQ_RF_RASTER, w.u,
                                     w.nrf)) != 0 ||
            (st = ps_pulseq_resample(x + PS_X_V(nt, c, 0), nt, d.dt, PS_PULSEQ_RF_RASTER, w.v,
                                     w.nrf)) != 0) {
            fail(err, errlen, "export: the RF cannot be resampled (dt = %g s)", d.dt);
            break;
        }
        char name[4096], tmp[4096 + PS_TEMP_SUFFIX_MAX];
        ps_pulseq_channel_path(path, c, nc, name, sizeof name); /* its length checked above */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) {
            st = PS_ERR_NO_MEMORY;
            fail(err, errlen, "export: out of memory");
            break;
        }
        st = write_channel(f, &d, c, nc, &w, err, errlen);
        if (fclose(f) != 0 && st == 0)
            st = PS_ERR_NO_MEMORY;
        if (st == PS_ERR_NO_MEMORY) {
            fail(err, errlen, "export: out of memory");
        } else if (st == 0 && ps_replace_file(name, 0644, text, len, tmp, sizeof tmp) != PS_REPLACE_DONE) {
            st = PS_ERR_FILE;
            fail(err, errlen, "%s: cannot write: %s", name, strerror(errno));
        }
        free(text);
    }
done:
    free(col);
    free_waves(&w);
    return st;
}
