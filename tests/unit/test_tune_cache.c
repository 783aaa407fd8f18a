/*
 * The tune cache without a GPU: the size-class rule, the cache directory,
 * file names, a write/read round trip, and every way a file is refused:
 * another GPU, driver, build or size class (stale), truncation at every
 * length, a flipped byte, a foreign or future file (corrupt or stale),
 * each with the reason in the log. Batch entries (a team size): their
 * class, file name and round trip, apart from the solo entry of their
 * size class. Also the tuning entries without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "persolve.h"
#include "common/hash.h"
#include "persolve_gpu.h"
#include "tune/cache.h"
#include "tune/tune.h"

#define DIR "tune_cache_test"

static char last_log[1024];
static int last_level = -1, log_calls = 0;

static void capture_log(void *user, int level, const char *file, int line, const char *msg)
{
    (void)user;
    (void)file;
    (void)line;
    snprintf(last_log, sizeof last_log, "%s", msg);
    last_level = level;
    log_calls++;
}

static ps_options logging_options(void)
{
    ps_options o;
    ps_options_default(&o);
    o.log = capture_log;
    last_log[0] = '\0';
    last_level = -1;
    log_calls = 0;
    return o;
}

static void assert_log(int level, const char *needle)
{
    if (last_level != level || !strstr(last_log, needle)) {
        printf("log level %d \"%s\": expected level %d with \"%s\"\n", last_level, last_log, level,
               needle);
        fail();
    }
}

static ps_tune_key test_key(void)
{
    ps_tune_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.gpu, sizeof k.gpu, "NVIDIA H200");
    k.cc_major = 9;
    k.cc_minor = 0;
    k.driver = 13000;
    snprintf(k.driver_module, sizeof k.driver_module, "580.159.04");
    snprintf(k.build, sizeof k.build, "%s", ps_tune_build_id());
    ps_tune_size_class(16384, 5000, PS_PRECISION_SINGLE, 0, 0, &k.cls);
    return k;
}

static ps_tune_entry test_entry(void)
{
    ps_tune_entry e;
    memset(&e, 0, sizeof e);
    e.block = 256;
    e.sb = 8;
    e.regcap = 1;
    e.blocks_per_sm = 4;
    e.seconds_per_iteration = 9.48e-4;
    e.ns = 16384;
    e.nt = 5000;
    snprintf(e.date, sizeof e.date, "2026-12-01T10:00:00Z");
    return e;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void slurp(const char *path, char *buf, long len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
}

/* The whole of a small text file, NUL-terminated, into buf[cap]. */
static void slurp_text(const char *path, char *buf, long cap)
{
    long n = file_size(path);
    assert_true(n > 0 && n < cap);
    slurp(path, buf, n);
    buf[n] = '\0';
}

static void spit(const char *path, const char *buf, long len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
}

/* ---- the size class ---------------------------------------------------- */

