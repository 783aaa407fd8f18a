/*
 * HDF5 problem, result and eval files (docs/file-format.md).
 *
 * Layout (all numbers float64 unless said otherwise, row-major as h5py
 * shows them):
 *
 *   /spins/r       [Ns,3] cm           /spins/target [Ns,3]
 *   /spins/df      [Ns]   Hz  (opt)    /spins/b1     [Ns]  B1 scale (opt)
 *   /spins/w       [Ns]       (opt)    /spins/m0     [Ns,3]         (opt)
 *   /spins/t1      [Ns]   s   (opt)    /spins/t2     [Ns]  s        (opt)
 *   /pulse/g       [Nt,3] G/cm         /pulse/b1     [Nt,2] (u, v) G (opt)
 *   several transmit channels: /spins/b1map [Ns,Nc,2] (Re, Im of S_jc; then
 *   no /spins/b1), /pulse/b1 [Nc,Nt,2] (Nc from /spins/b1map, 1..64)
 *   local SAR: /sar/vop [Nq,Nc,Nc,2] (Re, Im of the VOPs Q_q, W/kg per G^2;
 *              Nq 1..256) with attributes sar_max (W/kg) and tr (s)
 *   root attributes: dt (s), gamma_bar (Hz/G, opt), lambda (opt),
 *                    loss (string "full"|"xy"|"mls"|"z", opt), b1_max (G,
 *                    opt: one limit, or [Nc], one per channel)
 *
 *   result: + /result/m [Ns,3], /result/history [rows,7] and attributes
 *             status, iterations, evaluations, f, backend, device on /result;
 *             /result/constraints: attributes rounds, mu, violation,
 *             peak_b1 [Nc] (G), b1_max [Nc] (with a peak limit), sar [Nq]
 *             (W/kg, attribute sar_max; with VOPs)
 *   eval:   + /eval/gradient [Nt,2] (dF/du, dF/dv; [Nc,Nt,2] with several
 *             channels, as /pulse/b1), attribute f on /eval, /result/m [Ns,3]
 *
 * Ns is the row count of /spins/r and Nt the row count of /pulse/g; every
 * other array must agree with them. Files are written to a temporary name
 * in the destination directory and renamed into place, so a crash never
 * leaves a half-written file under the final name.
 */
#include "io/h5io.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "common/atomic_file.h"
#include "common/memory.h"
#include "model/design.h"
#include "model/problem.h"
#include "model/problem_fields.h"
#include "tune/cache.h"

/* Error context: the file name goes in front of every message. */
typedef struct h5ctx {
    const char *path;
    char *err;
    size_t errlen;
    const ps_h5_read_opts *opts; /* reading: --strict and the warnings (NULL: none) */
    size_t held;                 /* reading: bytes of the arrays read so far */
    double memory;               /* reading: the memory they may take (0: not yet known, -1: unknown) */
} h5ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int h5_fail(const h5ctx *c, int status, const char *fmt, ...)
{
    if (c->err && c->errlen > 0) {
        int n = snprintf(c->err, c->errlen, "%s: ", c->path ? c->path : "(null)");
        if (n < 0)
            n = 0;
        if ((size_t)n < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return status;
}

static void h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Deepest description on HDF5's error stack (the most specific reason). */
static herr_t h5_walk_cb(unsigned n, const H5E_error2_t *e, void *user)
{
    char *buf = user;
    (void)n;
    if (e && e->desc && e->desc[0]) {
        snprintf(buf, 200, "%s", e->desc);
    }
    return 0;
}

static const char *h5_reason(char *buf)
{
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_walk_cb, buf);
    H5Eclear2(H5E_DEFAULT);
    if (!buf[0])
        snprintf(buf, 200, "HDF5 error");
    return buf;
}

static void h5_close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0)
        fn(*id);
    *id = -1;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

/* Does the object at absolute path `path` exist? Checks every component:
 * 1 yes, 0 no, -1 when the file cannot say (a corrupted link table). */
static int h5_exists(hid_t file, const char *path)
{
    char buf[256];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char save = buf[i];
            buf[i] = '\0';
            htri_t e = H5Lexists(file, buf, H5P_DEFAULT);
            buf[i] = save;
            if (e <= 0)
                return e < 0 ? -1 : 0;
        }
    }
    return 1;
}

/* Whether a proper prefix of path ("/spins" of "/spins/r") is an object
 * other than a group (a dataset where the group belongs), which makes
 * H5Lexists fail for the path; then pre holds the prefix and kind what
 * it is. */
static int h5_nongroup_prefix(hid_t file, const char *path, char *pre, size_t len,
                              const char **kind)
{
    size_t n = strlen(path);
    if (n >= len)
        return 0;
    memcpy(pre, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (pre[i] != '/')
            continue;
        pre[i] = '\0';
        hid_t obj = H5Lexists(file, pre, H5P_DEFAULT) > 0 ? H5Oopen(file, pre, H5P_DEFAULT) : -1;
        if (obj < 0)
            return 0;
        H5I_type_t type = H5Iget_type(obj);
        H5Oclose(obj);
        if (type != H5I_GROUP) {
            *kind = type == H5I_DATASET    ? "a dataset"
                    : type == H5I_DATATYPE ? "a named datatype"
                                           : "an object other than a group";
            return 1;
        }
        pre[i] = '/';
    }
    return 0;
}

/* Whether dataset dset is stored through a filter (a compression) this
 * HDF5 library does not have; then why names it. Asked once a read has
 * failed: chunks an optional filter skipped read without it. */
static int h5_missing_filter(hid_t dset, char *why, size_t whylen)
{
    hid_t dcpl = H5Dget_create_plist(dset);
    int missing = 0, n = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    for (int i = 0; i < n && !missing; i++) {
        unsigned flags = 0, info = 0;
        size_t nelem = 0;
        char fname[64] = "";
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelem, NULL,
                                         sizeof fname, fname, &info);
        if (id >= 0 && H5Zfilter_avail(id) <= 0) {
            missing = 1;
            snprintf(why, whylen, "it is compressed with HDF5 filter %d%s%s%s, which this "
                     "HDF5 library does not have (install its plugin, or write the dataset "
                     "without it)", (int)id, fname[0] ? " (" : "", fname, fname[0] ? ")" : "");
        }
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return missing;
}

static const char *h5_class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER:   return "integer";
    case H5T_FLOAT:     return "float";
    case H5T_TIME:      return "time";
    case H5T_STRING:    return "string";
    case H5T_BITFIELD:  return "bitfield";
    case H5T_OPAQUE:    return "opaque";
    case H5T_COMPOUND:  return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM:      return "enum";
    case H5T_VLEN:      return "variable-length";
    case H5T_ARRAY:     return "array";
    default:            return "unknown type";
    }
}

/*
 * Whether a number's file type is one of the standard ones: IEEE binary32
 * or binary64, or an 8- to 64-bit integer, of either byte order. HDF5
 * describes a float by its bit fields, so a corrupted type byte can make
 * another valid-looking float (0.125 read as 2e-319): such a type is
 * refused instead of converted.
 */
static int h5_standard_number(hid_t type)
{
    const hid_t std[] = {H5T_IEEE_F32LE, H5T_IEEE_F32BE, H5T_IEEE_F64LE, H5T_IEEE_F64BE,
                         H5T_STD_I8LE,   H5T_STD_I8BE,   H5T_STD_U8LE,   H5T_STD_U8BE,
                         H5T_STD_I16LE,  H5T_STD_I16BE,  H5T_STD_U16LE,  H5T_STD_U16BE,
                         H5T_STD_I32LE,  H5T_STD_I32BE,  H5T_STD_U32LE,  H5T_STD_U32BE,
                         H5T_STD_I64LE,  H5T_STD_I64BE,  H5T_STD_U64LE,  H5T_STD_U64BE};
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
        if (H5Tequal(type, std[i]) > 0)
            return 1;
    return 0;
}

