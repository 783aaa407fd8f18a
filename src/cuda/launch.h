/*
 * Launch shape of the persistent kernel: grid and block size, and how an
 * evaluation splits spins and time (spins per tile SB, segments P, with
 * SB * P = block size). Chosen by a heuristic unless given. Also the
 * internal entries of the benchmark: the comparison variants of the solve
 * and the evaluation timing.
 */
#ifndef PS_SRC_GPU_LAUNCH_H
#define PS_SRC_GPU_LAUNCH_H

#include <stddef.h>

#include "persolve.h"

#define PS_GPU_MAX_THREADS 512    /* __launch_bounds__ of the kernel */
#define PS_GPU_DEFAULT_THREADS 512 /* measured faster than 256 at S, M, T (5-7%), 3% slower at L */
/* A batch's block when every problem is of the single-channel kernels
 * (ps_gpu_channels 0, designed axes or not): two blocks an SM, each
 * team's barriers hidden behind the other's work (H200: the kernel of the
 * 64-S batch 4.7%, of the 256-T batch 17% and of the 64-SG batch 8%
 * faster than with 512; the eight-channel P batch 38% slower, so the
 * channels kernels keep PS_GPU_DEFAULT_THREADS; README "Batches") */
#define PS_GPU_BATCH_SMALL_THREADS 256
/* ... and blocks of PS_GPU_BATCH_SHORT_THREADS when every such problem
 * has at most PS_GPU_BATCH_SHORT_NT steps: half the time segments, so
 * twice the steps a segment of a short pulse (H200, teams of 2048
 * threads: the kernel of the 256-T batch, nt 375, 5.5% faster, nt 188
 * 8.5%, nt 250 5%, nt 500 and 750 within 1-2%, nt 1000 15-28% slower;
 * README "Batches") */
#define PS_GPU_BATCH_SHORT_THREADS 128
#define PS_GPU_BATCH_SHORT_NT 512
#define PS_GPU_BLOCKS_PER_SM 2    /* co-resident blocks the heuristic aims for */
/* Designed gradient axes, the single-channel kernel: the team forms the
 * waveforms of an evaluation, each block a share of the steps, for pulses
 * of at least this many steps a thread of a block; each block forms them
 * all for shorter ones, and in the channels kernels (cuda/gradient.cuh;
 * H200, blocks of 512: MG (nt 5000) 4% faster per iteration by the team,
 * SG (nt 1000) 7% slower; PG 7-13% slower with the team's code in its
 * kernel; README) */
#define PS_GPU_WAVEFORM_TEAM_STEPS 4

typedef struct ps_gpu_config {
    int grid;  /* blocks (all co-resident) */
    int block; /* threads per block, a multiple of 32, <= PS_GPU_MAX_THREADS */
    int sb;    /* spins per tile, power of two <= 32 */
    int segs;  /* time segments, block / sb */
    int regcap; /* 0: up to 128 registers a thread; 1: up to 64 (more resident warps) */
} ps_gpu_config;

/* A host buffer that device set-ups reuse for their upload images (a
 * batch's problems: its pages touched once, not once a problem); its
 * owner frees p. */
typedef struct ps_gpu_scratch {
    void *p;
    size_t cap;
} ps_gpu_scratch;

typedef struct ps_gpu_kernel_info {
    int registers, local_bytes, static_smem, max_threads;
} ps_gpu_kernel_info;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Complete a configuration: the fields `in` sets are kept; else the shape
 * the options force or the tune cache holds (ps_gpu_preferred_config);
 * the zero fields left are chosen by the heuristic: block 512; spins per
 * tile SB from the cost model of ps_gpu_default_config; grid =
 * min(occupancy, 2) blocks per SM times the SMs; no register cap. Returns
 * PS_ERR_GPU_LAUNCH if the shape cannot be co-resident (logged).
 */
int ps_gpu_resolve_config(const ps_problem *p, const ps_options *o,
                          const ps_gpu_config *in, ps_gpu_config *out);

/* Where ps_gpu_preferred_config found the launch shape. */
enum { PS_SHAPE_HEURISTIC = 0, PS_SHAPE_GIVEN = 1, PS_SHAPE_FORCED = 2, PS_SHAPE_CACHE = 3 };

