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
 *
 * A batch entry (ps_gpu_tune_batch) is the blocks per team of a batch of
 * about 2^k problems of one class: its class has batch = 1 + k, and its
 * own file beside the solo entry of that class.
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
    int batch;     /* 0: a solo solve's launch shape; else 1 + round(log2(problems)) of
                      a batch (problem counts within a factor sqrt(2) share it) */
} ps_tune_class;

typedef struct ps_tune_key {
    char gpu[128];          /* device name */
    int cc_major, cc_minor; /* compute capability */
    int driver;             /* CUDA driver version (cudaDriverGetVersion) */
    char driver_module[32]; /* NVIDIA kernel module version, "-" when unknown */
    char build[64];         /* PS_BUILD_ID */
    ps_tune_class cls;
} ps_tune_key;

/* A cached choice: the launch shape and, for information, how it was found.
 * A batch entry's choice is team_blocks; its shape is what the batch ran
 * with (the batch kernel's block and blocks per SM, its problems' tile, no
 * register cap). */
typedef struct ps_tune_entry {
    int block;                    /* threads per block */
    int sb;                       /* spins per tile (segments = block / sb) */
    int regcap;                   /* 0: up to 128 registers, 1: up to 64 */
    int blocks_per_sm;            /* cooperative grid = blocks_per_sm x SMs */
    int team_blocks;              /* batch entries: blocks per team (the choice); 0 in solo
                                     entries */
    double seconds_per_iteration; /* its measured median (a batch: the batch kernel's time
                                     over one problem's iterations) */
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

/* The solo class of problem p at `precision` (batch 0). */
void ps_tune_problem_class(const ps_problem *p, int precision, ps_tune_class *c);

/* ps_tune_class.batch of a batch of `problems` problems (>= 1). */
int ps_tune_batch_class(size_t problems);

/* This library's build id, PS_BUILD_ID. */
const char *ps_tune_build_id(void);

/* The key of problem p at `precision` on GPU 0. PS_ERR_NO_GPU without one. */
int ps_tune_key_current(const ps_problem *p, int precision, ps_tune_key *k);

/* The same for a batch of `copies` problems of p's class (copies >= 1). */
int ps_tune_key_batch(const ps_problem *p, int precision, int copies, ps_tune_key *k);

/* One line: "GPU, sm_XY, driver D (module), build B, single Ns ~2^a Nt ~2^b, ..." */
void ps_tune_key_text(const ps_tune_key *k, char *buf, size_t len);

/* The cache directory: $PERSOLVE_CACHE_DIR, else $XDG_CACHE_HOME/persolve
 * (an absolute XDG_CACHE_HOME only), else $HOME/.cache/persolve. Returns
 * PS_ERR_FILE when none is set or the name does not fit. */
int ps_tune_cache_dir(char *buf, size_t len);

/* DIR/tune-GPU-smXY-PRECISION-nsA-ntB[-relax][-chC][-batchK].txt for key k
 * (K = cls.batch - 1: round(log2) of the batch's problems). */
int ps_tune_cache_path(const ps_tune_key *k, char *buf, size_t len);

/* Write e for key k to path atomically (creating the directories):
 * PS_CONVERGED, or PS_ERR_FILE with the reason logged through o. */
int ps_tune_cache_write(const char *path, const ps_tune_key *k, const ps_tune_entry *e,
                        const ps_options *o);

/* Read path's entry if it is intact and written for key k: a
 * PS_TUNE_CACHE_* result, the reason logged through o when not OK. */
int ps_tune_cache_read(const char *path, const ps_tune_key *k, ps_tune_entry *e,
                       const ps_options *o);

/* Key k's cache file into path[len] and its entry into *e: 1 when it is
 * valid, else 0 with the reason logged through o (no cache directory or a
 * missing file as info, path empty in the first case). */
int ps_tune_cache_lookup(const ps_tune_key *k, ps_tune_entry *e, char *path, size_t len, const ps_options *o);

#endif /* PS_SRC_TUNE_CACHE_H */