/* "[400,2]" for a shape; "scalar" for rank 0. */
static void h5_shape_str(char *buf, size_t len, int rank, const hsize_t *dims)
{
    if (rank <= 0) {
        snprintf(buf, len, "scalar");
        return;
    }
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (int i = 0; i < rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", i ? "," : "",
                              (unsigned long long)dims[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/*
 * The expected shape, as messages give it: "[Ns,3] = [7,3]" (the numbers
 * once the row count is known), "[Ns,Nc,2] = [7,Nc,2]", "[Nc,Nt,2] =
 * [3,5,2]", "[Nq,Nc,Nc,2] = [Nq,3,3,2]". syms[i] names dimension i,
 * vals[i] is its size (0: any); the numbers are shown once dimension
 * `known` has its size (the row count, or the channels of a VOP array).
 */
static void h5_want_str(char *buf, size_t len, int rank, const char *const *syms,
                        const size_t *vals, int known)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (int i = 0; i < rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", syms[i]);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "]");
    if (!vals[known])
        return;
    for (int i = 0; i < rank && n < len; i++) {
        const char *lead = i ? "," : " = [";
        if (vals[i])
            n += (size_t)snprintf(buf + n, len - n, "%s%zu", lead, vals[i]);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%s", lead, syms[i]);
    }
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/*
 * Read the float64 dataset `name` of shape [rows] (cols == 0) or
 * [rows,cols], with the transmit channels of `channels`
 * (model/problem_fields.h): PS_CH_INNER [rows,Nc,cols], PS_CH_OUTER
 * [Nc,rows,cols], or [rows,cols] for one channel (a rank-3 [1,rows,cols]
 * is that too), PS_CH_SQUARE [rows,Nc,Nc,cols] (whatever Nc). rows == 0
 * on entry accepts any row count and returns it in *rows_out; `rows_sym`
 * names the expected row count in messages ("Ns", "Nt" or "Nq", which
 * also says its limit), and rows_from (NULL: none) what set it. *nc is the channel count: for PS_CH_INNER 0 on
 * entry accepts any (1..PS_MAX_CHANNELS) and returns it, for PS_CH_OUTER
 * and PS_CH_SQUARE it is the count expected (nc_from says where it comes
 * from, for messages). A missing optional dataset gives *out = NULL and
 * status 0.
 */
static int h5_read_array(hid_t file, h5ctx *c, const char *name,
                         int required, size_t rows, const char *rows_sym,
                         const char *rows_from, size_t cols, int channels, size_t *nc,
                         const char *nc_from, double **out, size_t *rows_out)
{
    int status = 0;
    hid_t dset = -1, type = -1, space = -1;
    char why[200];
    *out = NULL;

    int there = h5_exists(file, name);
    char pre[256];
    const char *kind = "";
    if (there < 0 && h5_nongroup_prefix(file, name, pre, sizeof pre, &kind))
        return h5_fail(c, PS_ERR_FILE, "%s: %s is %s where the group that holds %s belongs",
                       name, pre, kind, name);
    if (there < 0)
        return h5_fail(c, PS_ERR_FILE, "%s: cannot tell whether it exists (corrupted file?): %s",
                       name, h5_reason(why));
    if (!there) {
        if (!required)
            return 0;
        return h5_fail(c, PS_ERR_FILE, "%s: missing dataset (required)", name);
    }
    dset = H5Dopen2(file, name, H5P_DEFAULT);
    if (dset < 0) {
        status = h5_fail(c, PS_ERR_FILE, "%s: cannot open as a dataset: %s",
                         name, h5_reason(why));
        goto done;
    }
    type = H5Dget_type(dset);
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    /* integers are numbers too (MATLAB writes whole numbers so) */
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        status = h5_fail(c, PS_ERR_FILE,
                         "%s: wrong type: expected float64 (or integer), got %s", name,
                         h5_class_name(cls));
        goto done;
    }
    if (!h5_standard_number(type)) {
        status = h5_fail(c, PS_ERR_FILE,
                         "%s: wrong type: a %zu-byte %s that is not a standard one (IEEE "
                         "float32 or float64, or an 8- to 64-bit integer; a corrupted type?)",
                         name, H5Tget_size(type), h5_class_name(cls));
        goto done;
    }
    space = H5Dget_space(dset);
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK] = {0};
    if (rank >= 0 && H5Sget_simple_extent_type(space) == H5S_NULL) {
        status = h5_fail(c, PS_ERR_FILE, "%s: empty: the dataset has no values (a null "
                         "dataspace)", name);
        goto done;
    }
    if (rank < 0) {
        status = h5_fail(c, PS_ERR_FILE, "%s: cannot read its shape: %s",
                         name, h5_reason(why));
        goto done;
    }
    if (rank > 0)
        H5Sget_simple_extent_dims(space, dims, NULL);

    /* where the rows and the channels are: [rows(,cols)] of one channel,
     * [rows,Nc,cols], [Nc,rows,cols] or [rows,Nc,Nc,cols] */
    const int square = channels == PS_CH_SQUARE;
    const size_t want_nc = channels == PS_CH_OUTER || square ? *nc : 0;
    int ch = -1, row = 0, want_rank = cols ? 2 : 1;
    if (channels == PS_CH_INNER) {
        ch = 1;
        want_rank = 3;
    } else if (channels == PS_CH_OUTER && (want_nc > 1 || rank == 3)) {
        ch = 0;
        row = 1;
        want_rank = 3;
    } else if (square) {
        ch = 1;
        want_rank = 4;
    }
    const char *syms[4];
    size_t vals[4];
    char colsym[24];
    snprintf(colsym, sizeof colsym, "%zu", cols);
    syms[row] = rows_sym;
    vals[row] = rows;
    if (ch >= 0) {
        syms[ch] = "Nc";
        vals[ch] = want_nc;
    }
    if (square) {
        syms[2] = "Nc";
        vals[2] = want_nc;
    }
    if (cols) {
        syms[want_rank - 1] = colsym;
        vals[want_rank - 1] = cols;
    }
    int bad = rank != want_rank;
    for (int i = 0; i < want_rank && !bad; i++)
        bad = vals[i] && dims[i] != vals[i];
    if (bad) {
        char got[96], want[96], note[320] = "";
        h5_shape_str(got, sizeof got, rank, dims);
        if (channels == PS_CH_OUTER && want_nc <= 1) {
            /* one channel: its form is [rows,cols]; a rank-3 dataset is
             * told why it has too many channels */
            const char *const one[2] = {rows_sym, colsym};
            const size_t onev[2] = {rows, cols};
            h5_want_str(want, sizeof want, 2, one, onev, 0);
            if (rank == 3)
                snprintf(note, sizeof note, " (one channel: %s)", nc_from);
        } else if (square) {
            h5_want_str(want, sizeof want, want_rank, syms, vals, ch);
            if (rank == 4 && dims[1] == dims[2] && dims[3] == cols && dims[1] != want_nc)
                snprintf(note, sizeof note, ": VOPs of Nc = %llu channels, but the problem "
                         "has Nc = %zu (%s)", (unsigned long long)dims[1], want_nc, nc_from);
            else
                snprintf(note, sizeof note, " (%zu channels: %s)", want_nc, nc_from);
        } else {
            h5_want_str(want, sizeof want, want_rank, syms, vals, row);
            if (channels == PS_CH_OUTER)
                snprintf(note, sizeof note, " (%zu channels: %s)", want_nc, nc_from);
        }
        /* [cols,rows] for [rows,cols]: an array written column-major */
        if (rank == 2 && want_rank == 2 && cols && dims[0] == cols && dims[1] != cols &&
            (!rows || dims[1] == rows))
            snprintf(note, sizeof note, " (it looks transposed: [%llu,%llu] is [%s,%s] read "
                     "the other way round, as a column-major writer such as MATLAB stores "
                     "it; write its transpose)", (unsigned long long)dims[0],
                     (unsigned long long)dims[1], colsym, rows_sym);
        /* rows that differ from those another dataset set: say which */
        char from[200] = "";
        if (rows && rows_from && rank == want_rank && dims[row] != rows)
            snprintf(from, sizeof from, "; %s = %zu is the rows of %s", rows_sym, rows,
                     rows_from);
        status = h5_fail(c, PS_ERR_FILE,
                         "%s: wrong shape: expected %s, got %s%s%s", name, want,
                         got, note, from);
        goto done;
    }
    if (dims[row] == 0) {
        status = h5_fail(c, PS_ERR_SIZE, "%s: wrong shape: %s = 0 rows",
                         name, rows_sym);
        goto done;
    }
    /* rows past the problem's limits: refused before anything is allocated */
    if (strcmp(rows_sym, "Nq") == 0 && dims[row] > (hsize_t)PS_MAX_VOPS) {
        status = h5_fail(c, PS_ERR_SIZE, "%s: %llu VOPs, more than the Nq limit of %d", name,
                         (unsigned long long)dims[row], PS_MAX_VOPS);
        goto done;
    }
    const size_t limit = strcmp(rows_sym, "Nt") == 0 ? PS_MAX_NT : PS_MAX_NS;
    if (dims[row] > (hsize_t)limit) {
        status = h5_fail(c, PS_ERR_SIZE, "%s: %llu rows, more than the %s limit of 2^%d", name,
                         (unsigned long long)dims[row], rows_sym, limit == PS_MAX_NT ? 26 : 31);
        goto done;
    }
    size_t nch = 1;
    if (square) {
        nch = want_nc * want_nc; /* the shape matched: dims[1] = dims[2] = Nc */
    } else if (ch >= 0) {
        if (dims[ch] == 0) {
            status = h5_fail(c, PS_ERR_SIZE, "%s: wrong shape: Nc = 0 channels", name);
            goto done;
        }
        if (dims[ch] > PS_MAX_CHANNELS) {
            status = h5_fail(c, PS_ERR_SIZE,
                             "%s: %llu channels, more than the limit of %d", name,
                             (unsigned long long)dims[ch], PS_MAX_CHANNELS);
            goto done;
        }
        nch = (size_t)dims[ch];
    }
    size_t n = (size_t)dims[row];
    size_t total = n * (cols ? cols : 1);
    if ((hsize_t)n != dims[row] || total / (cols ? cols : 1) != n ||
        total > SIZE_MAX / sizeof(double) / nch) {
        status = h5_fail(c, PS_ERR_SIZE, "%s: too large (%llu rows)", name,
                         (unsigned long long)dims[row]);
        goto done;
    }
    total *= nch;
    /* a small file can declare arrays of many GB (chunks never written
     * read as the fill value): refused when the copies held at once (the
     * arrays read and the problem made from them; more through the
     * isolated reader, opts->copies) cannot fit in the memory, before the
     * library spends minutes filling them; the memory looked up once a
     * read */
    const size_t bytes = total * sizeof(double);
    if (c->memory == 0.0) {
        c->memory = c->opts && c->opts->memory > 0.0 ? c->opts->memory : ps_memory_bytes();
        if (!(c->memory > 0.0))
            c->memory = -1.0;
    }
    const double mem = c->memory;
    const int copies = c->opts && c->opts->copies > 2 ? c->opts->copies : 2;
    if (mem > 0.0 && copies * ((double)c->held + (double)bytes) > mem) {
        char shape[96], before[64] = "";
        h5_shape_str(shape, sizeof shape, rank, dims);
        if (c->held)
            snprintf(before, sizeof before, ", %.3g GB with the arrays read before it",
                     ((double)c->held + (double)bytes) / 1e9);
        status = h5_fail(c, PS_ERR_NO_MEMORY,
                         "%s: %s is %.3g GB%s; a problem's arrays are held %s while it "
                         "is read, and %.3g GB of memory is available",
                         name, shape, (double)bytes / 1e9, before,
                         copies == 2 ? "twice" : "four times", mem / 1e9);
        goto done;
    }
    if (c->opts && c->opts->reading)
        c->opts->reading(c->opts->warn_user, (uint64_t)bytes);
    double *buf = malloc(bytes);
    if (!buf) {
        status = h5_fail(c, PS_ERR_NO_MEMORY, "%s: out of memory for %zu values",
                         name, total);
        goto done;
    }
    if (H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        if (h5_missing_filter(dset, why, sizeof why)) {
            status = h5_fail(c, PS_ERR_FILE, "%s: cannot read data: %s", name, why);
            goto done;
        }
        status = h5_fail(c, PS_ERR_FILE,
                         "%s: cannot read data (truncated or corrupted file?): %s",
                         name, h5_reason(why));
        goto done;
    }
    *out = buf;
    c->held += bytes;
    if (rows_out)
        *rows_out = n;
    if (channels == PS_CH_INNER)
        *nc = nch;
done:
    h5_close_id(&space, H5Sclose);
    h5_close_id(&type, H5Tclose);
    h5_close_id(&dset, H5Dclose);
    return status;
}

/* The rank of attribute `name` of loc (-1 when it cannot be read). */
static int h5_attr_rank(hid_t loc, const char *name)
{
    int rank = -1;
    hid_t space = -1, attr = H5Aopen(loc, name, H5P_DEFAULT);
    if (attr >= 0 && (space = H5Aget_space(attr)) >= 0)
        rank = H5Sget_simple_extent_ndims(space);
    h5_close_id(&space, H5Sclose);
    h5_close_id(&attr, H5Aclose);
    return rank;
}

/* The number of elements of an attribute's dataspace and its rank (-1 when
 * it cannot be read). */
static hssize_t h5_attr_count(hid_t attr, int *rank)
{
    *rank = -1;
    hid_t space = H5Aget_space(attr);
    if (space < 0)
        return -1;
    hssize_t n = H5Sget_simple_extent_npoints(space);
    *rank = H5Sget_simple_extent_ndims(space);
    H5Sclose(space);
    return n;
}

/*
 * Open the attribute `name` of loc (the object `owner` names in messages,
 * "/sar/vop: attribute tr: ..."; NULL for the root group) and check that
 * it is of class `cls` (H5T_NO_CLASS: a number, integer or float) and
 * holds one element, or with most > 1 a vector
 * [n] of 1 <= n <= most elements (a one-element attribute of any rank is
 * one value). `cls_text` and `shape_text` say what was expected in the
 * messages. Returns 0 with *attr = -1 when it is absent and not required;
 * on success *attr and *type are open (the caller closes them) and *count
 * holds the elements, on failure nothing is left open.
 */
static int h5_open_attr(hid_t loc, const h5ctx *c, const char *owner, const char *name,
                        int required, H5T_class_t cls, const char *cls_text,
                        const char *shape_text, size_t most, hid_t *attr, hid_t *type,
                        size_t *count)
{
    int status = 0;
    char why[200];
    const char *on = owner ? owner : "", *sep = owner ? ": " : "";
    *attr = -1;
    *type = -1;
    htri_t e = H5Aexists(loc, name);
    if (e < 0)
        return h5_fail(c, PS_ERR_FILE,
                       "%s%sattribute %s: cannot tell whether it exists (corrupted file?): %s",
                       on, sep, name, h5_reason(why));
    if (e == 0) {
        if (!required)
            return 0;
        return h5_fail(c, PS_ERR_FILE, "%s%sattribute %s: missing (required)", on, sep, name);
    }
    *attr = H5Aopen(loc, name, H5P_DEFAULT);
    if (*attr < 0) {
        status = h5_fail(c, PS_ERR_FILE, "%s%sattribute %s: cannot open: %s", on, sep, name,
                         h5_reason(why));
        goto fail;
    }
    *type = H5Aget_type(*attr);
    H5T_class_t got = *type >= 0 ? H5Tget_class(*type) : H5T_NO_CLASS;
    if (cls == H5T_NO_CLASS ? got != H5T_INTEGER && got != H5T_FLOAT : got != cls) {
        status = h5_fail(c, PS_ERR_FILE,
                         "%s%sattribute %s: wrong type: expected %s, got %s", on, sep, name,
                         cls_text, h5_class_name(got));
        goto fail;
    }
    if ((got == H5T_INTEGER || got == H5T_FLOAT) && !h5_standard_number(*type)) {
        status = h5_fail(c, PS_ERR_FILE,
                         "%s%sattribute %s: wrong type: a %zu-byte %s that is not a standard one "
                         "(IEEE float32 or float64, or an 8- to 64-bit integer; a corrupted "
                         "type?)", on, sep, name, H5Tget_size(*type), h5_class_name(got));
        goto fail;
    }
    int rank;
    hssize_t n = h5_attr_count(*attr, &rank);
    if (n != 1 && !(most > 1 && rank == 1 && n >= 1 && (size_t)n <= most)) {
        status = h5_fail(c, PS_ERR_FILE,
                         "%s%sattribute %s: wrong shape: expected %s, got %lld values of rank %d",
                         on, sep, name, shape_text, (long long)n, rank);
        goto fail;
    }
    *count = (size_t)n;
    return 0;
fail:
    h5_close_id(type, H5Tclose);
    h5_close_id(attr, H5Aclose);
    return status;
}

/* Read the attribute `name` of loc (owner, cls and cls_text as
 * h5_open_attr) as float64 into out[most]: one value, or with most > 1 a
 * vector of up to most; *count is the number read, 0 if it is absent. */
static int h5_read_attr_values(hid_t loc, const h5ctx *c, const char *owner, const char *name,
                               int required, H5T_class_t cls, const char *cls_text,
                               const char *shape_text, double *out, size_t most, size_t *count)
{
    hid_t attr, type;
    char why[200];
    size_t n = 0;
    *count = 0;
    int status = h5_open_attr(loc, c, owner, name, required, cls, cls_text, shape_text, most,
                              &attr, &type, &n);
    if (status || attr < 0)
        return status;
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, out) < 0)
        status = h5_fail(c, PS_ERR_FILE, "%s%sattribute %s: cannot read: %s",
                         owner ? owner : "", owner ? ": " : "", name, h5_reason(why));
    else
        *count = n;
    h5_close_id(&type, H5Tclose);
    h5_close_id(&attr, H5Aclose);
    return status;
}