/*
 * The first step of ps_gpu_resolve_config (tune/tune.c): a shape `c` with
 * fields set (the caller's) is kept; else the fields the options force
 * (the gpu_* fields of o->gpu) are filled in; with nothing given or
 * forced and tune_cache set (also by o->gpu NULL), the tune cache's entry
 * for this GPU, build and size class fills all of c, provided it fits
 * this problem (else a warning is logged and c stays empty). sms: the
 * GPU's SM count. Returns a PS_SHAPE_* source, or PS_ERR_OPTION for a
 * forced tile that breaks the relaxation bound (logged).
 */
int ps_gpu_preferred_config(const ps_problem *p, const ps_options *o, int sms,
                            ps_gpu_config *c);

void ps_gpu_default_config(size_t ns, size_t nt, int grid_blocks, int tb,
                           int min_segs, int *sb, int *segs);
int ps_gpu_min_segments(const ps_problem *p);
/* channels: 0 for a problem of one channel with a real B1 scale (the
 * single-channel kernel), else its number of channels (the channels
 * kernel, complex sensitivities from its b1map): ps_gpu_channels. */
int ps_gpu_channels(const ps_problem *p);
/* The kernel class of a problem: ps_gpu_channels, with PS_GPU_DESIGNED
 * added for designed gradient axes (the DG kernels, cuda/gradient.cuh).
 * The `kclass` arguments below take it; a plain channel count is the
 * class of a problem without designed axes. */
#define PS_GPU_DESIGNED 0x100
/* PS_GPU_NOGRAD: the single-channel kernel of a problem without gradient
 * (G = 0 at every step, no designed axis: ps_design_has_gradient), whose
 * spin loops skip the gradient rows; the same layout and batch path as
 * class 0 (PS_GPU_CLASS_BASE). */
#define PS_GPU_NOGRAD 0x200
/* PS_GPU_STAGED (with PS_GPU_DESIGNED if designed): the single-channel
 * kernel of a problem whose gradient is on x and y alone, designed or not
 * (z not designed, G_z = 0 at every step), with at most
 * PS_GPU_STAGED_STEPS steps: in float32 its blocks stage the x and y rows
 * with the pulse (cuda/evaluate.cuh, GR_STAGED); float64 and the batch
 * run it as PS_GPU_CLASS_BASE. */
#define PS_GPU_STAGED 0x400
#define PS_GPU_STAGED_STEPS 5120
#define PS_GPU_CLASS_BASE(kclass) ((kclass) & ~(PS_GPU_NOGRAD | PS_GPU_STAGED))
/* The channels of a kernel class: ps_gpu_channels. */
#define PS_GPU_CLASS_CHANNELS(kclass) ((kclass) & ~(PS_GPU_DESIGNED | PS_GPU_NOGRAD | PS_GPU_STAGED))
int ps_gpu_kernel_class(const ps_problem *p);
/* Dynamic shared memory of a block of the persistent kernel of class
 * kclass for nt steps. */
size_t ps_gpu_dyn_smem(int precision, int sb, int segs, int tb, size_t nt, int kclass);
/* The same for a block of the resolved shape c (ps_gpu_resolve_config) of
 * problem p: of its solo kernel, or with batch 1 of the batch kernel's
 * phases (its class's PS_GPU_CLASS_BASE). */
size_t ps_gpu_config_smem(const ps_problem *p, int precision, const ps_gpu_config *c, int batch);
int ps_gpu_stage_pulse(int precision, size_t nt, int channels);

/*
 * Phase profile of the next solves: when enabled, block 0 adds the time
 * between barriers to PS_GPU_PROF counters (ns); read and reset with
 * ps_gpu_profile_read. For benchmarks only.
 */
