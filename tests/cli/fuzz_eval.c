/*
 * Fuzzing `persolve eval` with broken problem files: no file may crash it,
 * hang it, or end it without one clean message.
 *
 *   fuzz_eval PERSOLVE SEEDS WORKDIR        the seed list SEEDS: lines
 *                                           "ATTACK FIRST LAST"
 *   fuzz_eval PERSOLVE --long N WORKDIR     N seeds of every attack
 *   fuzz_eval --write ATTACK SEED FILE      write the file of one seed
 *
 * Each (attack, seed) regenerates the same file: a small valid problem
 * written with the HDF5 API (one channel, or two with a B1 map, VOPs and a
 * designed gradient axis; string attributes fixed- or variable-length, as
 * h5py writes them), then mutated by the attack. `persolve eval FILE` runs
 * on it with a time limit, and the outcome is counted:
 *   success      exit 0
 *   clean error  exit 2..5, stderr one or more lines "persolve: ...", no
 *                HDF5 error stack
 *   crash        a signal
 *   hang         still running at the limit (killed)
 *   unclean      anything else (exit 1, another code, a raw message)
 *   contained    under a sanitizer: its report of a memory error inside
 *                libhdf5 in the process that reads the file (which a
 *                normal build may not notice at all), then persolve's
 *                one clean "corrupt file" line
 * The test fails on any crash, hang or unclean end; the counts per attack
 * are printed as a table.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

extern char **environ;

#define NS 24
#define NT 16
#define LIMIT_S 30.0 /* a run longer than this is a hang (persolve gives up reading a small file after 10 s) */

/* ---- a deterministic generator (splitmix64) ------------------------------ */

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t pick(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

static double unit(void)
{
    return (double)(rng() >> 11) / 9007199254740992.0;
}

/* ---- the valid problem ----------------------------------------------------- */

static void put_dset(hid_t f, const char *name, int rank, const hsize_t *dims, const double *v)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
    H5Sclose(sp);
}

static void put_attr_d(hid_t loc, const char *name, double v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
    H5Sclose(sp);
}

/* A string attribute: variable-length (h5py's str) or fixed-length. */
static void put_attr_s(hid_t loc, const char *name, const char *s, int vlen)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, vlen ? H5T_VARIABLE : strlen(s) + 1);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, vlen ? (const void *)&s : (const void *)s);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