/* The same for a number attribute (float, or integer as MATLAB writes
 * whole numbers). */
static int h5_read_attr_doubles(hid_t loc, const h5ctx *c, const char *owner,
                                const char *name, int required, const char *shape_text,
                                double *out, size_t most, size_t *count)
{
    return h5_read_attr_values(loc, c, owner, name, required, H5T_NO_CLASS,
                               "a number (float64 or integer)", shape_text, out, most, count);
}

/* Read the float root attribute `name`; *present = 0 if it is absent. */
static int h5_read_attr_double(hid_t loc, const h5ctx *c, const char *name,
                               int required, double *out, int *present)
{
    size_t n = 0;
    int status = h5_read_attr_doubles(loc, c, NULL, name, required, "a scalar", out, 1, &n);
    *present = n == 1;
    return status;
}

/* Read a string attribute (fixed or variable length) into buf[len]. */
static int h5_read_attr_string(hid_t loc, const h5ctx *c, const char *name,
                               char *buf, size_t len, int *present)
{
    hid_t attr, type, mem = -1;
    char why[200];
    size_t n = 0;
    *present = 0;
    int status = h5_open_attr(loc, c, NULL, name, 0, H5T_STRING, "a string",
                              "a scalar string", 1, &attr, &type, &n);
    if (status || attr < 0)
        return status;
    mem = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mem, H5Tget_cset(type)); /* ASCII <-> UTF-8 do not convert */
    if (H5Tis_variable_str(type) > 0) {
        char *s = NULL;
        H5Tset_size(mem, H5T_VARIABLE);
        if (H5Aread(attr, mem, &s) < 0) {
            status = h5_fail(c, PS_ERR_FILE, "attribute %s: cannot read: %s",
                             name, h5_reason(why));
            goto done;
        }
        snprintf(buf, len, "%s", s ? s : "");
        H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(type);
        if (sz == 0 || sz > 4096) {
            status = h5_fail(c, PS_ERR_FILE, "attribute %s: a fixed-length string of %zu bytes "
                             "(1 to 4096 expected)", name, sz);
            goto done;
        }
        char *tmp = calloc(sz + 1, 1);
        if (!tmp) {
            status = h5_fail(c, PS_ERR_NO_MEMORY, "attribute %s: out of memory",
                             name);
            goto done;
        }
        H5Tset_size(mem, sz + 1);
        H5Tset_strpad(mem, H5T_STR_NULLTERM);
        if (H5Aread(attr, mem, tmp) < 0) {
            free(tmp);
            status = h5_fail(c, PS_ERR_FILE, "attribute %s: cannot read: %s",
                             name, h5_reason(why));
            goto done;
        }
        snprintf(buf, len, "%s", tmp);
        free(tmp);
    }
    *present = 1;
done:
    h5_close_id(&mem, H5Tclose);
    h5_close_id(&type, H5Tclose);
    h5_close_id(&attr, H5Aclose);
    return status;
}

/* Open `path` read-only with a precise message for each way it can fail. */
static hid_t h5_open_read(const h5ctx *c, int *status)
{
    struct stat st;
    char why[200];
    *status = 0;
    if (!c->path) {
        *status = PS_ERR_NULL;
        return -1;
    }
    if (stat(c->path, &st) != 0) {
        *status = h5_fail(c, PS_ERR_FILE, "cannot open: %s", strerror(errno));
        return -1;
    }
    /* a FIFO would block the open, a device read without end */
    if (!S_ISREG(st.st_mode)) {
        *status = h5_fail(c, PS_ERR_FILE, "cannot open: %s, not a regular file",
                          S_ISDIR(st.st_mode)    ? "is a directory"
                          : S_ISFIFO(st.st_mode) ? "is a FIFO"
                          : S_ISCHR(st.st_mode)  ? "is a character device"
                          : S_ISBLK(st.st_mode)  ? "is a block device"
                          : S_ISSOCK(st.st_mode) ? "is a socket"
                                                 : "is a special file");
        return -1;
    }
    if (access(c->path, R_OK) != 0) {
        *status = h5_fail(c, PS_ERR_FILE, "cannot open: %s", strerror(errno));
        return -1;
    }
    htri_t is = H5Fis_hdf5(c->path);
    if (is == 0) {
        H5Eclear2(H5E_DEFAULT);
        *status = h5_fail(c, PS_ERR_FILE,
                          "not an HDF5 file (no HDF5 signature; %lld bytes)",
                          (long long)st.st_size);
        return -1;
    }
    hid_t file = H5Fopen(c->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        *status = h5_fail(c, PS_ERR_FILE,
                          "cannot open as HDF5 (truncated or corrupted file): %s",
                          h5_reason(why));
        return -1;
    }
    return file;
}