static void test_size_class(void **state)
{
    (void)state;
    /* round(log2 v): v within a factor sqrt(2) of 2^k is class k */
    static const struct {
        size_t v;
        int k;
    } cases[] = {{1, 0},      {2, 1},      {3, 2},     {5, 2},     {6, 3},     {375, 9},
                 {1000, 10},  {1024, 10},  {1448, 10}, {1449, 11}, {2010, 11}, {5000, 12},
                 {16384, 14}, {23170, 14}, {23171, 15}, {65536, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("round(log2 %zu) = %d\n", cases[i].v, ps_tune_round_log2(cases[i].v));
        assert_int_equal(ps_tune_round_log2(cases[i].v), cases[i].k);
    }
    ps_tune_class s, m, s2, sd, sr;
    ps_tune_size_class(1024, 1000, PS_PRECISION_SINGLE, 0, 0, &s);   /* S */
    ps_tune_size_class(16384, 5000, PS_PRECISION_SINGLE, 0, 0, &m);  /* M */
    ps_tune_size_class(1200, 900, PS_PRECISION_SINGLE, 0, 0, &s2);   /* near S */
    ps_tune_size_class(1024, 1000, PS_PRECISION_DOUBLE, 0, 0, &sd);  /* S in float64 */
    ps_tune_size_class(1024, 1000, PS_PRECISION_SINGLE, 7, 0, &sr);  /* S with relaxation */
    assert_int_equal(s.ns_log2, 10);
    assert_int_equal(s.nt_log2, 10);
    assert_int_equal(m.ns_log2, 14);
    assert_int_equal(m.nt_log2, 12);
    assert_int_equal(sr.relax, 1);
    assert_memory_equal(&s, &s2, sizeof s);
    assert_memory_not_equal(&s, &m, sizeof s);
    assert_memory_not_equal(&s, &sd, sizeof s);
    assert_memory_not_equal(&s, &sr, sizeof s);
    /* the channels kernel's problems are a class of their own per channel count */
    ps_tune_class p1, p8, p4;
    ps_tune_size_class(1780, 1000, PS_PRECISION_SINGLE, 0, 0, &p1);
    ps_tune_size_class(1780, 1000, PS_PRECISION_SINGLE, 0, 8, &p8);
    ps_tune_size_class(1780, 1000, PS_PRECISION_SINGLE, 0, 4, &p4);
    assert_int_equal(p8.channels, 8);
    assert_memory_not_equal(&p1, &p8, sizeof p1);
    assert_memory_not_equal(&p4, &p8, sizeof p4);
}

/* An entry of the channels kernel: its own file name and class line, read
 * back for its class and refused for the single-channel class. */
static void test_channels_entry(void **state)
{
    (void)state;
    ps_tune_key k = test_key(), k1 = test_key();
    ps_tune_size_class(1780, 1000, PS_PRECISION_SINGLE, 0, 8, &k.cls);
    ps_tune_size_class(1780, 1000, PS_PRECISION_SINGLE, 0, 0, &k1.cls);
    char path[4096], path1[4096];
    assert_int_equal(ps_tune_cache_path(&k, path, sizeof path), 0);
    assert_int_equal(ps_tune_cache_path(&k1, path1, sizeof path1), 0);
    assert_non_null(strstr(path, "-ch8.txt"));
    assert_null(strstr(path1, "-ch"));
    ps_tune_entry e = test_entry(), got;
    snprintf(path, sizeof path, "tune_channels_entry.txt"); /* in the test's directory */
    unlink(path);
    assert_int_equal(ps_tune_cache_write(path, &k, &e, NULL), 0);
    char text[4096];
    slurp_text(path, text, (long)sizeof text);
    assert_non_null(strstr(text, "class single ns 11 nt 10 relax 0 channels 8\n"));
    assert_int_equal(ps_tune_cache_read(path, &k, &got, NULL), PS_TUNE_CACHE_OK);
    assert_int_equal(got.block, e.block);
    assert_int_not_equal(ps_tune_cache_read(path, &k1, &got, NULL), PS_TUNE_CACHE_OK);
    unlink(path);
}

/* ---- batch entries ------------------------------------------------------- */

static ps_tune_key batch_key(int copies)
{
    ps_tune_key k = test_key();
    k.cls.batch = ps_tune_batch_class((size_t)copies);
    return k;
}

/* A batch entry: the batch size class, its own file name and class line, a
 * team size on the shape line; read back for its key only. */
static void test_batch_entry(void **state)
{
    (void)state;
    /* 1 + round(log2 copies): counts within a factor sqrt(2) share a class */
    assert_int_equal(ps_tune_batch_class(1), 1);
    assert_int_equal(ps_tune_batch_class(4), 3);
    assert_int_equal(ps_tune_batch_class(5), 3);
    assert_int_equal(ps_tune_batch_class(6), 4);
    assert_int_equal(ps_tune_batch_class(120), 8);
    assert_int_equal(ps_tune_batch_class(16384), 15);

    setenv("PERSOLVE_CACHE_DIR", "/c", 1);
    ps_tune_key k = batch_key(4), solo = test_key();
    char path[4096], text[4096];
    assert_int_equal(ps_tune_cache_path(&k, path, sizeof path), 0);
    assert_string_equal(path, "/c/tune-nvidia-h200-sm90-single-ns14-nt12-batch2.txt");
    ps_tune_key kc = k;
    kc.cls.channels = 8;
    kc.cls.relax = 1;
    assert_int_equal(ps_tune_cache_path(&kc, path, sizeof path), 0);
    assert_string_equal(path, "/c/tune-nvidia-h200-sm90-single-ns14-nt12-relax-ch8-batch2.txt");
    unsetenv("PERSOLVE_CACHE_DIR");
    ps_tune_key_text(&k, text, sizeof text);
    assert_non_null(strstr(text, "batches of ~2^2 problems"));
    ps_tune_key_text(&solo, text, sizeof text);
    assert_null(strstr(text, "batch"));

    /* round trip, for the key with and without channels */
    const char *bpath = DIR "/batch.txt";
    ps_options o = logging_options();
    ps_tune_entry e = test_entry(), got;
    e.block = 512;
    e.blocks_per_sm = 1;
    e.regcap = 0;
    e.team_blocks = 33;
    for (int with_ch = 0; with_ch < 2; with_ch++) {
        const ps_tune_key *kk = with_ch ? &kc : &k;
        assert_int_equal(ps_tune_cache_write(bpath, kk, &e, &o), 0);
        slurp_text(bpath, text, (long)sizeof text);
        assert_non_null(strstr(text, with_ch ? "class single ns 14 nt 12 relax 1 channels 8 batch 3\n"
                                             : "class single ns 14 nt 12 relax 0 batch 3\n"));
        assert_non_null(strstr(text, "shape block 512 sb 8 regcap 0 blocks_per_sm 1 team_blocks 33\n"));
        memset(&got, 0x5a, sizeof got);
        assert_int_equal(ps_tune_cache_read(bpath, kk, &got, &o), PS_TUNE_CACHE_OK);
        assert_int_equal(got.team_blocks, 33);
        assert_int_equal(got.block, 512);
        assert_int_equal(got.blocks_per_sm, 1);
        assert_string_equal(got.date, e.date);
    }

    /* another batch size class, or the solo key: stale */
    ps_tune_key k16 = batch_key(16), k5 = batch_key(5);
    assert_int_equal(ps_tune_cache_write(bpath, &k, &e, &o), 0);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(bpath, &k16, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "size class");
    assert_log(PS_LOG_WARNING, "batches of ~2^2 problems");
    assert_int_equal(ps_tune_cache_read(bpath, &k5, &got, &o), PS_TUNE_CACHE_OK);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(bpath, &solo, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "size class");

    /* a team size out of range: corrupt */
    static const int bad[] = {0, -1, 65537};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.team_blocks = bad[i];
        assert_int_equal(ps_tune_cache_write(bpath, &k, &e, &o), 0);
        o = logging_options();
        assert_int_equal(ps_tune_cache_read(bpath, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
        assert_log(PS_LOG_WARNING, "team size out of range");
    }
    e.team_blocks = 65536;
    assert_int_equal(ps_tune_cache_write(bpath, &k, &e, &o), 0);
    assert_int_equal(ps_tune_cache_read(bpath, &k, &got, &o), PS_TUNE_CACHE_OK);

    /* a batch entry without its team size, and a solo entry with one (both
     * with a valid checksum, written here by hand): corrupt */
    const char *const cases[][2] = {
        {"class single ns 14 nt 12 relax 0 batch 3", "shape block 512 sb 8 regcap 0 blocks_per_sm 1"},
        {"class single ns 14 nt 12 relax 0", "shape block 512 sb 8 regcap 0 blocks_per_sm 1 team_blocks 4"},
    };
    for (int c = 0; c < 2; c++) {
        char body[2048];
        int len = snprintf(body, sizeof body,
                           "persolve tune cache 1\ngpu NVIDIA H200\ncc 9.0\ndriver 13000 580.159.04\nbuild %s\n"
                           "%s\n%s\nmeasured 1.000000e-03 s/iteration ns 16384 nt 5000 date 2026-12-01T10:00:00Z\n",
                           ps_tune_build_id(), cases[c][0], cases[c][1]);
        assert_true(len > 0 && len < (int)sizeof body - 32);
        len += snprintf(body + len, sizeof body - (size_t)len, "checksum %016llx\n",
                        (unsigned long long)ps_fnv1a(PS_FNV_OFFSET, body, (size_t)len));
        spit(bpath, body, len);
        o = logging_options();
        assert_int_equal(ps_tune_cache_read(bpath, c ? &solo : &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
        assert_log(PS_LOG_WARNING, c ? "a solo entry with a team size" : "team size out of range");
    }
    unlink(bpath);
}

/* A solo entry and the batch entry of its class live side by side: each
 * reader finds its own file, and neither is disturbed by the other. */
static void test_batch_beside_solo(void **state)
{
    (void)state;
    setenv("PERSOLVE_CACHE_DIR", DIR "/side", 1);
    ps_tune_key solo = test_key(), k = batch_key(64);
    char spath[4096], bpath[4096];
    assert_int_equal(ps_tune_cache_path(&solo, spath, sizeof spath), 0);
    assert_int_equal(ps_tune_cache_path(&k, bpath, sizeof bpath), 0);
    assert_string_not_equal(spath, bpath);
    unlink(spath); /* left by an earlier run */
    ps_options o = logging_options();
    ps_tune_entry se = test_entry(), be = test_entry(), got;
    be.team_blocks = 2;
    assert_int_equal(ps_tune_cache_write(bpath, &k, &be, &o), 0);
    /* the solo reader does not see the batch file */
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(spath, &solo, &got, &o), PS_TUNE_CACHE_MISSING);
    assert_log(PS_LOG_INFO, "the heuristic chooses the launch shape");
    assert_int_equal(ps_tune_cache_write(spath, &solo, &se, &o), 0);
    assert_int_equal(ps_tune_cache_read(spath, &solo, &got, &o), PS_TUNE_CACHE_OK);
    assert_int_equal(got.team_blocks, 0);
    assert_int_equal(got.block, se.block);
    assert_int_equal(ps_tune_cache_read(bpath, &k, &got, &o), PS_TUNE_CACHE_OK);
    assert_int_equal(got.team_blocks, 2);
    /* the solo file holds no batch field: old readers read it as before */
    char text[4096];
    slurp_text(spath, text, (long)sizeof text);
    assert_null(strstr(text, "batch"));
    assert_null(strstr(text, "team_blocks"));
    /* a missing batch entry says what the heuristic chooses */
    ps_tune_key k2 = batch_key(2);
    assert_int_equal(ps_tune_cache_path(&k2, bpath, sizeof bpath), 0);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(bpath, &k2, &got, &o), PS_TUNE_CACHE_MISSING);
    assert_log(PS_LOG_INFO, "the heuristic chooses the team size");
    unlink(spath);
    unsetenv("PERSOLVE_CACHE_DIR");
}

/* ---- directory and file names ------------------------------------------ */

static void test_cache_dir_and_path(void **state)
{
    (void)state;
    char buf[4096], home[1024];
    const char *h = getenv("HOME");
    snprintf(home, sizeof home, "%s", h ? h : "");

    setenv("PERSOLVE_CACHE_DIR", "/tmp/ps-override", 1);
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    assert_int_equal(ps_tune_cache_dir(buf, sizeof buf), 0);
    assert_string_equal(buf, "/tmp/ps-override");
    unsetenv("PERSOLVE_CACHE_DIR");
    assert_int_equal(ps_tune_cache_dir(buf, sizeof buf), 0);
    assert_string_equal(buf, "/tmp/xdg/persolve");
    setenv("XDG_CACHE_HOME", "relative/dir", 1); /* not absolute: ignored (XDG spec) */
    setenv("HOME", "/home/someone", 1);
    assert_int_equal(ps_tune_cache_dir(buf, sizeof buf), 0);
    assert_string_equal(buf, "/home/someone/.cache/persolve");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_int_equal(ps_tune_cache_dir(buf, sizeof buf), PS_ERR_FILE);
    setenv("HOME", "/home/someone", 1);
    assert_int_equal(ps_tune_cache_dir(buf, 4), PS_ERR_FILE); /* too long for the buffer */
    if (h)
        setenv("HOME", home, 1);
    else
        unsetenv("HOME");

    setenv("PERSOLVE_CACHE_DIR", "/c", 1);
    ps_tune_key k = test_key();
    assert_int_equal(ps_tune_cache_path(&k, buf, sizeof buf), 0);
    assert_string_equal(buf, "/c/tune-nvidia-h200-sm90-single-ns14-nt12.txt");
    snprintf(k.gpu, sizeof k.gpu, "  NVIDIA GeForce RTX 4090 (x) ");
    k.cc_major = 8;
    k.cc_minor = 9;
    ps_tune_size_class(2010, 375, PS_PRECISION_DOUBLE, 1, 0, &k.cls);
    assert_int_equal(ps_tune_cache_path(&k, buf, sizeof buf), 0);
    assert_string_equal(buf, "/c/tune-nvidia-geforce-rtx-4090-x-sm89-double-ns11-nt9-relax.txt");
    assert_int_equal(ps_tune_cache_path(&k, buf, 10), PS_ERR_FILE);
    unsetenv("PERSOLVE_CACHE_DIR");

    /* the build id: the version and 16 hex digits */
    const char *id = ps_tune_build_id();
    printf("build id %s\n", id);
    assert_int_equal(strncmp(id, ps_version(), strlen(ps_version())), 0);
    const char *plus = strchr(id, '+');
    assert_non_null(plus);
    assert_int_equal(strlen(plus + 1), 16);
    assert_int_equal(strspn(plus + 1, "0123456789abcdef"), 16);
}

/* ---- round trip and refusals ------------------------------------------- */

static void test_round_trip(void **state)
{
    (void)state;
    const char *path = DIR "/sub/dir/entry.txt"; /* directories are created */
    ps_options o = logging_options();
    ps_tune_key k = test_key();
    ps_tune_entry e = test_entry(), got;
    unlink(path);
    assert_int_equal(ps_tune_cache_write(path, &k, &e, &o), 0);
    assert_true(file_size(path) > 0);
    memset(&got, 0x5a, sizeof got);
    assert_int_equal(ps_tune_cache_read(path, &k, &got, &o), PS_TUNE_CACHE_OK);
    assert_int_equal(got.block, e.block);
    assert_int_equal(got.sb, e.sb);
    assert_int_equal(got.regcap, e.regcap);
    assert_int_equal(got.blocks_per_sm, e.blocks_per_sm);
    assert_true(fabs(got.seconds_per_iteration - e.seconds_per_iteration) <= 1e-6 * e.seconds_per_iteration);
    assert_true(got.ns == e.ns && got.nt == e.nt);
    assert_string_equal(got.date, e.date);

    /* replaced in place; no temporary file left behind */
    e.block = 512;
    e.blocks_per_sm = 2;
    assert_int_equal(ps_tune_cache_write(path, &k, &e, &o), 0);
    assert_int_equal(ps_tune_cache_read(path, &k, &got, &o), PS_TUNE_CACHE_OK);
    assert_int_equal(got.block, 512);
    glob_t left;
    assert_int_equal(glob(DIR "/sub/dir/entry.txt.tmp*", 0, NULL, &left), GLOB_NOMATCH);
    globfree(&left);

    /* a missing file: info, not a warning */
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(DIR "/none.txt", &k, &got, &o), PS_TUNE_CACHE_MISSING);
    assert_log(PS_LOG_INFO, "no tune cache entry");
}

/* Key mismatch: stale, ignored, the field named in the warning. */
static void test_stale(void **state)
{
    (void)state;
    const char *path = DIR "/stale.txt";
    ps_options o = logging_options();
    ps_tune_key k = test_key(), other;
    ps_tune_entry e = test_entry(), got;
    assert_int_equal(ps_tune_cache_write(path, &k, &e, &o), 0);

    other = k;
    snprintf(other.build, sizeof other.build, "0.0.9+0123456789abcdef");
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "stale");
    assert_log(PS_LOG_WARNING, "build");
    assert_log(PS_LOG_WARNING, path);

    other = k;
    other.driver = 12080;
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "driver 13000");
    other = k;
    snprintf(other.driver_module, sizeof other.driver_module, "580.160.01");
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "580.159.04");

    other = k;
    snprintf(other.gpu, sizeof other.gpu, "NVIDIA H100 80GB HBM3");
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "NVIDIA H100");
    other = k;
    other.cc_minor = 1;
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "sm_91");

    other = k;
    ps_tune_size_class(1024, 1000, PS_PRECISION_SINGLE, 0, 0, &other.cls);
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "size class");
    other = k;
    other.cls.precision = PS_PRECISION_DOUBLE;
    assert_int_equal(ps_tune_cache_read(path, &other, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "double");

    /* the same key still reads */
    assert_int_equal(ps_tune_cache_read(path, &k, &got, &o), PS_TUNE_CACHE_OK);
}