/* The problem: channels 1 (slice-like) or 2 (b1map, VOPs, design_g=x). */
static int write_base(const char *path, int channels, int vlen)
{
    static double r[NS * 3], target[NS * 3], df[NS], w[NS], t1[NS], t2[NS], g[NT * 3],
        b1[2 * NT * 2], map[NS * 2 * 2], vop[2 * 2 * 2];
    for (int j = 0; j < NS; j++) {
        r[3 * j] = 0.0;
        r[3 * j + 1] = 0.0;
        r[3 * j + 2] = -1.0 + 2.0 * j / (NS - 1);
        target[3 * j] = j > NS / 3 && j < 2 * NS / 3 ? 0.5 : 0.0;
        target[3 * j + 1] = 0.0;
        target[3 * j + 2] = sqrt(1.0 - target[3 * j] * target[3 * j]);
        df[j] = 10.0 * j;
        w[j] = 1.0;
        t1[j] = 1.0;
        t2[j] = 0.1;
        for (int c = 0; c < 2; c++) {
            map[4 * j + 2 * c] = 1.0 - 0.1 * c;
            map[4 * j + 2 * c + 1] = 0.05 * c;
        }
    }
    for (int k = 0; k < NT; k++) {
        g[3 * k] = g[3 * k + 1] = 0.0;
        g[3 * k + 2] = 0.5;
        for (int c = 0; c < 2; c++) {
            b1[2 * (c * NT + k)] = 0.01 * sin(0.3 * (k + 1)) / (k + 1);
            b1[2 * (c * NT + k) + 1] = 0.001 * c;
        }
    }
    memset(vop, 0, sizeof vop);
    vop[0] = vop[6] = 1.0; /* the identity: Q[0][0] = Q[1][1] = 1 */
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        return -1;
    hid_t gs = H5Gcreate2(f, "/spins", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t gp = H5Gcreate2(f, "/pulse", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t d3[2] = {NS, 3}, d1[1] = {NS}, g3[2] = {NT, 3};
    put_dset(f, "/spins/r", 2, d3, r);
    put_dset(f, "/spins/target", 2, d3, target);
    put_dset(f, "/spins/df", 1, d1, df);
    put_dset(f, "/spins/w", 1, d1, w);
    put_dset(f, "/spins/t1", 1, d1, t1);
    put_dset(f, "/spins/t2", 1, d1, t2);
    put_dset(f, "/pulse/g", 2, g3, g);
    if (channels == 1) {
        const hsize_t b[2] = {NT, 2};
        put_dset(f, "/pulse/b1", 2, b, b1);
        put_attr_d(f, "b1_max", 0.2);
    } else {
        const hsize_t m[3] = {NS, 2, 2}, b[3] = {2, NT, 2}, q[4] = {1, 2, 2, 2};
        put_dset(f, "/spins/b1map", 3, m, map);
        put_dset(f, "/pulse/b1", 3, b, b1);
        hid_t gq = H5Gcreate2(f, "/sar", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        put_dset(f, "/sar/vop", 4, q, vop);
        hid_t dv = H5Dopen2(f, "/sar/vop", H5P_DEFAULT);
        put_attr_d(dv, "sar_max", 10.0);
        put_attr_d(dv, "tr", 0.01);
        H5Dclose(dv);
        H5Gclose(gq);
        put_attr_s(f, "design_g", "x", vlen);
        put_attr_d(f, "smax", 15000.0);
        put_attr_d(f, "gmax", 4.0);
    }
    put_attr_d(f, "dt", 4e-6);
    put_attr_d(f, "gamma_bar", 4257.7);
    put_attr_d(f, "lambda", 0.0);
    put_attr_s(f, "loss", channels == 1 ? "full" : "xy", vlen);
    H5Gclose(gp);
    H5Gclose(gs);
    return H5Fclose(f) < 0 ? -1 : 0;
}

/* ---- mutations -------------------------------------------------------------- */

static const char *const datasets[] = {"/spins/r",  "/spins/target", "/spins/df",
                                       "/spins/w",  "/spins/t1",     "/spins/t2",
                                       "/pulse/g",  "/pulse/b1",     "/spins/b1map",
                                       "/sar/vop"};
#define NDATASETS (sizeof datasets / sizeof datasets[0])
static const char *const root_attrs[] = {"dt", "gamma_bar", "lambda", "b1_max", "loss",
                                         "design_g", "smax", "gmax"};
#define NROOT_ATTRS (sizeof root_attrs / sizeof root_attrs[0])

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

static int load(const char *path, bytes *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->p = malloc((size_t)n + 1);
    b->n = fread(b->p, 1, (size_t)n, f);
    fclose(f);
    return 0;
}

static int save(const char *path, const bytes *b)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(b->p, 1, b->n, f);
    return fclose(f);
}

/* Where "GCOL" (a global heap collection: the variable-length strings)
 * starts, or -1. */
static long find_gcol(const bytes *b)
{
    for (size_t i = 0; i + 4 <= b->n; i++)
        if (!memcmp(b->p + i, "GCOL", 4))
            return (long)i;
    return -1;
}

/* Replace dataset `name` of f by one of type t (file), rank and dims,
 * filled from doubles through mtype (NULL data: left unwritten). */
static void replace_dataset(hid_t f, const char *name, hid_t t, int rank, const hsize_t *dims,
                            hid_t mtype, const void *data)
{
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        H5Ldelete(f, name, H5P_DEFAULT);
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0 && data)
        H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
}

/* The dataset's doubles and dims (NULL when it is absent). */
static double *read_dataset(hid_t f, const char *name, int *rank, hsize_t *dims, size_t *n)
{
    if (H5Lexists(f, "/sar", H5P_DEFAULT) <= 0 && !strncmp(name, "/sar/", 5))
        return NULL;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return NULL;
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    *rank = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    double *v = malloc((*n ? *n : 1) * sizeof(double));
    H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Sclose(sp);
    H5Dclose(ds);
    return v;
}

static double garbage(void)
{
    static const double special[] = {0.0, -0.0, 1e308, -1e308, 1e-310, -1.0, 1e30, -1e30,
                                     4.9e-324, 2.0, 0.5, 1e9};
    switch (pick(3)) {
    case 0: return special[pick(sizeof special / sizeof special[0])];
    case 1: {
        uint64_t u = rng();
        double d;
        memcpy(&d, &u, sizeof d);
        return isfinite(d) ? d : 1e300;
    }
    default: return (unit() - 0.5) * pow(10.0, (double)pick(40) - 20.0);
    }
}

static double nonfinite(void)
{
    static const double v[] = {NAN, INFINITY, -INFINITY, -NAN};
    return v[pick(4)];
}

/* Set attribute `name` of loc to value v of type t, rank (0/1) and n. */
static void replace_attr(hid_t loc, const char *name, hid_t t, int rank, hsize_t n,
                         hid_t mtype, const void *v)
{
    if (H5Aexists(loc, name) > 0)
        H5Adelete(loc, name);
    hid_t sp = rank ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, mtype, v);
        H5Aclose(a);
    }
    H5Sclose(sp);
}