/*
 * The problem's datasets (model/problem_fields.h): the field's name, the
 * dataset, whether it must be there, its rows (the offsetof ns or nt in
 * ps_problem_desc), its columns (0: a vector), how its rows relate to the
 * channels (PS_CH_*) and the field of ps_problem_desc it fills.
 */
typedef struct h5_dataset {
    const char *name; /* of the field, as validation messages name it */
    const char *path;
    int required;
    size_t rows;
    size_t cols;
    int channels; /* PS_CH_NONE, PS_CH_INNER or PS_CH_OUTER */
    size_t field; /* offsetof the pointer in ps_problem_desc */
} h5_dataset;

#define DATASET(name, rows, width, channels, presence, rule, group, dataset, label) \
    {#name, "/" #group "/" dataset, presence == PS_FIELD_REQUIRED,            \
     offsetof(ps_problem_desc, rows), width > 1 ? width : 0, channels,        \
     offsetof(ps_problem_desc, name)},
static const h5_dataset h5_problem_datasets[] = {PS_PROBLEM_ARRAYS(DATASET)};
#undef DATASET

#define H5_NDATASETS (sizeof h5_problem_datasets / sizeof h5_problem_datasets[0])

/* The root attributes of the real scalars, and the field each fills. */
typedef struct h5_attribute {
    const char *name;
    const char *where; /* "attribute NAME", for messages */
    int presence;      /* PS_FIELD_REQUIRED, _DEFAULTED or _OPTIONAL */
    size_t field;      /* offsetof the double in ps_problem_desc */
} h5_attribute;

#define ATTRIBUTE(name, presence)                                             \
    {#name, "attribute " #name, presence, offsetof(ps_problem_desc, name)},
static const h5_attribute h5_problem_attributes[] = {PS_PROBLEM_REALS(ATTRIBUTE)};
#undef ATTRIBUTE

#define H5_NATTRIBUTES (sizeof h5_problem_attributes / sizeof h5_problem_attributes[0])

/* ---- names the reader does not know ------------------------------------ */

/* The root attributes that are not real scalars of the list, and the
 * attributes of /sar/vop. */
static const char *const h5_other_root_attributes[] = {"loss", "design_g", "smax", "gmax",
                                                       "g_end"};
static const char *const h5_vop_attributes[] = {"sar_max", "tr"};
/* The groups at the top: the problem's, and those of results and eval
 * files (which are problems too). */
static const char *const h5_root_groups[] = {"spins", "pulse", "sar", "result", "eval"};

/* Edit distance of a and b, letters compared without case (names are
 * short: longer ones are cut at 63 characters). */
static size_t h5_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    la = la > 63 ? 63 : la;
    lb = lb > 63 ? 63 : lb;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The names an object may hold, for one kind of member. */
typedef struct h5_names {
    const char *kind;  /* "dataset", "attribute", "group or dataset" */
    const char *owner; /* "/spins", "/" */
    const char *known[24];
    size_t n;
    int unknown;       /* how many were reported */
    int status;        /* the first error (--strict) */
    const h5ctx *c;
} h5_names;

/* One name found: known, or reported with the closest known one (an
 * error with --strict, else a warning). */
static void h5_name_seen(h5_names *nm, const char *name)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; i < nm->n; i++) {
        if (strcmp(name, nm->known[i]) == 0)
            return;
        size_t dist = h5_distance(name, nm->known[i]);
        if (dist < bd) {
            bd = dist;
            best = nm->known[i];
        }
    }
    const ps_h5_read_opts *o = nm->c->opts;
    char msg[512], where[200], near[200];
    const int root = strcmp(nm->owner, "/") == 0;
    if (!strcmp(nm->kind, "attribute")) { /* "attribute b1max", "/sar/vop: attribute x" */
        snprintf(where, sizeof where, "%s%sattribute %.100s", root ? "" : nm->owner,
                 root ? "" : ": ", name);
        snprintf(near, sizeof near, "%s", best ? best : "?");
    } else { /* "/spins/T1" */
        snprintf(where, sizeof where, "%s/%.100s", root ? "" : nm->owner, name);
        snprintf(near, sizeof near, "%s/%s", root ? "" : nm->owner, best ? best : "?");
    }
    snprintf(msg, sizeof msg, "%s: unknown %s%s (the closest known name is %s)", where,
             nm->kind, o && o->strict ? "" : ", ignored", near);
    nm->unknown++;
    if (o && o->strict) {
        if (!nm->status)
            nm->status = h5_fail(nm->c, PS_ERR_FILE, "%s (--strict)", msg);
    } else if (o && o->warn) {
        char full[700];
        snprintf(full, sizeof full, "%s: %s", nm->c->path, msg);
        o->warn(o->warn_user, full);
    }
}

static herr_t h5_link_cb(hid_t g, const char *name, const H5L_info_t *info, void *user)
{
    (void)g;
    (void)info;
    h5_name_seen(user, name);
    return 0;
}

static herr_t h5_attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *user)
{
    (void)loc;
    (void)info;
    h5_name_seen(user, name);
    return 0;
}

/* Whether the word s[n] is `name`. */
static int h5_is_word(const char *s, size_t n, const char *name)
{
    return n && strlen(name) == n && !strncmp(name, s, n);
}

/*
 * Map the field a ps_problem_validate message names ("df[12] is NaN") to
 * where it lives in the file. Returns NULL if no known field is named.
 */
static const char *h5_field_location(const char *msg)
{
    static const struct {
        const char *field, *where;
    } others[] = {
        {"loss", "attribute loss"}, {"ns", "/spins/r"}, {"nt", "/pulse/g"},
        {"nc", "/spins/b1map"}, {"nq", "/sar/vop"},
        {"sar_max", "/sar/vop: attribute sar_max"}, {"tr", "/sar/vop: attribute tr"},
        {"b1_max_channel", "attribute b1_max"}, {"design_g", "attribute design_g"},
        {"smax", "attribute smax"}, {"gmax", "attribute gmax"}, {"g_end", "attribute g_end"},
    };
    const char *p = msg;
    while (*p) {
        while (*p && !(isalnum((unsigned char)*p) || *p == '_'))
            p++;
        const char *s = p;
        while (*p && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        size_t n = (size_t)(p - s);
        for (size_t i = 0; i < H5_NDATASETS; i++)
            if (h5_is_word(s, n, h5_problem_datasets[i].name))
                return h5_problem_datasets[i].path;
        for (size_t i = 0; i < H5_NATTRIBUTES; i++)
            if (h5_is_word(s, n, h5_problem_attributes[i].name))
                return h5_problem_attributes[i].where;
        for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
            if (h5_is_word(s, n, others[i].field))
                return others[i].where;
    }
    return NULL;
}

/* Add to nm the names of the problem's datasets in /group. */
static void h5_known_datasets(h5_names *nm, const char *group)
{
    size_t gl = strlen(group);
    for (size_t i = 0; i < H5_NDATASETS && nm->n < 24; i++) {
        const char *path = h5_problem_datasets[i].path;
        if (!strncmp(path, group, gl) && path[gl] == '/')
            nm->known[nm->n++] = path + gl + 1;
    }
}

/* The members of a group (links) or the attributes of an object; a list
 * that cannot be read is left to the reads that follow, which name what
 * they cannot read. */
static int h5_check_members(hid_t file, const char *obj, h5_names *nm, int attributes)
{
    hsize_t idx = 0;
    if (attributes) {
        hid_t o = H5Oopen(file, obj, H5P_DEFAULT);
        if (o < 0)
            return 0;
        H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, h5_attr_cb, nm);
        H5Oclose(o);
    } else {
        H5Literate_by_name(file, obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, h5_link_cb, nm,
                           H5P_DEFAULT);
    }
    H5Eclear2(H5E_DEFAULT);
    return nm->status;
}

/*
 * Every name the reader does not know (a misspelled dataset or attribute
 * would otherwise be ignored: /spins/T1 is no T1, b1max no peak limit):
 * the top-level groups, the datasets of /spins, /pulse and /sar, the root
 * attributes and those of /sar/vop. Each is a warning naming the closest
 * known name (c->opts->warn), or with strict an error.
 */
static int h5_check_names(hid_t file, const h5ctx *c)
{
    h5_names nm;
    int st;
    memset(&nm, 0, sizeof nm);
    nm.c = c;
    nm.kind = "group";
    nm.owner = "/";
    for (size_t i = 0; i < sizeof h5_root_groups / sizeof *h5_root_groups; i++)
        nm.known[nm.n++] = h5_root_groups[i];
    if ((st = h5_check_members(file, "/", &nm, 0)))
        return st;
    static const char *const groups[3] = {"/spins", "/pulse", "/sar"};
    for (int g = 0; g < 3; g++) {
        if (h5_exists(file, groups[g]) != 1)
            continue;
        nm.n = 0;
        nm.kind = "dataset";
        nm.owner = groups[g];
        h5_known_datasets(&nm, groups[g]);
        if ((st = h5_check_members(file, groups[g], &nm, 0)))
            return st;
    }
    nm.n = 0;
    nm.kind = "attribute";
    nm.owner = "/";
    for (size_t i = 0; i < H5_NATTRIBUTES; i++)
        nm.known[nm.n++] = h5_problem_attributes[i].name;
    for (size_t i = 0; i < sizeof h5_other_root_attributes / sizeof *h5_other_root_attributes;
         i++)
        nm.known[nm.n++] = h5_other_root_attributes[i];
    if ((st = h5_check_members(file, "/", &nm, 1)))
        return st;
    if (h5_exists(file, "/sar/vop") == 1) {
        nm.n = 0;
        nm.owner = "/sar/vop";
        for (size_t i = 0; i < 2; i++)
            nm.known[nm.n++] = h5_vop_attributes[i];
        st = h5_check_members(file, "/sar/vop", &nm, 1);
    }
    return st;
}

/*
 * The SAR limit of a problem with VOPs (d->vop read, d->nq set): the
 * attributes sar_max (W/kg) and tr (s) of /sar/vop, both required.
 */