/* Truncated at every length, a flipped byte, other damage: corrupt. */
static void test_corrupt(void **state)
{
    (void)state;
    const char *good = DIR "/good.txt", *bad = DIR "/bad.txt";
    ps_options o = logging_options();
    ps_tune_key k = test_key();
    ps_tune_entry e = test_entry(), got;
    char text[4096], copy[8192];
    assert_int_equal(ps_tune_cache_write(good, &k, &e, &o), 0);
    long len = file_size(good);
    assert_true(len > 100 && len < (long)sizeof text);
    slurp(good, text, len);

    for (long cut = 0; cut < len; cut++) {
        spit(bad, text, cut);
        o = logging_options();
        int st = ps_tune_cache_read(bad, &k, &got, &o);
        if (st != PS_TUNE_CACHE_CORRUPT) {
            printf("truncated to %ld of %ld bytes: result %d\n", cut, len, st);
            fail();
        }
        assert_log(PS_LOG_WARNING, "corrupt");
    }
    spit(bad, text, 10);
    o = logging_options();
    ps_tune_cache_read(bad, &k, &got, &o);
    assert_log(PS_LOG_WARNING, "not a persolve tune cache file");
    spit(bad, text, len - 5);
    ps_tune_cache_read(bad, &k, &got, &o);
    assert_log(PS_LOG_WARNING, "truncated");

    /* one byte changed anywhere after the magic line */
    const char *shape = strstr(text, "shape block 256");
    assert_non_null(shape);
    for (long at = (long)(strchr(text, '\n') - text) + 1; at < len - 1; at += 7) {
        memcpy(copy, text, (size_t)len);
        copy[at] = copy[at] == '1' ? '2' : '1';
        spit(bad, copy, len);
        o = logging_options();
        if (ps_tune_cache_read(bad, &k, &got, &o) == PS_TUNE_CACHE_OK) {
            printf("byte %ld changed: still accepted\n", at);
            fail();
        }
    }
    memcpy(copy, text, (size_t)len);
    copy[shape - text + strlen("shape block ")] = '5'; /* block 556 */
    spit(bad, copy, len);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
    assert_log(PS_LOG_WARNING, "checksum mismatch");

    /* extra data after the checksum, NUL bytes, a foreign file, a large file */
    memcpy(copy, text, (size_t)len);
    memcpy(copy + len, "extra\n", 6);
    spit(bad, copy, len + 6);
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
    memcpy(copy, text, (size_t)len);
    copy[len / 2] = '\0';
    spit(bad, copy, len);
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
    assert_log(PS_LOG_WARNING, "NUL");
    spit(bad, "\x89HDF\r\n\x1a\n", 8);
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
    memset(copy, 'x', sizeof copy);
    spit(bad, copy, sizeof copy);
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
    assert_log(PS_LOG_WARNING, "larger than");

    /* a later format version: stale, not corrupt */
    memcpy(copy, text, (size_t)len);
    char *v = strchr(copy, '\n') - 1;
    assert_true(*v == '1');
    *v = '2';
    spit(bad, copy, len);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(bad, &k, &got, &o), PS_TUNE_CACHE_STALE);
    assert_log(PS_LOG_WARNING, "format version 2");

    /* a directory where the file should be: unreadable */
    mkdir(DIR "/adir.txt", 0755);
    o = logging_options();
    assert_int_equal(ps_tune_cache_read(DIR "/adir.txt", &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
}

/* A shape out of range with a valid checksum (written by hand). */
static void test_bad_shape(void **state)
{
    (void)state;
    const char *path = DIR "/shape.txt";
    ps_options o = logging_options();
    ps_tune_key k = test_key();
    ps_tune_entry e = test_entry(), got;
    static const int bad[][4] = {{100, 8, 0, 2}, {1024, 8, 0, 2}, {256, 3, 0, 2},
                                 {256, 64, 0, 2}, {256, 8, 2, 2}, {256, 8, 0, 0}, {256, 8, 0, 33}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.block = bad[i][0];
        e.sb = bad[i][1];
        e.regcap = bad[i][2];
        e.blocks_per_sm = bad[i][3];
        assert_int_equal(ps_tune_cache_write(path, &k, &e, &o), 0);
        o = logging_options();
        assert_int_equal(ps_tune_cache_read(path, &k, &got, &o), PS_TUNE_CACHE_CORRUPT);
        assert_log(PS_LOG_WARNING, "shape out of range");
    }
}

static void test_write_errors(void **state)
{
    (void)state;
    ps_options o = logging_options();
    ps_tune_key k = test_key();
    ps_tune_entry e = test_entry();
    /* a file where a directory must be */
    FILE *f = fopen(DIR "/plain", "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ps_tune_cache_write(DIR "/plain/x/entry.txt", &k, &e, &o), PS_ERR_FILE);
    assert_log(PS_LOG_ERROR, "cannot create its directory");
    /* a value that would break the format */
    snprintf(k.build, sizeof k.build, "a b");
    o = logging_options();
    assert_int_equal(ps_tune_cache_write(DIR "/w.txt", &k, &e, &o), PS_ERR_FILE);
    assert_log(PS_LOG_ERROR, "space");
}

/* ---- the public entry without a GPU --------------------------------------- */

static void test_tune_api(void **state)
{
    (void)state;
    ps_tune_settings s;
    ps_tune_settings_default(&s);
    assert_int_equal(s.iterations, 20);
    assert_int_equal(s.repeats, 5);
    assert_int_equal(s.write_cache, 1);
    assert_null(s.measured);
    ps_tune_settings_default(NULL);
    ps_tune_report_free(NULL);

    ps_problem *p = NULL;
    char err[256];
    assert_int_equal(ps_preset_create("spiral2d:n=8,nt=40", &p, err, sizeof err), 0);
    ps_tune_report r;
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(ps_gpu_tune(NULL, NULL, NULL, &r), PS_ERR_NULL);
    assert_null(r.shapes);
    assert_int_equal(r.count, 0);
    assert_int_equal(ps_gpu_tune(p, NULL, NULL, NULL), PS_ERR_NULL);
    ps_options o = logging_options();
    s.repeats = 0;
    assert_int_equal(ps_gpu_tune(p, &o, &s, &r), PS_ERR_OPTION);
    assert_log(PS_LOG_ERROR, "repeats");
    ps_tune_settings_default(&s);
    s.reserved[3] = 1;
    assert_int_equal(ps_gpu_tune(p, &o, &s, &r), PS_ERR_OPTION);
    assert_log(PS_LOG_ERROR, "reserved[3]");
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    g.gpu_block = 100;
    o.gpu = &g;
    assert_int_equal(ps_gpu_tune(p, &o, NULL, &r), PS_ERR_OPTION);
    assert_log(PS_LOG_ERROR, "gpu_block");
    if (ps_gpu_count() == 0) {
        ps_options_default(&o);
        int st = ps_gpu_tune(p, &o, NULL, &r);
        assert_true(st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED);
        assert_int_equal(r.count, 0);
        assert_int_equal(r.best, -1);
    }
    ps_tune_report_free(&r);
    ps_problem_free(p);
}

static void test_tune_batch_api(void **state)
{
    (void)state;
    ps_tune_batch_report_free(NULL);
    ps_problem *p = NULL;
    char err[256];
    assert_int_equal(ps_preset_create("spiral2d:n=8,nt=40", &p, err, sizeof err), 0);
    ps_tune_batch_report r;
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(ps_gpu_tune_batch(NULL, 4, NULL, NULL, &r), PS_ERR_NULL);
    assert_null(r.teams);
    assert_int_equal(r.count, 0);
    assert_int_equal(r.best, -1);
    assert_int_equal(ps_gpu_tune_batch(p, 4, NULL, NULL, NULL), PS_ERR_NULL);
    ps_options o = logging_options();
    static const int copies[] = {0, -1, PS_BATCH_MAX + 1};
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        o = logging_options();
        assert_int_equal(ps_gpu_tune_batch(p, copies[i], &o, NULL, &r), PS_ERR_OPTION);
        assert_log(PS_LOG_ERROR, "copies");
        assert_int_equal(r.count, 0);
    }
    ps_tune_settings s;
    ps_tune_settings_default(&s);
    s.iterations = 0;
    o = logging_options();
    assert_int_equal(ps_gpu_tune_batch(p, 4, &o, &s, &r), PS_ERR_OPTION);
    assert_log(PS_LOG_ERROR, "iterations");
    if (ps_gpu_count() == 0) {
        o = logging_options();
        int st = ps_gpu_tune_batch(p, 4, &o, NULL, &r);
        assert_true(st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED);
        assert_int_equal(r.count, 0);
        assert_int_equal(r.best, -1);
        assert_int_equal(r.copies, 4);
        st = ps_gpu_tune_batch(p, PS_BATCH_MAX, NULL, NULL, &r);
        assert_true(st == PS_ERR_NO_GPU || st == PS_ERR_GPU_UNSUPPORTED);
    }
    ps_tune_batch_report_free(&r);
    ps_problem_free(p);
}

/* The team heuristic: co-resident blocks over the problems, at least 2
 * (1 when one block fits), at least PS_TUNE_TEAM_SINGLE_THREADS threads
 * for the single-channel kernels but no more blocks than the largest
 * problem has tiles of 32 spins, never more than the resident blocks. */
static void test_team_heuristic(void **state)
{
    (void)state;
    /* channels kernels (512 threads): the quotient, floor 2 */
    assert_int_equal(ps_tune_team_heuristic(132, 120, 512, 0, 1144, 0), 2);
    assert_int_equal(ps_tune_team_heuristic(132, 16, 512, 0, 1144, 0), 8);
    assert_int_equal(ps_tune_team_heuristic(132, 0, 512, 0, 1144, 0), 132);
    assert_int_equal(ps_tune_team_heuristic(1, 64, 512, 0, 1144, 0), 1);
    /* single-channel kernels: 2048 threads at least (T: 2010 spins, S: 1024) */
    assert_int_equal(ps_tune_team_heuristic(264, 256, 256, 1, 2010, 0), PS_TUNE_TEAM_SINGLE_THREADS / 256);
    assert_int_equal(ps_tune_team_heuristic(264, 64, 256, 1, 1024, 0), 8);
    assert_int_equal(ps_tune_team_heuristic(264, 16, 256, 1, 1024, 0), 16);
    assert_int_equal(ps_tune_team_heuristic(132, 256, 512, 1, 2010, 0), 4);
    assert_int_equal(ps_tune_team_heuristic(264, 1, 256, 1, 2010, 0), 264);
    /* ... but no more blocks than tiles of 32 spins, and 2 at least */
    assert_int_equal(ps_tune_team_heuristic(264, 256, 256, 1, 100, 0), 4);
    assert_int_equal(ps_tune_team_heuristic(264, 256, 256, 1, 60, 0), 2);
    assert_int_equal(ps_tune_team_heuristic(264, 256, 256, 1, 1, 0), 2);
    assert_int_equal(ps_tune_team_heuristic(264, 8, 256, 1, 1, 0), 33);
    /* capped at the co-resident blocks; a block of more threads than the floor */
    assert_int_equal(ps_tune_team_heuristic(4, 256, 256, 1, 2010, 0), 4);
    assert_int_equal(ps_tune_team_heuristic(132, 256, 4096, 1, 2010, 0), 2);
    assert_int_equal(ps_tune_team_heuristic(0, 256, 256, 1, 2010, 0), 1);
    /* forced tiles: the cap counts tiles of that many spins */
    assert_int_equal(ps_tune_team_heuristic(264, 256, 256, 1, 100, 16), 7);
    /* the options: forced tiles, and 8 at most for cluster barriers */
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    assert_int_equal(ps_tune_team_default(&g, 264, 256, 128, 1, 2010), 16);
    g.batch_team_barrier = PS_TEAM_BARRIER_CLUSTER;
    assert_int_equal(ps_tune_team_default(&g, 264, 256, 128, 1, 2010), 8);
    assert_int_equal(ps_tune_team_default(&g, 264, 8, 256, 1, 2010), 8);
    g.batch_team_barrier = PS_TEAM_BARRIER_AUTO;
    g.gpu_spins_per_tile = 16;
    assert_int_equal(ps_tune_team_default(&g, 264, 256, 256, 1, 100), 7);
}

/* The batch kernel's block: a forced one as given; 512 threads for the
 * channels kernels; for the single-channel kernels 128 up to 512 steps
 * (256 with cluster teams), 256 beyond. */
static void test_batch_block(void **state)
{
    (void)state;
    ps_gpu_options g;
    ps_gpu_options_default(&g);
    assert_int_equal(ps_tune_batch_block(&g, 0, 100), 512);
    assert_int_equal(ps_tune_batch_block(&g, 0, 5000), 512);
    assert_int_equal(ps_tune_batch_block(&g, 1, 375), 128);  /* T */
    assert_int_equal(ps_tune_batch_block(&g, 1, 512), 128);
    assert_int_equal(ps_tune_batch_block(&g, 1, 513), 256);
    assert_int_equal(ps_tune_batch_block(&g, 1, 1000), 256); /* S */
    /* cluster teams (8 blocks at most) keep 256 for short pulses */
    g.batch_team_barrier = PS_TEAM_BARRIER_CLUSTER;
    assert_int_equal(ps_tune_batch_block(&g, 1, 375), 256);
    assert_int_equal(ps_tune_batch_block(&g, 0, 375), 512);
    g.batch_team_barrier = PS_TEAM_BARRIER_RANGE;
    assert_int_equal(ps_tune_batch_block(&g, 1, 375), 128);
    g.gpu_block = 384;
    assert_int_equal(ps_tune_batch_block(&g, 1, 375), 384);
    assert_int_equal(ps_tune_batch_block(&g, 0, 1000), 384);
}

int main(void)
{
    mkdir(DIR, 0755);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_class),
        cmocka_unit_test(test_batch_block),
        cmocka_unit_test(test_channels_entry),
        cmocka_unit_test(test_batch_entry),
        cmocka_unit_test(test_batch_beside_solo),
        cmocka_unit_test(test_cache_dir_and_path),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_stale),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_tune_api),
        cmocka_unit_test(test_tune_batch_api),
        cmocka_unit_test(test_team_heuristic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