/* The attacks: byte-level ones on the file's bytes, structural ones through
 * the HDF5 API. */
enum {
    A_BITFLIP,
    A_BYTES,
    A_TRUNCATE,
    A_HEAP,
    A_STRINGS,
    A_SHAPE,
    A_DTYPE,
    A_GARBAGE,
    A_NONFINITE,
    A_NAMES,
    A_ATTRS,
    A_COUNT
};
static const char *const attack_names[A_COUNT] = {
    "bitflip", "bytes", "truncate", "heap", "strings", "shape",
    "dtype", "garbage", "nonfinite", "names", "attrs"};

static void attack_bytes(int attack, const char *path)
{
    bytes b;
    if (load(path, &b))
        return;
    if (attack == A_BITFLIP) {
        for (size_t i = 0, n = 1 + pick(8); i < n; i++)
            b.p[pick(b.n)] ^= (unsigned char)(1u << pick(8));
    } else if (attack == A_BYTES) {
        size_t at = pick(b.n), n = 1 + pick(16);
        for (size_t i = 0; i < n && at + i < b.n; i++)
            b.p[at + i] = (unsigned char)rng();
    } else if (attack == A_TRUNCATE) {
        b.n = pick(b.n);
    } else { /* A_HEAP: the global heap collection of the strings */
        long g = find_gcol(&b);
        if (g >= 0) {
            size_t span = b.n - (size_t)g < 96 ? b.n - (size_t)g : 96;
            if (pick(4) == 0) {
                b.p[g + 27 < (long)b.n ? g + 27 : g] = 0x7f; /* the case */
            } else {
                for (size_t i = 0, n = 1 + pick(4); i < n; i++)
                    b.p[(size_t)g + pick(span)] = (unsigned char)rng();
            }
        }
    }
    save(path, &b);
    free(b.p);
}