static int h5_read_sar(hid_t file, const h5ctx *c, ps_problem_desc *d)
{
    char why[200];
    const size_t nc = PS_NC_OF(d), n = 2 * nc * nc * d->nq;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(d->vop[i]))
            return h5_fail(c, PS_ERR_NONFINITE,
                           "/sar/vop: element [%zu][%zu][%zu][%zu] (VOP %zu, row %zu, column "
                           "%zu, %s) is %s", i / (2 * nc * nc), i / (2 * nc) % nc, i / 2 % nc,
                           i % 2, i / (2 * nc * nc), i / (2 * nc) % nc, i / 2 % nc,
                           i % 2 ? "Im" : "Re", isnan(d->vop[i]) ? "NaN" : "Inf");
    hid_t dset = H5Dopen2(file, "/sar/vop", H5P_DEFAULT);
    if (dset < 0)
        return h5_fail(c, PS_ERR_FILE, "/sar/vop: cannot open as a dataset: %s",
                       h5_reason(why));
    size_t got = 0;
    int st = h5_read_attr_doubles(dset, c, "/sar/vop", "sar_max", 1, "a scalar (W/kg)",
                                  &d->sar_max, 1, &got);
    if (!st)
        st = h5_read_attr_doubles(dset, c, "/sar/vop", "tr", 1, "a scalar (s)", &d->tr, 1,
                                  &got);
    H5Dclose(dset);
    return st;
}

/*
 * The root attribute b1_max: a vector [Nc] is one limit per channel, into
 * b1max[] and d->b1_max_channel (then d->b1_max stays PS_B1MAX_NONE); any
 * other one-element attribute (a scalar, as files have always had it, or
 * [1] or [1,1] with several channels) is one limit for every channel, into
 * d->b1_max. Absent: no peak limit.
 */
static int h5_read_b1max(hid_t file, const h5ctx *c, ps_problem_desc *d,
                         double b1max[PS_MAX_CHANNELS])
{
    const size_t nc = PS_NC_OF(d);
    double v[PS_MAX_CHANNELS + 1];
    size_t n = 0;
    char shape[96];
    snprintf(shape, sizeof shape, "a scalar or [Nc] = [%zu] (one limit per channel)", nc);
    int st = h5_read_attr_doubles(file, c, NULL, "b1_max", 0, shape, v, PS_MAX_CHANNELS + 1, &n);
    if (st || n == 0)
        return st;
    /* absence is the only "no limit": Inf, NaN, 0 or a negative value
     * (a corrupted number among them) is refused, never read as none */
    for (size_t i = 0; i < n; i++)
        if (!(isfinite(v[i]) && v[i] > 0.0)) {
            char which[48] = "";
            if (n > 1)
                snprintf(which, sizeof which, " (channel %zu)", i);
            return h5_fail(c, PS_ERR_B1MAX,
                           "attribute b1_max: %g%s is not a peak limit: give a finite value > 0 "
                           "(G), or leave the attribute out for no limit", v[i], which);
        }
    if (n == 1 && !(nc == 1 && h5_attr_rank(file, "b1_max") == 1)) {
        d->b1_max = v[0];
        return 0;
    }
    if (n != nc)
        return h5_fail(c, PS_ERR_FILE,
                       "attribute b1_max: wrong length: %zu limits, but the problem has Nc = %zu "
                       "channel%s (%s): give one limit, or one per channel",
                       n, nc, nc == 1 ? "" : "s",
                       d->b1map ? "those of /spins/b1map" : "no /spins/b1map");
    memcpy(b1max, v, n * sizeof *v);
    d->b1_max_channel = b1max;
    return 0;
}

/*
 * The gradient design, root attributes: design_g (a string naming the axes,
 * ps_design_g_parse), smax and gmax (numbers, integer or float), g_end (a
 * number, 0 or 1), each optional here (ps_problem_validate says which
 * need which).
 */
static int h5_read_gradient(hid_t file, const h5ctx *c, ps_problem_desc *d)
{
    char axes[64];
    int present = 0;
    int st = h5_read_attr_string(file, c, "design_g", axes, sizeof axes, &present);
    if (st)
        return st;
    if (present && ps_design_g_parse(axes, &d->design_g) != 0)
        return h5_fail(c, PS_ERR_GRADIENT,
                       "attribute design_g: '%s' is not a set of gradient axes (expected x, y, "
                       "z or several of them in that order: xy, xz, yz, xyz)", axes);
    static const char *const names[3] = {"smax", "gmax", "g_end"};
    double v[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < 3; i++) {
        size_t n = 0;
        if ((st = h5_read_attr_values(file, c, NULL, names[i], 0, H5T_NO_CLASS,
                                      "a number (integer or float)", "a scalar", &v[i], 1, &n)))
            return st;
    }
    if (v[2] != 0.0 && v[2] != 1.0)
        return h5_fail(c, PS_ERR_GRADIENT, "attribute g_end: g_end = %g must be 0 or 1", v[2]);
    d->smax = v[0];
    d->gmax = v[1];
    d->g_end = (int)v[2];
    return 0;
}

int ps_h5_read_problem(const char *path, ps_problem **out, char *err,
                       size_t errlen)
{
    return ps_h5_read_problem_ex(path, NULL, out, err, errlen);
}

int ps_h5_read_problem_ex(const char *path, const ps_h5_read_opts *opts, ps_problem **out,
                          char *err, size_t errlen)
{
    h5ctx c = {path, err, errlen, opts, 0, 0.0};
    double *arrays[H5_NDATASETS] = {NULL};
    double b1max[PS_MAX_CHANNELS]; /* the limits of attribute b1_max [Nc] */
    ps_problem_desc d;
    int st = 0, present = 0;
    char loss[64];

    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return PS_ERR_NULL;
    *out = NULL;
    if (!path)
        return h5_fail(&c, PS_ERR_NULL, "no file name");
    h5_quiet();
    hid_t file = h5_open_read(&c, &st);
    if (file < 0)
        return st;

    ps_problem_desc_init(&d);
    if ((st = h5_check_names(file, &c)))
        goto done;
    /* Ns or Nt is 0 until its first dataset (/spins/r, /pulse/g) is read:
     * those are read first, accept any row count and set it; the later
     * ones, read in a second pass, must match it. Nc is set by the array
     * with the channels inside (/spins/b1map, [Ns,Nc,2]), which comes
     * before the channel-major start pulse and the VOPs (read in the
     * second pass, [Nq,Nc,Nc,2], any Nq); without it, one channel */
    int taken[H5_NDATASETS] = {0};
    const char *rows_from[3] = {NULL, NULL, NULL}; /* the datasets that set Ns, Nt, Nq */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < H5_NDATASETS; i++) {
            const h5_dataset *ds = &h5_problem_datasets[i];
            size_t *rows = (size_t *)((char *)&d + ds->rows);
            if (taken[i] || (pass == 0 && (*rows != 0 || ds->channels == PS_CH_SQUARE)))
                continue;
            taken[i] = 1;
            const int dim = ds->rows == offsetof(ps_problem_desc, nt)   ? 1
                            : ds->rows == offsetof(ps_problem_desc, nq) ? 2
                                                                        : 0;
            const char *sym = dim == 1 ? "Nt" : dim == 2 ? "Nq" : "Ns";
            size_t nc = ds->channels == PS_CH_INNER ? 0 : PS_NC_OF(&d);
            if ((st = h5_read_array(file, &c, ds->path, ds->required, *rows,
                                    sym, rows_from[dim], ds->cols, ds->channels, &nc,
                                    d.b1map ? "those of /spins/b1map" : "no /spins/b1map",
                                    &arrays[i], rows)))
                goto done;
            if (arrays[i] && !rows_from[dim])
                rows_from[dim] = ds->path;
            *(const double **)((char *)&d + ds->field) = arrays[i];
            if (ds->channels == PS_CH_INNER && arrays[i])
                d.nc = nc;
        }
    }

    if (d.vop && (st = h5_read_sar(file, &c, &d)))
        goto done;

    for (size_t i = 0; i < H5_NATTRIBUTES; i++) {
        const h5_attribute *at = &h5_problem_attributes[i];
        double v;
        if (at->field == offsetof(ps_problem_desc, b1_max)) {
            if ((st = h5_read_b1max(file, &c, &d, b1max)))
                goto done;
            continue;
        }
        if ((st = h5_read_attr_double(file, &c, at->name,
                                      at->presence == PS_FIELD_REQUIRED, &v,
                                      &present)))
            goto done;
        if (present)
            *(double *)((char *)&d + at->field) = v;
    }
    if ((st = h5_read_attr_string(file, &c, "loss", loss, sizeof loss, &present)))
        goto done;
    if (present && ps_loss_parse(loss, &d.loss) != 0) {
        st = h5_fail(&c, PS_ERR_LOSS,
                     "attribute loss: unknown loss '%s' (expected full, xy, "
                     "mls or z)", loss);
        goto done;
    }
    if ((st = h5_read_gradient(file, &c, &d)))
        goto done;

    /* a B1 scale is the b1map of one channel: one or the other */
    if (d.b1map && d.b1scale) {
        st = h5_fail(&c, PS_ERR_CHANNELS,
                     "/spins/b1map: /spins/b1 (a B1 scale) is present too; a B1 scale is the "
                     "b1map of one channel: give one of them");
        goto done;
    }

    char msg[256] = "";
    st = ps_problem_validate(&d, msg, sizeof msg);
    if (st != 0) {
        const char *where = h5_field_location(msg);
        if (where)
            st = h5_fail(&c, st, "%s: %s", where, msg[0] ? msg : ps_strerror(st));
        else
            st = h5_fail(&c, st, "%s", msg[0] ? msg : ps_strerror(st));
        goto done;
    }
    st = ps_problem_create(&d, out);
    if (st != 0)
        st = h5_fail(&c, st, "%s", ps_strerror(st));
done:
    for (size_t i = 0; i < H5_NDATASETS; i++)
        free(arrays[i]);
    H5Fclose(file);
    return st;
}

