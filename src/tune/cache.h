/*
 * The tune cache: the launch shape `persolve tune` (ps_gpu_tune) measured
 * fastest, one small text file per GPU model, precision and problem-size
 * class, read before every GPU solve that does not force a shape.
 *
 * Key: GPU name, compute capability, CUDA driver version (and the NVIDIA
 * kernel module's version where /proc tells it), build id (PS_BUILD_ID:
 * the library version and a hash of the GPU sources and nvcc flags, see
 * build_id.py) and the problem-size class (precision, round(log2 Ns),
 * round(log2 Nt), relaxation or not). The file name holds the GPU, the
 * compute capability and the class; the contents hold the whole key and a
 * checksum, so a file written by another driver or build is found and
 * reported as stale rather than silently missed.
 */
#ifndef PS_SRC_TUNE_CACHE_H
#define PS_SRC_TUNE_CACHE_H

#include <stddef.h>

#include "persolve.h"

/* Problem-size class: problems of one class share a tuned shape. */
typedef struct ps_tune_class {
    int precision; /* ps_precision of the spin loop */
    int ns_log2;   /* round(log2(Ns)): Ns within a factor sqrt(2) of 2^ns_log2 */
    int nt_log2;   /* round(log2(Nt)) */
    int relax;     /* 1 if the problem has T1 or T2 (relaxation bounds the segments) */
    int channels;  /* 0: one channel of a real B1 scale; else the transmit channels of
                      the channels kernel (ps_gpu_channels) */
} ps_tune_class;

typedef struct ps_tune_key {
    char gpu[128];          /* device name */
    int cc_major, cc_minor; /* compute capability */
    int driver;             /* CUDA driver version (cudaDriverGetVersion) */
    char driver_module[32]; /* NVIDIA kernel module version, "-" when unknown */
    char build[64];         /* PS_BUILD_ID */
    ps_tune_class cls;
} ps_tune_key;

/* A cached choice: the launch shape and, for information, how it was found. */
typedef struct ps_tune_entry {
    int block;                    /* threads per block */
    int sb;                       /* spins per tile (segments = block / sb) */
    int regcap;                   /* 0: up to 128 registers, 1: up to 64 */
    int blocks_per_sm;            /* cooperative grid = blocks_per_sm x SMs */
    double seconds_per_iteration; /* its measured median */
    long long ns, nt;             /* the problem it was measured on */
    char date[32];                /* UTC, ISO 8601 */
} ps_tune_entry;

/* ps_tune_cache_read results. */
enum {
    PS_TUNE_CACHE_OK = 0,      /* entry valid for the key */
    PS_TUNE_CACHE_MISSING = 1, /* no file (logged as info) */
    PS_TUNE_CACHE_CORRUPT = 2, /* unreadable, truncated, bad checksum or values (warning) */
    PS_TUNE_CACHE_STALE = 3,   /* another key or format version (warning) */
};

/* round(log2(v)) for v >= 1 (0 for 0). */
int ps_tune_round_log2(size_t v);

void ps_tune_size_class(size_t ns, size_t nt, int precision, int relax, int channels, ps_tune_class *c);

/* This library's build id, PS_BUILD_ID. */
const char *ps_tune_build_id(void);

/* The key of problem p at `precision` on GPU 0. PS_ERR_NO_GPU without one. */
int ps_tune_key_current(const ps_problem *p, int precision, ps_tune_key *k);

/* One line: "GPU, sm_XY, driver D (module), build B, single Ns ~2^a Nt ~2^b, ..." */
void ps_tune_key_text(const ps_tune_key *k, char *buf, size_t len);

/* The cache directory: $PERSOLVE_CACHE_DIR, else $XDG_CACHE_HOME/persolve
 * (an absolute XDG_CACHE_HOME only), else $HOME/.cache/persolve. Returns
 * PS_ERR_FILE when none is set or the name does not fit. */
int ps_tune_cache_dir(char *buf, size_t len);

/* DIR/tune-GPU-smXY-PRECISION-nsA-ntB[-relax].txt for key k. */
int ps_tune_cache_path(const ps_tune_key *k, char *buf, size_t len);

/* Write e for key k to path atomically (creating the directories):
 * PS_CONVERGED, or PS_ERR_FILE with the reason logged through o. */
int ps_tune_cache_write(const char *path, const ps_tune_key *k, const ps_tune_entry *e,
                        const ps_options *o);

/* Read path's entry if it is intact and written for key k: a
 * PS_TUNE_CACHE_* result, the reason logged through o when not OK. */
int ps_tune_cache_read(const char *path, const ps_tune_key *k, ps_tune_entry *e,
                       const ps_options *o);

#endif /* PS_SRC_TUNE_CACHE_H */