static void attack_structure(int attack, const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return;
    const char *ds = datasets[pick(NDATASETS)];
    int rank = 0;
    hsize_t dims[8] = {0};
    size_t n = 0;
    double *v = read_dataset(f, ds, &rank, dims, &n);
    switch (attack) {
    case A_STRINGS: {
        const char *name = pick(2) ? "loss" : "design_g";
        static const char *const texts[] = {"",     "full\xff", "xyz\x01", "FULL", "mls ",
                                            "zz",   "x",        "yx",      "l2",   "\xc3"};
        const char *s = texts[pick(sizeof texts / sizeof texts[0])];
        hid_t t = H5Tcopy(H5T_C_S1);
        int how = (int)pick(4);
        if (how == 0) { /* variable-length */
            H5Tset_size(t, H5T_VARIABLE);
            replace_attr(f, name, t, 0, 1, t, &s);
        } else if (how == 1) { /* fixed, padded with spaces or nulls, short or long */
            size_t sz = 1 + pick(300);
            char *buf = calloc(sz + 1, 1);
            memset(buf, pick(2) ? ' ' : 'a', sz);
            memcpy(buf, s, strlen(s) < sz ? strlen(s) : sz);
            H5Tset_size(t, sz);
            H5Tset_strpad(t, pick(2) ? H5T_STR_SPACEPAD : H5T_STR_NULLPAD);
            replace_attr(f, name, t, 0, 1, t, buf);
            free(buf);
        } else if (how == 2) { /* an array of strings */
            const char *two[2] = {s, "full"};
            H5Tset_size(t, H5T_VARIABLE);
            replace_attr(f, name, t, 1, 2, t, two);
        } else { /* a number where a string belongs */
            double d = garbage();
            replace_attr(f, name, H5T_IEEE_F64LE, 0, 1, H5T_NATIVE_DOUBLE, &d);
        }
        H5Tclose(t);
        break;
    }
    case A_SHAPE:
        if (v) {
            int r = (int)pick(5);
            hsize_t d[4];
            size_t total = 1;
            for (int i = 0; i < r; i++) {
                d[i] = pick(3) == 0 ? pick(3) : i < rank && pick(2) ? dims[rank - 1 - i]
                                                                     : 1 + pick(40);
                total *= d[i];
            }
            double *buf = calloc(total ? total : 1, sizeof(double));
            for (size_t i = 0; i < total; i++)
                buf[i] = i < n ? v[i] : 0.5;
            replace_dataset(f, ds, H5T_IEEE_F64LE, r, d, H5T_NATIVE_DOUBLE, buf);
            free(buf);
        }
        break;
    case A_DTYPE:
        if (v) {
            hid_t types[] = {H5T_STD_I8LE,   H5T_STD_U8LE,  H5T_STD_I32BE, H5T_STD_I64LE,
                             H5T_STD_U64LE,  H5T_IEEE_F32BE, H5T_IEEE_F64BE, H5T_STD_B32LE,
                             H5T_C_S1,       H5T_STD_I16LE};
            size_t k = pick(sizeof types / sizeof types[0]);
            hid_t t = H5Tcopy(types[k]);
            if (types[k] == H5T_C_S1) {
                H5Tset_size(t, 8);
                char *buf = calloc(n ? n : 1, 8);
                replace_dataset(f, ds, t, rank, dims, t, buf);
                free(buf);
            } else if (types[k] == H5T_STD_B32LE) {
                unsigned *buf = calloc(n ? n : 1, sizeof *buf);
                replace_dataset(f, ds, t, rank, dims, H5T_NATIVE_UINT, buf);
                free(buf);
            } else {
                for (size_t i = 0; i < n; i++)
                    if (pick(4) == 0)
                        v[i] = garbage();
                H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
                replace_dataset(f, ds, t, rank, dims, H5T_NATIVE_DOUBLE, v);
            }
            H5Tclose(t);
        }
        break;
    case A_GARBAGE:
    case A_NONFINITE:
        if (v && n) {
            for (size_t i = 0, m = 1 + pick(3); i < m; i++)
                v[pick(n)] = attack == A_GARBAGE ? garbage() : nonfinite();
            replace_dataset(f, ds, H5T_IEEE_F64LE, rank, dims, H5T_NATIVE_DOUBLE, v);
        }
        if (attack == A_NONFINITE && pick(2)) {
            double d = nonfinite();
            const char *a = root_attrs[pick(4)];
            if (pick(3) == 0 && H5Lexists(f, "/sar", H5P_DEFAULT) > 0) {
                hid_t dv = H5Dopen2(f, "/sar/vop", H5P_DEFAULT);
                if (dv >= 0) {
                    replace_attr(dv, pick(2) ? "sar_max" : "tr", H5T_IEEE_F64LE, 0, 1,
                                 H5T_NATIVE_DOUBLE, &d);
                    H5Dclose(dv);
                }
            } else {
                replace_attr(f, a, H5T_IEEE_F64LE, 0, 1, H5T_NATIVE_DOUBLE, &d);
            }
        }
        break;
    case A_NAMES: {
        /* a misspelled, upper-cased or removed dataset or attribute */
        static const char *const bad_ds[] = {"/spins/T1", "/spins/targt", "/pulse/B1",
                                             "/spins/dF", "/pulse/gg"};
        static const char *const bad_at[] = {"b1max", "Loss", "DT", "gamma", "lamda", "smax_"};
        int how = (int)pick(3);
        if (how == 0 && v) {
            const char *to = bad_ds[pick(sizeof bad_ds / sizeof bad_ds[0])];
            if (H5Lexists(f, to, H5P_DEFAULT) <= 0)
                H5Lmove(f, ds, f, to, H5P_DEFAULT, H5P_DEFAULT);
        } else if (how == 1) {
            const char *from = root_attrs[pick(NROOT_ATTRS)];
            const char *to = bad_at[pick(sizeof bad_at / sizeof bad_at[0])];
            if (H5Aexists(f, from) > 0 && H5Aexists(f, to) <= 0)
                H5Arename(f, from, to);
        } else if (v) {
            H5Ldelete(f, ds, H5P_DEFAULT);
        }
        break;
    }
    case A_ATTRS: {
        const char *a = root_attrs[pick(NROOT_ATTRS)];
        double vals[4];
        for (int i = 0; i < 4; i++)
            vals[i] = pick(3) ? garbage() : (double)pick(3);
        int rank1 = (int)pick(2);
        hsize_t cnt = rank1 ? 1 + pick(4) : 1;
        const hid_t types[] = {H5T_IEEE_F64LE, H5T_STD_I32LE, H5T_IEEE_F32LE,
                                      H5T_STD_U8LE, H5T_STD_I64BE};
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        replace_attr(f, a, types[pick(sizeof types / sizeof types[0])], rank1, cnt,
                     H5T_NATIVE_DOUBLE, vals);
        break;
    }
    }
    free(v);
    H5Fclose(f);
}