int ps_h5_read_pulse(const char *path, size_t nc, size_t nt, double *x, char *err,
                     size_t errlen)
{
    h5ctx c = {path, err, errlen, NULL, 0, 0.0};
    double *b1 = NULL;
    int st = 0;

    if (err && errlen)
        err[0] = '\0';
    if (!x)
        return PS_ERR_NULL;
    if (!path)
        return h5_fail(&c, PS_ERR_NULL, "no file name");
    if (nt == 0)
        return h5_fail(&c, PS_ERR_SIZE, "/pulse/b1: Nt = 0");
    if (nc == 0 || nc > PS_MAX_CHANNELS)
        return h5_fail(&c, PS_ERR_SIZE, "/pulse/b1: Nc = %zu (1 to %d channels)", nc,
                       PS_MAX_CHANNELS);
    h5_quiet();
    hid_t file = h5_open_read(&c, &st);
    if (file < 0)
        return st;
    size_t want = nc;
    st = h5_read_array(file, &c, "/pulse/b1", 1, nt, "Nt", "the problem", 2, PS_CH_OUTER,
                       &want, "the problem's", &b1, NULL);
    if (st == 0) {
        /* [nc][nt][2] rows; one channel's messages name the row alone */
        for (size_t i = 0; i < nc * nt && !st; i++)
            if (!isfinite(b1[2 * i]) || !isfinite(b1[2 * i + 1])) {
                if (nc == 1)
                    st = h5_fail(&c, PS_ERR_NONFINITE,
                                 "/pulse/b1: row %zu is not finite (%g, %g)", i,
                                 b1[2 * i], b1[2 * i + 1]);
                else
                    st = h5_fail(&c, PS_ERR_NONFINITE,
                                 "/pulse/b1: channel %zu, row %zu is not finite (%g, %g)",
                                 i / nt, i % nt, b1[2 * i], b1[2 * i + 1]);
            }
        if (!st)
            ps_design_x_of_rows(nc, nt, b1, x);
    }
    free(b1);
    H5Fclose(file);
    return st;
}

int ps_h5_read_x(const char *path, const ps_problem *p, double *x, char *err, size_t errlen)
{
    h5ctx c = {path, err, errlen, NULL, 0, 0.0};
    ps_problem_desc d;
    double *g = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!p || !x)
        return PS_ERR_NULL;
    int st = ps_problem_describe(p, &d);
    if (!st)
        st = ps_h5_read_pulse(path, PS_NC_OF(&d), d.nt, x, err, errlen);
    if (st || !d.design_g)
        return st;
    h5_quiet();
    hid_t file = h5_open_read(&c, &st);
    if (file < 0)
        return st;
    size_t one = 1;
    st = h5_read_array(file, &c, "/pulse/g", 1, d.nt, "Nt", "the problem", 3, PS_CH_NONE,
                       &one, "the problem's", &g, NULL);
    for (size_t a = 0, i = 0; a < 3 && !st; a++) {
        if (!(d.design_g >> a & 1u))
            continue;
        for (size_t k = 0; k < d.nt && !st; k++) {
            const double v = g[3 * k + a];
            if (!isfinite(v))
                st = h5_fail(&c, PS_ERR_NONFINITE,
                             "/pulse/g: row %zu is not finite on the designed axis %c (%g)", k,
                             "xyz"[a], v);
            x[PS_X_G(PS_NC_OF(&d), d.nt, i, k)] = v;
        }
        i++;
    }
    free(g);
    H5Fclose(file);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

/* The dataset `name` of shape dims[rank]. */
static int h5_write_dims(hid_t loc, const h5ctx *c, const char *name, int rank,
                         const hsize_t *dims, const double *data)
{
    char why[200];
    hsize_t rows = dims[0];
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dset = space >= 0 ? H5Dcreate2(loc, name, H5T_IEEE_F64LE, space,
                                         H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                            : -1;
    int ok = dset >= 0;
    if (ok && rows > 0)
        ok = H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                      data) >= 0;
    int st = ok ? 0 : h5_fail(c, PS_ERR_FILE, "%s: cannot write: %s", name,
                              h5_reason(why));
    h5_close_id(&dset, H5Dclose);
    h5_close_id(&space, H5Sclose);
    return st;
}

/* [rows] (cols == 0) or [rows,cols]. */
static int h5_write_array(hid_t loc, const h5ctx *c, const char *name,
                          size_t rows, size_t cols, const double *data)
{
    const hsize_t dims[2] = {rows, cols};
    return h5_write_dims(loc, c, name, cols ? 2 : 1, dims, data);
}

/*
 * An array of nc channels (model/problem_fields.h): PS_CH_NONE as
 * h5_write_array, PS_CH_INNER [rows,nc,cols], PS_CH_OUTER [nc,rows,cols]
 * for several channels and [rows,cols] for one (the form files have
 * always had), PS_CH_SQUARE [rows,nc,nc,cols] for any nc.
 */
static int h5_write_channels(hid_t loc, const h5ctx *c, const char *name, int channels,
                             size_t nc, size_t rows, size_t cols, const double *data)
{
    if (channels == PS_CH_SQUARE) {
        const hsize_t dims[4] = {rows, nc, nc, cols};
        return h5_write_dims(loc, c, name, 4, dims, data);
    }
    if (channels == PS_CH_INNER) {
        const hsize_t dims[3] = {rows, nc, cols};
        return h5_write_dims(loc, c, name, 3, dims, data);
    }
    if (channels == PS_CH_OUTER && nc > 1) {
        const hsize_t dims[3] = {nc, rows, cols};
        return h5_write_dims(loc, c, name, 3, dims, data);
    }
    return h5_write_array(loc, c, name, rows, cols, data);
}

/* Write an attribute of file type ftype from memory type mtype: a scalar
 * (n == 0) or a vector [n]. */
static int h5_write_attr(hid_t loc, const h5ctx *c, const char *name,
                         hid_t ftype, hid_t mtype, const void *value, size_t n)
{
    char why[200];
    const hsize_t dims[1] = {n};
    hid_t space = n ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t attr = space >= 0 ? H5Acreate2(loc, name, ftype, space, H5P_DEFAULT,
                                         H5P_DEFAULT)
                            : -1;
    int ok = attr >= 0 && H5Awrite(attr, mtype, value) >= 0;
    int st = ok ? 0 : h5_fail(c, PS_ERR_FILE, "attribute %s: cannot write: %s",
                              name, h5_reason(why));
    h5_close_id(&attr, H5Aclose);
    h5_close_id(&space, H5Sclose);
    return st;
}

static int h5_write_attr_double(hid_t loc, const h5ctx *c, const char *name,
                                double v)
{
    return h5_write_attr(loc, c, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, 0);
}

/* A float64 attribute of shape [n]. */
static int h5_write_attr_doubles(hid_t loc, const h5ctx *c, const char *name,
                                 const double *v, size_t n)
{
    return h5_write_attr(loc, c, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v, n);
}

static int h5_write_attr_int64(hid_t loc, const h5ctx *c, const char *name,
                               int64_t v)
{
    return h5_write_attr(loc, c, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, 0);
}

static int h5_write_attr_int(hid_t loc, const h5ctx *c, const char *name, int v)
{
    return h5_write_attr(loc, c, name, H5T_STD_I32LE, H5T_NATIVE_INT, &v, 0);
}

/*
 * Fixed-length UTF-8 string (null-terminated, its length plus one): the
 * text is stored in the attribute itself. A variable-length string lives
 * in the file's global heap, which a corrupted file's reader follows
 * blindly (libhdf5 crashes or hangs on a damaged heap collection);
 * h5py, MATLAB and this reader read both kinds.
 */
static int h5_write_attr_string(hid_t loc, const h5ctx *c, const char *name,
                                const char *s)
{
    const char *v = s ? s : "";
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0)
        return h5_fail(c, PS_ERR_FILE, "attribute %s: cannot create type", name);
    H5Tset_size(type, strlen(v) + 1);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    H5Tset_cset(type, H5T_CSET_UTF8);
    int st = h5_write_attr(loc, c, name, type, type, v, 0);
    H5Tclose(type);
    return st;
}

static hid_t h5_group(hid_t file, const h5ctx *c, const char *name, int *st)
{
    char why[200];
    hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        *st = h5_fail(c, PS_ERR_FILE, "%s: cannot create group: %s", name,
                      h5_reason(why));
    return g;
}

/* x in solver layout (channel-major u_c1..u_cNt, v_c1..v_cNt) -> rows
 * [nc][nt] of (u_ck, v_ck). */
static double *h5_rows_from_x(const double *x, size_t nc, size_t nt)
{
    double *b = malloc(2 * nc * nt * sizeof(double));
    if (b)
        ps_design_rows_of_x(nc, nt, x, b);
    return b;
}

/* The gradient waveform [nt][3] of a pulse x in solver layout: d's, each
 * designed axis's column taken from x (the i-th waveform after the pulse,
 * model/design.h). */
static double *h5_g_of_x(const ps_problem_desc *d, const double *x)
{
    double *g = malloc(3 * d->nt * sizeof(double));
    if (!g)
        return NULL;
    memcpy(g, d->g, 3 * d->nt * sizeof(double));
    for (size_t a = 0, i = 0; a < 3; a++) {
        if (!(d->design_g >> a & 1u))
            continue;
        for (size_t k = 0; k < d->nt; k++)
            g[3 * k + a] = x[PS_X_G(PS_NC_OF(d), d->nt, i, k)];
        i++;
    }
    return g;
}

/* The gradient design's root attributes, with designed axes: design_g
 * (the axes' name), smax, gmax (when set) and g_end (int32). */
static int h5_write_gradient(hid_t file, const h5ctx *c, const ps_problem_desc *d)
{
    char axes[4];
    if (!d->design_g)
        return 0;
    int st = ps_design_g_name(d->design_g, axes, sizeof axes);
    if (st)
        return h5_fail(c, st, "attribute design_g: %u names no axes", d->design_g);
    if ((st = h5_write_attr_string(file, c, "design_g", axes)) ||
        (st = h5_write_attr_double(file, c, "smax", d->smax)) ||
        (d->gmax > 0.0 && (st = h5_write_attr_double(file, c, "gmax", d->gmax))))
        return st;
    return h5_write_attr_int(file, c, "g_end", d->g_end);
}

/* The real scalars' root attributes: the optional ones that are set
 * (finite), or those every problem has (its gamma_bar is never 0). */