#define PS_GPU_PROF 9
enum {
    PS_PROF_EVAL,             /* evaluation, to its barrier */
    PS_PROF_REDUCE,           /* gradient reduction (block 0's share) */
    PS_PROF_SUMS,             /* the sums of the evaluation's per-block partials (every block) */
    PS_PROF_DECIDE_TRIAL,     /* line-search decision (one thread) */
    PS_PROF_UPDATE,           /* a trial's update dots, to the reduction's barrier */
    PS_PROF_DECIDE_UPDATE,    /* the pairs' dots and the stopping tests (one warp) */
    PS_PROF_DECIDE_DIRECTION, /* the direction's coefficients (one warp) */
    PS_PROF_DIRECTION,        /* the accepted step applied and d formed, to the barrier */
    PS_PROF_EXCHANGE,         /* several GPUs: the ranks' rows exchanged (cuda/ranks.cuh) */
};
/* The first PS_PROF_OBJECTIVE counters and PS_PROF_EXCHANGE are the
 * objective (F and its gradient, summed over the blocks and the GPUs);
 * the others the optimizer. */
#define PS_PROF_OBJECTIVE 3
int ps_gpu_profile_enable(int on);
int ps_gpu_profile_read(unsigned long long out[PS_GPU_PROF]);
unsigned long long *ps_gpu_profile_buffer(void);
int ps_gpu_kernel_attrs(int precision, int regcap, int kclass, ps_gpu_kernel_info *info);
/* The persistent kernel's entry for a precision, register cap and kernel
 * class (ps_gpu_kernel_class). */
void *ps_gpu_kernel_ptr(int precision, int regcap, int kclass);
int ps_gpu_max_blocks_per_sm(int precision, int regcap, int kclass, int tb, size_t smem);

/* "NAME (grid G x B[ regcap], SB spins x P segments, float32|float64)":
 * ps_result.device of a GPU solve with shape c. */
void ps_gpu_describe_shape(const ps_gpu_config *c, int precision, char *buf, size_t len);

/* The persistent kernel's solve (without control points) with an explicit
 * configuration (NULL: as ps_gpu_resolve_config picks). */
int ps_gpu_solve_config(const ps_problem *p, const ps_options *o,
                        const ps_gpu_config *cfg, double *x, ps_result *r);

/*
 * How the GPU solve is driven. All three run the same phases (cuda/phases.cuh)
 * with the same launch shape, so they give bit-identical iterates; they
 * differ only in who sequences the phases:
 *   PS_GPU_PERSISTENT  one cooperative kernel for the whole solve (the design);
 *   PS_GPU_HOST_LOOP   ordinary kernels per phase, the host waits for the
 *                      scalars of each evaluation and update and launches
 *                      the next phase (data stay on the device);
 *   PS_GPU_GRAPH       a CUDA graph whose conditional WHILE node runs one
 *                      cooperative kernel per iteration.
 */
enum { PS_GPU_PERSISTENT = 0, PS_GPU_HOST_LOOP = 1, PS_GPU_GRAPH = 2 };

/*
 * ps_gpu_solve_config driven by `variant`. x: physical pulse in/out as in
 * solve_persistent. r->kernel_seconds: CUDA-event time of the solve proper
 * (start evaluation to the final state; no setup, transfers or graph
 * instantiation). Returns r->status or an error (PS_ERR_OPTION for an
 * unknown variant).
 */
int ps_gpu_solve_variant(const ps_problem *p, const ps_options *o,
                         const ps_gpu_config *cfg, int variant, double *x,
                         ps_result *r);

/*
 * Cost of one evaluation (F, exact gradient, fixed-order reductions) at the
 * physical pulse x[ps_problem_nx] (NULL: the problem's start pulse) with
 * the solve's launch shape, as the solve evaluates it: in its optimizer
 * variables (the slew variables of designed axes, the bounded pulse of
 * b1_max). The MODE_EVAL launch of the persistent kernel repeated,
 * after one warm-up, `repeats` times. The cost depends on the pulse (the
 * Bloch step is cheaper for small rotations), so a benchmark times it at a
 * point like its iterates.
 * kernel_seconds: median time inside the kernel (block 0's clock, from its
 * start to the reduced f); launch_seconds: median CUDA-event time of a
 * whole launch. Returns 0 or an error.
 */
int ps_gpu_eval_timing(const ps_problem *p, const ps_options *o,
                       const ps_gpu_config *cfg, const double *x, int repeats,
                       double *kernel_seconds, double *launch_seconds);

#ifdef __cplusplus
}
#endif

#endif /* PS_SRC_GPU_LAUNCH_H */