/* Write the file of (attack, seed) to path. */
static int generate(int attack, uint64_t seed, const char *path)
{
    rng_state = seed * 1000003u + (uint64_t)attack * 0x51ed270b27d5e0b1ull;
    const int channels = 1 + (int)pick(2);
    const int vlen = attack == A_HEAP ? 1 : (int)pick(2);
    if (write_base(path, channels, vlen))
        return -1;
    if (attack <= A_HEAP)
        attack_bytes(attack, path);
    else
        attack_structure(attack, path);
    return 0;
}

/* ---- running persolve --------------------------------------------------- */

enum { R_SUCCESS, R_CLEAN, R_CONTAINED, R_CRASH, R_HANG, R_UNCLEAN, R_COUNT };
static const char *const outcome_names[R_COUNT] = {"success", "clean error", "contained",
                                                   "crash",   "hang",        "unclean"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every line of the message is "persolve: ..." and none is HDF5's own. */
static int clean_message(const char *err)
{
    if (!err[0] || strstr(err, "HDF5-DIAG") || strstr(err, "#000:"))
        return 0;
    for (const char *p = err; *p;) {
        if (strncmp(p, "persolve: ", 10) != 0)
            return 0;
        const char *nl = strchr(p, '\n');
        if (!nl)
            return 0;
        p = nl + 1;
    }
    return 1;
}

static int run_eval(const char *exe, const char *file, const char *out, const char *errpath,
                    char *err, size_t errlen)
{
    const char *argv[] = {exe, "eval", file, "-o", out, "--backend", "cpu", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int e = posix_spawn(&pid, exe, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        fprintf(stderr, "posix_spawn %s: %s\n", exe, strerror(e));
        exit(1);
    }
    const double t0 = now();
    int ws = 0, hung = 0;
    for (;;) {
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid)
            break;
        if (now() - t0 > LIMIT_S) {
            hung = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &ws, 0);
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    err[0] = '\0';
    FILE *f = fopen(errpath, "r");
    if (f) {
        size_t n = fread(err, 1, errlen - 1, f);
        err[n] = '\0';
        fclose(f);
    }
    if (hung)
        return R_HANG;
    if (WIFSIGNALED(ws))
        return R_CRASH;
    int code = WEXITSTATUS(ws);
    if (code == 0)
        return R_SUCCESS;
    if (code >= 2 && code <= 5 && clean_message(err))
        return R_CLEAN;
    /* under a sanitizer: its report of a fault in libhdf5 inside the
     * process that reads the file, then persolve's one clean line */
    const char *last = err + strlen(err);
    while (last > err && last[-1] == '\n')
        last--;
    while (last > err && last[-1] != '\n')
        last--;
    if (code == 3 && strstr(err, "iso_child_") && clean_message(last) &&
        strstr(last, "corrupt file"))
        return R_CONTAINED;
    return R_UNCLEAN;
}

static int attack_index(const char *name)
{
    for (int i = 0; i < A_COUNT; i++)
        if (!strcmp(name, attack_names[i]))
            return i;
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--write")) {
        int a = attack_index(argv[2]);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        if (a < 0 || generate(a, strtoull(argv[3], NULL, 10), argv[4])) {
            fprintf(stderr, "fuzz_eval --write: cannot write %s %s to %s\n", argv[2], argv[3],
                    argv[4]);
            return 2;
        }
        return 0;
    }
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: fuzz_eval PERSOLVE SEEDS WORKDIR | PERSOLVE --long N WORKDIR\n");
        return 2;
    }
    const char *exe = argv[1];
    const int long_run = !strcmp(argv[2], "--long");
    const char *dir = argv[long_run ? 4 : 3];
    long per_attack = long_run ? strtol(argv[3], NULL, 10) : 0;
    if (!exe || !dir)
        return 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    mkdir(dir, 0755);
    char file[4096], out[4096], errpath[4096];
    snprintf(file, sizeof file, "%s/fuzz.h5", dir);
    snprintf(out, sizeof out, "%s/fuzz_eval.h5", dir);
    snprintf(errpath, sizeof errpath, "%s/fuzz_stderr.txt", dir);

    /* the list of (attack, seed) pairs */
    size_t cap = 1024, count = 0;
    int *att = malloc(cap * sizeof *att);
    uint64_t *seeds = malloc(cap * sizeof *seeds);
    if (long_run) {
        for (int a = 0; a < A_COUNT; a++)
            for (long s = 0; s < per_attack; s++) {
                if (count == cap) {
                    cap *= 2;
                    att = realloc(att, cap * sizeof *att);
                    seeds = realloc(seeds, cap * sizeof *seeds);
                }
                att[count] = a;
                seeds[count++] = (uint64_t)(1000000 + s);
            }
    } else {
        FILE *f = fopen(argv[2], "r");
        if (!f) {
            fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
            return 2;
        }
        char line[256], name[64];
        unsigned long long first, last;
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '#' || sscanf(line, "%63s %llu %llu", name, &first, &last) != 3)
                continue;
            int a = attack_index(name);
            if (a < 0) {
                fprintf(stderr, "%s: unknown attack '%s'\n", argv[2], name);
                return 2;
            }
            for (unsigned long long s = first; s <= last; s++) {
                if (count == cap) {
                    cap *= 2;
                    att = realloc(att, cap * sizeof *att);
                    seeds = realloc(seeds, cap * sizeof *seeds);
                }
                att[count] = a;
                seeds[count++] = s;
            }
        }
        fclose(f);
    }

    long counts[A_COUNT][R_COUNT] = {{0}};
    /* among the clean errors: files on which the reading process crashed
     * or looped (libhdf5's faults, contained) */
    long child_crash[A_COUNT] = {0}, child_loop[A_COUNT] = {0};
    long failures = 0;
    char err[8192];
    const double t0 = now();
    for (size_t i = 0; i < count; i++) {
        if (generate(att[i], seeds[i], file)) {
            fprintf(stderr, "cannot write %s\n", file);
            return 2;
        }
        int r = run_eval(exe, file, out, errpath, err, sizeof err);
        counts[att[i]][r]++;
        if (r == R_CLEAN) {
            child_crash[att[i]] += strstr(err, "crashed the HDF5 library") != NULL;
            child_loop[att[i]] += strstr(err, "did not finish within") != NULL;
        }
        if (r >= R_CRASH) {
            failures++;
            printf("FAIL %s seed %llu: %s\n%s", attack_names[att[i]],
                   (unsigned long long)seeds[i], outcome_names[r], err);
            /* keep the file that failed */
            char keep[4200];
            snprintf(keep, sizeof keep, "%s/fail_%s_%llu.h5", dir, attack_names[att[i]],
                     (unsigned long long)seeds[i]);
            rename(file, keep);
        }
    }
    printf("%-10s %7s %12s %8s %10s %6s %5s %8s  (clean errors: reader crashed, looped)\n",
           "attack", "tried", "clean error", "success", "contained", "crash", "hang", "unclean");
    long tot[R_COUNT] = {0}, tried = 0;
    for (int a = 0; a < A_COUNT; a++) {
        long t = 0;
        for (int r = 0; r < R_COUNT; r++) {
            t += counts[a][r];
            tot[r] += counts[a][r];
        }
        tried += t;
        if (t)
            printf("%-10s %7ld %12ld %8ld %10ld %6ld %5ld %8ld  (%ld, %ld)\n", attack_names[a], t,
                   counts[a][R_CLEAN], counts[a][R_SUCCESS], counts[a][R_CONTAINED],
                   counts[a][R_CRASH], counts[a][R_HANG], counts[a][R_UNCLEAN], child_crash[a],
                   child_loop[a]);
    }
    printf("%-10s %7ld %12ld %8ld %10ld %6ld %5ld %8ld\n", "all", tried, tot[R_CLEAN],
           tot[R_SUCCESS], tot[R_CONTAINED], tot[R_CRASH], tot[R_HANG], tot[R_UNCLEAN]);
    printf("%.1f s\n", now() - t0);
    free(att);
    free(seeds);
    return failures ? 1 : 0;
}