static int h5_write_reals(hid_t file, const h5ctx *c, const ps_problem_desc *d,
                          int optional)
{
    int st = 0;
    for (size_t i = 0; i < H5_NATTRIBUTES && !st; i++) {
        const h5_attribute *at = &h5_problem_attributes[i];
        double v = *(const double *)((const char *)d + at->field);
        if ((at->presence == PS_FIELD_OPTIONAL) == optional && isfinite(v))
            st = h5_write_attr_double(file, c, at->name, v);
    }
    return st;
}

/*
 * The problem's groups and root attributes. x (solver layout) replaces the
 * problem's start pulse as /pulse/b1 when not NULL, and the designed axes'
 * columns of /pulse/g with its waveforms.
 */
static int h5_write_problem_body(hid_t file, const h5ctx *c,
                                 const ps_problem_desc *desc, const double *x)
{
    int st = 0;
    double *start = NULL; /* x as rows (u_k, v_k) */
    ps_problem_desc dx = *desc, *d = &dx; /* its g x's where designed */
    hid_t spins = h5_group(file, c, "/spins", &st);
    hid_t pulse = spins >= 0 ? h5_group(file, c, "/pulse", &st) : -1;
    hid_t sar = pulse >= 0 && d->vop ? h5_group(file, c, "/sar", &st) : -1;
    if (st)
        goto done;
    if (x) {
        start = h5_rows_from_x(x, PS_NC_OF(d), d->nt);
        if (!start) {
            st = h5_fail(c, PS_ERR_NO_MEMORY, "/pulse/b1: out of memory");
            goto done;
        }
        if (d->design_g && !(dx.g = h5_g_of_x(desc, x))) {
            st = h5_fail(c, PS_ERR_NO_MEMORY, "/pulse/g: out of memory");
            goto done;
        }
    }
    /* every array the problem has, each in its group (the variables spins
     * and pulse); x in place of the start pulse */
#define WRITE(name, rows, width, channels, presence, rule, group, dataset, label) \
    if (!st) {                                                                \
        const double *a = presence == PS_FIELD_START && x ? start : d->name;  \
        if (a)                                                                \
            st = h5_write_channels(group, c, dataset, channels, PS_NC_OF(d),  \
                                   d->rows, width > 1 ? width : 0, a);        \
    }
    PS_PROBLEM_ARRAYS(WRITE)
#undef WRITE
    if (st)
        goto done;
    /* the scalars every problem has, the loss last; then the optional ones
     * that are set */
    const char *loss = ps_loss_name(d->loss);
    if ((st = h5_write_reals(file, c, d, 0)) ||
        (st = h5_write_attr_string(file, c, "loss", loss ? loss : "full")) ||
        (st = h5_write_reals(file, c, d, 1)) || (st = h5_write_gradient(file, c, d)))
        goto done;
    /* one peak limit per channel: b1_max [Nc] where b1_max alone would be
     * (a scalar) */
    if (d->b1_max_channel &&
        (st = h5_write_attr_doubles(file, c, "b1_max", d->b1_max_channel, PS_NC_OF(d))))
        goto done;
    /* the SAR limit on its VOPs */
    if (d->vop) {
        char why[200];
        hid_t vop = H5Dopen2(sar, "vop", H5P_DEFAULT);
        if (vop < 0) {
            st = h5_fail(c, PS_ERR_FILE, "/sar/vop: cannot reopen: %s", h5_reason(why));
            goto done;
        }
        if (!(st = h5_write_attr_double(vop, c, "sar_max", d->sar_max)))
            st = h5_write_attr_double(vop, c, "tr", d->tr);
        H5Dclose(vop);
    }
done:
    free(start);
    if (dx.g != desc->g)
        free((double *)dx.g);
    h5_close_id(&sar, H5Gclose);
    h5_close_id(&pulse, H5Gclose);
    h5_close_id(&spins, H5Gclose);
    return st;
}

/*
 * A file being written: built in memory by HDF5's core driver (no backing
 * store), so that libhdf5 never writes to the disk itself: a full disk or
 * a failing close would leave its file state half closed, which its exit
 * handler then crashes on. h5_end() takes the finished file image and
 * writes it with ordinary writes to a temporary file beside the
 * destination, synced and renamed into place (common/atomic_file.h): the
 * path holds the old file or the whole new one, and every failure is one
 * errno.
 */
typedef struct h5out {
    hid_t file;
} h5out;

/* Memory grows by this much at a time. */
#define H5_CORE_INCREMENT ((size_t)1 << 20)

static int h5_begin(const h5ctx *c, h5out *o)
{
    char why[200];
    o->file = -1;
    const char *refused = ps_replace_refusal(c->path);
    if (refused)
        return h5_fail(c, PS_ERR_FILE, "cannot write: %s", refused);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_fapl_core(fapl, H5_CORE_INCREMENT, 0) >= 0)
        o->file = H5Fcreate(c->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (o->file < 0)
        return h5_fail(c, PS_ERR_FILE, "cannot create HDF5 file (in memory): %s",
                       h5_reason(why));
    return 0;
}

/* Take the file image, close it, write it into place (st == 0), or
 * discard it. */
static int h5_end(const h5ctx *c, h5out *o, int st)
{
    char why[200];
    void *image = NULL;
    ssize_t size = 0;
    if (st == 0 && H5Fflush(o->file, H5F_SCOPE_GLOBAL) < 0)
        st = h5_fail(c, PS_ERR_FILE, "cannot finish the file: %s", h5_reason(why));
    if (st == 0 && (size = H5Fget_file_image(o->file, NULL, 0)) <= 0)
        st = h5_fail(c, PS_ERR_FILE, "cannot finish the file: %s", h5_reason(why));
    if (st == 0 && !(image = malloc((size_t)size)))
        st = h5_fail(c, PS_ERR_NO_MEMORY, "out of memory for the file's %lld bytes",
                     (long long)size);
    if (st == 0 && H5Fget_file_image(o->file, image, (size_t)size) != size)
        st = h5_fail(c, PS_ERR_FILE, "cannot finish the file: %s", h5_reason(why));
    /* a file in memory closes without I/O */
    if (o->file >= 0 && H5Fclose(o->file) < 0 && st == 0)
        st = h5_fail(c, PS_ERR_FILE, "cannot close: %s", h5_reason(why));
    o->file = -1;
    H5Eclear2(H5E_DEFAULT);
    if (st == 0) {
        char tmp[4096 + PS_TEMP_SUFFIX_MAX];
        ps_replace_step step = PS_REPLACE_CREATE;
        int fd = ps_create_temp_beside(c->path, 0666, tmp, sizeof tmp);
        if (fd >= 0 && ps_write_all(fd, image, (size_t)size) != 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            errno = e;
            step = PS_REPLACE_WRITE;
        } else if (fd >= 0) {
            step = ps_replace_finish(fd, tmp, c->path, PS_REPLACE_SYNC_OPTIONAL);
        }
        const char *what = step == PS_REPLACE_CREATE  ? "cannot create a file beside it"
                           : step == PS_REPLACE_WRITE ? "cannot write"
                           : step == PS_REPLACE_SYNC  ? "cannot write (sync)"
                                                      : "cannot rename the new file into place";
        if (step != PS_REPLACE_DONE)
            st = h5_fail(c, PS_ERR_FILE, "%s: %s%s", what,
                         errno ? strerror(errno) : "no progress",
                         step == PS_REPLACE_CREATE ? "" : " (the file is left as it was)");
    }
    free(image);
    return st;
}

/* Common checks of the write functions; fills *d. */
static int h5_write_prepare(const h5ctx *c, const ps_problem *p,
                            ps_problem_desc *d)
{
    if (c->err && c->errlen)
        c->err[0] = '\0';
    if (!c->path)
        return h5_fail(c, PS_ERR_NULL, "no file name");
    if (!p)
        return h5_fail(c, PS_ERR_NULL, "no problem");
    h5_quiet();
    int st = ps_problem_describe(p, d);
    if (st != 0)
        return h5_fail(c, st, "cannot describe the problem: %s", ps_strerror(st));
    return 0;
}

int ps_h5_write_problem(const char *path, const ps_problem *p, char *err,
                        size_t errlen)
{
    h5ctx c = {path, err, errlen, NULL, 0, 0.0};
    ps_problem_desc d;
    h5out o;
    int st = h5_write_prepare(&c, p, &d);
    if (st || (st = h5_begin(&c, &o)))
        return st;
    st = h5_write_problem_body(o.file, &c, &d, NULL);
    return h5_end(&c, &o, st);
}

static const char *h5_backend_name(ps_backend b)
{
    switch (b) {
    case PS_BACKEND_CPU: return "cpu";
    case PS_BACKEND_GPU: return "gpu";
    case PS_BACKEND_AUTO: return "auto";
    }
    return "unknown";
}

/* Columns of /result/history. */
#define H5_HISTORY_COLS 7

/* The dataset `name` [n] of loc with, when `limit` is not NULL, the
 * float64 attribute `limit` = v on it. */
static int h5_write_limited(hid_t loc, const h5ctx *c, const char *name, size_t n,
                            const double *data, const char *limit, double v)
{
    char why[200];
    int st = h5_write_array(loc, c, name, n, 0, data);
    if (st || !limit)
        return st;
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0)
        return h5_fail(c, PS_ERR_FILE, "/result/constraints/%s: cannot reopen: %s", name,
                       h5_reason(why));
    st = h5_write_attr_double(ds, c, limit, v);
    H5Dclose(ds);
    return st;
}

/*
 * The gradient constraints of the designed axes at x (ps_gradient_constraints),
 * in /result/constraints (group g): attribute design_g (the axes' name) and,
 * one value per designed axis in the order x, y, z, peak_g [Ng] = max |g|
 * (G/cm; attribute gmax when set), peak_slew [Ng] = max |slew| (G/cm/s;
 * attribute smax) and end_g [Ng] = |g(T)| (G/cm; attribute g_end).
 */
static int h5_write_gradient_report(hid_t g, const h5ctx *c, const ps_problem *p,
                                    const ps_problem_desc *d, const double *x)
{
    double v[3][3], rows[3][3]; /* [what][axis], [what][designed axis] */
    char axes[4];
    int st = ps_gradient_constraints(p, x, v[0], v[1], v[2]);
    if (!st)
        st = ps_design_g_name(d->design_g, axes, sizeof axes);
    if (st)
        return h5_fail(c, st, "/result/constraints: the gradient of the result: %s",
                       ps_strerror(st));
    size_t ng = 0;
    for (size_t a = 0; a < 3; a++)
        if (d->design_g >> a & 1u) {
            for (int w = 0; w < 3; w++)
                rows[w][ng] = v[w][a];
            ng++;
        }
    if ((st = h5_write_attr_string(g, c, "design_g", axes)) ||
        (st = h5_write_limited(g, c, "peak_g", ng, rows[0], d->gmax > 0.0 ? "gmax" : NULL,
                               d->gmax)) ||
        (st = h5_write_limited(g, c, "peak_slew", ng, rows[1], "smax", d->smax)) ||
        (st = h5_write_limited(g, c, "end_g", ng, rows[2], NULL, 0.0)))
        return st;
    hid_t ds = H5Dopen2(g, "end_g", H5P_DEFAULT);
    if (ds < 0)
        return h5_fail(c, PS_ERR_FILE, "/result/constraints/end_g: cannot reopen");
    st = h5_write_attr_int(ds, c, "g_end", d->g_end);
    H5Dclose(ds);
    return st;
}

/*
 * /result/constraints: the penalty rounds (attributes rounds, mu,
 * violation), the peak |b_ck| of every channel of the result x (peak_b1
 * [Nc], G) with the limits (b1_max [Nc]) when the problem has a peak
 * limit, with VOPs SAR_q of x (sar [Nq], W/kg) with its limit (attribute
 * sar_max of sar), the steps where the RF is free (attribute
 * rf_free_steps: Nt without an RF mask) and with designed gradient axes
 * their constraints (h5_write_gradient_report).
 */
static int h5_write_constraints(hid_t res, const h5ctx *c, const ps_problem *p,
                                const ps_problem_desc *d, const double *x, const ps_result *r)
{
    const size_t nc = PS_NC_OF(d);
    double peak[PS_MAX_CHANNELS], limit[PS_MAX_CHANNELS], sar[PS_MAX_VOPS];
    int st = ps_constraints(p, x, peak, sar);
    if (st)
        return h5_fail(c, st, "/result/constraints: the constraints of the result pulse: %s",
                       ps_strerror(st));
    hid_t g = h5_group(res, c, "constraints", &st);
    if (st)
        return st;
    int peak_limit = d->b1_max_channel || isfinite(d->b1_max);
    for (size_t i = 0; i < nc; i++)
        limit[i] = d->b1_max_channel ? d->b1_max_channel[i] : d->b1_max;
    if ((st = h5_write_attr_int(g, c, "rounds", r->rounds)) ||
        (st = h5_write_attr_double(g, c, "mu", r->mu)) ||
        (st = h5_write_attr_double(g, c, "violation", r->violation)) ||
        (st = h5_write_array(g, c, "peak_b1", nc, 0, peak)) ||
        (peak_limit && (st = h5_write_array(g, c, "b1_max", nc, 0, limit))))
        goto done;
    if (d->nq && (st = h5_write_limited(g, c, "sar", d->nq, sar, "sar_max", d->sar_max)))
        goto done;
    int64_t free_steps = 0;
    for (size_t k = 0; k < d->nt; k++)
        free_steps += !d->rf_mask || d->rf_mask[k] != 0.0;
    if ((st = h5_write_attr_int64(g, c, "rf_free_steps", free_steps)))
        goto done;
    if (d->design_g)
        st = h5_write_gradient_report(g, c, p, d, x);
done:
    H5Gclose(g);
    return st;
}

/* The provenance of a result (ps_h5_result_info) on /result. */
static int h5_write_info(hid_t res, const h5ctx *c, const ps_h5_result_info *info)
{
    int st = 0;
    const struct {
        const char *name, *value;
    } text[] = {
        {"persolve_version", ps_version()}, {"build_id", ps_tune_build_id()},
        {"input", info->input},             {"command_line", info->command_line},
        {"options", info->options},         {"created", info->created},
        {"gnorm_test", info->gnorm_test},
    };
    for (size_t i = 0; i < sizeof text / sizeof text[0] && !st; i++)
        if (text[i].value)
            st = h5_write_attr_string(res, c, text[i].name, text[i].value);
    if (!st && !isnan(info->gnorm_physical))
        st = h5_write_attr_double(res, c, "gnorm_physical", info->gnorm_physical);
    return st;
}

int ps_h5_write_result(const char *path, const ps_problem *p, const double *x,
                       const double *m, const ps_result *r, char *err,
                       size_t errlen)
{
    return ps_h5_write_result_info(path, p, x, m, r, NULL, err, errlen);
}

int ps_h5_write_result_info(const char *path, const ps_problem *p, const double *x,
                            const double *m, const ps_result *r,
                            const ps_h5_result_info *info, char *err, size_t errlen)
{
    h5ctx c = {path, err, errlen, NULL, 0, 0.0};
    ps_problem_desc d;
    h5out o;
    double *hist = NULL;
    hid_t res = -1, dset = -1;
    char why[200];
    int st = h5_write_prepare(&c, p, &d);
    if (st)
        return st;
    if (!x || !m || !r)
        return h5_fail(&c, PS_ERR_NULL, "no pulse, magnetization or result");
    if ((st = h5_begin(&c, &o)))
        return st;
    if ((st = h5_write_problem_body(o.file, &c, &d, x)))
        goto done;
    res = h5_group(o.file, &c, "/result", &st);
    if (st)
        goto done;
    if ((st = h5_write_array(res, &c, "m", d.ns, 3, m)))
        goto done;

    /* /result/history [rows][7]: iteration, f, gnorm, step, evaluations, s,
     * penalty round */
    size_t rows = r->history ? r->history_len : 0;
    hist = malloc((rows ? rows : 1) * H5_HISTORY_COLS * sizeof(double));
    if (!hist) {
        st = h5_fail(&c, PS_ERR_NO_MEMORY, "/result/history: out of memory");
        goto done;
    }
    for (size_t i = 0; i < rows; i++) {
        const ps_progress *h = &r->history[i];
        double *row = hist + H5_HISTORY_COLS * i;
        row[0] = (double)h->iteration;
        row[1] = h->f;
        row[2] = h->gnorm;
        row[3] = h->step;
        row[4] = (double)h->evaluations;
        row[5] = h->seconds;
        row[6] = (double)h->round;
    }
    if ((st = h5_write_array(res, &c, "history", rows, H5_HISTORY_COLS, hist)))
        goto done;
    dset = H5Dopen2(res, "history", H5P_DEFAULT);
    if (dset < 0) {
        st = h5_fail(&c, PS_ERR_FILE, "/result/history: cannot reopen: %s",
                     h5_reason(why));
        goto done;
    }
    if ((st = h5_write_attr_string(dset, &c, "columns",
                                   "iteration,f,gnorm,step,evaluations,"
                                   "seconds,round")))
        goto done;
    if ((st = h5_write_constraints(res, &c, p, &d, x, r)))
        goto done;

    if ((st = h5_write_attr_int(res, &c, "status", r->status)) ||
        (st = h5_write_attr_string(res, &c, "status_text",
                                   ps_strerror(r->status))) ||
        (st = h5_write_attr_int64(res, &c, "iterations", r->iterations)) ||
        (st = h5_write_attr_int64(res, &c, "evaluations", r->evaluations)) ||
        (st = h5_write_attr_double(res, &c, "f", r->f)) ||
        (st = h5_write_attr_double(res, &c, "gnorm", r->gnorm)) ||
        (st = h5_write_attr_double(res, &c, "seconds", r->seconds)) ||
        (st = h5_write_attr_string(res, &c, "backend",
                                   h5_backend_name(r->backend))) ||
        (st = h5_write_attr_string(res, &c, "device", r->device)) ||
        (st = h5_write_attr_int(res, &c, "fell_back", r->fell_back)) ||
        (info && (st = h5_write_info(res, &c, info))))
        goto done;
done:
    free(hist);
    h5_close_id(&dset, H5Dclose);
    h5_close_id(&res, H5Gclose);
    return h5_end(&c, &o, st);
}

int ps_h5_write_eval(const char *path, const ps_problem *p, const double *x,
                     double f, const double *grad, const double *grad_g, const double *m,
                     char *err, size_t errlen)
{
    return ps_h5_write_eval_info(path, p, x, f, grad, grad_g, m, NULL, err, errlen);
}

int ps_h5_write_eval_info(const char *path, const ps_problem *p, const double *x, double f,
                          const double *grad, const double *grad_g, const double *m,
                          const ps_h5_result_info *info, char *err, size_t errlen)
{
    h5ctx c = {path, err, errlen, NULL, 0, 0.0};
    ps_problem_desc d;
    h5out o;
    double *rows = NULL;
    hid_t ev = -1, res = -1;
    int st = h5_write_prepare(&c, p, &d);
    if (st)
        return st;
    if (!x || !grad || !m)
        return h5_fail(&c, PS_ERR_NULL, "no pulse, gradient or magnetization");
    if ((st = h5_begin(&c, &o)))
        return st;
    if ((st = h5_write_problem_body(o.file, &c, &d, x)))
        goto done;
    ev = h5_group(o.file, &c, "/eval", &st);
    if (st)
        goto done;
    rows = h5_rows_from_x(grad, PS_NC_OF(&d), d.nt);
    if (!rows) {
        st = h5_fail(&c, PS_ERR_NO_MEMORY, "/eval/gradient: out of memory");
        goto done;
    }
    /* the shape of /pulse/b1: [Nt,2], or [Nc,Nt,2] for several channels */
    if ((st = h5_write_channels(ev, &c, "gradient", PS_CH_OUTER, PS_NC_OF(&d), d.nt, 2,
                                rows)) ||
        (grad_g && (st = h5_write_array(ev, &c, "gradient_g", d.nt, 3, grad_g))) ||
        (st = h5_write_attr_double(ev, &c, "f", f)) ||
        (info && (st = h5_write_info(ev, &c, info))))
        goto done;
    res = h5_group(o.file, &c, "/result", &st);
    if (st)
        goto done;
    st = h5_write_array(res, &c, "m", d.ns, 3, m);
done:
    free(rows);
    h5_close_id(&res, H5Gclose);
    h5_close_id(&ev, H5Gclose);
    return h5_end(&c, &o, st);
}
