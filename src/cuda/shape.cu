/*
 * The launch shape of the persistent kernel: the heuristic's spins per
 * tile and segments, the segments relaxation needs, the blocks that fit
 * per SM, the shape a solve resolves to (forced fields, the tune cache,
 * the heuristic) and the dynamic shared memory it needs (cuda/launch.h).
 */
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>

#include "cuda/launch.h"
#include "cuda/phases.cuh"

extern "C" {
#include "common/log.h"
#include "cuda/gpu.h"
#include "model/design.h"
#include "model/problem.h"
#include "persolve_gpu.h"
}

using namespace ps_gpu;

/*
 * Spins per tile SB and segments P = tb / SB for a block of tb threads
 * (heuristic; `persolve tune` measures instead). Per thread, an evaluation
 * costs rounds x (steps of its segment + a scan level's worth per level),
 * rounds = ceil(tiles / grid): the SB (power of two <= 32) with the least
 * cost, the larger SB on ties. min_segs: the fewest segments allowed
 * (relaxation bounds a segment's length, see ps_gpu_min_segments).
 */
extern "C" void ps_gpu_default_config(size_t ns, size_t nt, int grid_blocks, int tb, int min_segs,
                                      int *sb, int *segs)
{
    double best = 0.0;
    *sb = 1;
    for (int s = 1; s <= 32 && s <= tb; s *= 2) {
        int P = tb / s;
        if (s > 1 && P < min_segs)
            break;
        size_t tiles = (ns + s - 1) / s;
        double rounds = (double)((tiles + grid_blocks - 1) / grid_blocks);
        int levels = 0;
        while ((1 << levels) < P)
            levels++;
        double kseg = (double)((nt + P - 1) / P);
        double cost = rounds * (kseg + 2.0 * levels);
        if (s == 1 || cost <= best) {
            best = cost;
            *sb = s;
        }
    }
    *segs = tb / *sb;
}

/*
 * The backward replay runs each segment's relaxation in reverse, which
 * multiplies rounding errors by exp(K dt / T) over a segment of K steps.
 * Segments are kept to K dt max(1/T1, 1/T2) <= 2 (a factor below e^2):
 * the fewest segments that allows, at least 1.
 */
extern "C" int ps_gpu_min_segments(const ps_problem *p)
{
    double rmax = 0.0; /* largest dt / T over the spins */
    for (size_t j = 0; j < p->ns; j++) {
        if (p->t1)
            rmax = fmax(rmax, p->dt / p->t1[j]);
        if (p->t2)
            rmax = fmax(rmax, p->dt / p->t2[j]);
    }
    double segs = ceil((double)p->nt * rmax / 2.0);
    return segs < 1.0 ? 1 : segs > 1e9 ? 1000000000 : (int)segs;
}

extern "C" int ps_gpu_channels(const ps_problem *p)
{
    /* one channel of real sensitivities is the single-channel kernel's
     * problem (its B1 scale: Re S), so that it gives the same bits with any
     * launch shape and shares its tune cache class; a problem with VOPs
     * runs the channels kernel, which has the SAR penalty */
    return p->real_channel && p->nq == 0 ? 0 : (int)p->nc;
}

/* the PS_GPU_STAGED class's pulses are always staged (ps_gpu_stage_pulse) */
static_assert(2 * PS_GPU_STAGED_STEPS * sizeof(float) <= PS_GPU_PULSE_SMEM, "a staged class's pulse is staged");

extern "C" int ps_gpu_kernel_class(const ps_problem *p)
{
    const int channels = ps_gpu_channels(p);
    if (!channels && !ps_design_has_gradient(p))
        return PS_GPU_NOGRAD;
    const int designed = p->design_g ? PS_GPU_DESIGNED : 0;
    if (!channels && ps_design_axis_zero(p, 2) && p->nt <= PS_GPU_STAGED_STEPS)
        return PS_GPU_STAGED | designed;
    return channels | designed;
}

extern "C" int ps_gpu_max_blocks_per_sm(int precision, int regcap, int kclass, int tb, size_t smem)
{
    void *k = ps_gpu_kernel_ptr(precision, regcap, kclass);
    int bps = 0;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, tb, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bps;
}

extern "C" int ps_gpu_resolve_config(const ps_problem *p, const ps_options *o,
                                     const ps_gpu_config *in, ps_gpu_config *out)
{
    ps_gpu_config c = {0, 0, 0, 0, 0};
    if (in)
        c = *in;
    int sms = 0, dev = 0;
    cudaGetDevice(&dev); /* the device the run is set up on (a rank's) */
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return PS_ERR_NO_GPU;
    }
    /* the caller's shape, else the options' forced fields, else the tune cache (tune/tune.c) */
    int src = ps_gpu_preferred_config(p, o, sms, &c);
    if (src < 0)
        return src;
    int tb = c.block ? c.block : PS_GPU_DEFAULT_THREADS;
    PS_RETURN_ERROR_IF(o, tb < 32 || tb > PS_GPU_MAX_THREADS || tb % 32, PS_ERR_OPTION,
                       "GPU block size %d is not a multiple of 32 in 32..%d", tb, PS_GPU_MAX_THREADS);
    int G = c.grid ? c.grid : PS_GPU_BLOCKS_PER_SM * sms;
    int sb = c.sb, segs = c.segs;
    const int min_segs = ps_gpu_min_segments(p);
    /* every index of x (the designed axes' after the RF: PS_X_G) an int */
    PS_RETURN_ERROR_IF(o, ps_problem_nx(p) > (size_t)INT_MAX / 4, PS_ERR_SIZE,
                       "%zu unknowns (nc = %zu, nt = %zu, %zu designed axes) exceed the GPU backend's 32-bit "
                       "indexing",
                       ps_problem_nx(p), p->nc, p->nt, ps_problem_ng(p));
    PS_RETURN_ERROR_IF(o, p->ns > (size_t)(INT_MAX / 3) || p->nt > (size_t)(INT_MAX / 6), PS_ERR_SIZE,
                       "ns = %zu, nt = %zu exceed the GPU backend's 32-bit indexing", p->ns, p->nt);
    for (int pass = 0; pass < 2; pass++) {
        if (!c.sb || !c.segs)
            ps_gpu_default_config(p->ns, p->nt, G, tb, min_segs, &sb, &segs);
        size_t smem = ps_gpu_dyn_smem(o->precision, sb, segs, tb, p->nt, ps_gpu_kernel_class(p));
        int bps = ps_gpu_max_blocks_per_sm(o->precision, c.regcap, ps_gpu_kernel_class(p), tb, smem);
        PS_RETURN_ERROR_IF(o, bps < 1, PS_ERR_GPU_LAUNCH,
                           "a block of %d threads with %zu bytes of shared memory does not fit on an SM",
                           tb, smem);
        int cap = bps * sms;
        if (c.grid) {
            PS_RETURN_ERROR_IF(o, c.grid > cap, PS_ERR_GPU_LAUNCH,
                               "grid of %d blocks exceeds the %d co-resident blocks (%d per SM)",
                               c.grid, cap, bps);
            break;
        }
        int want = (bps < PS_GPU_BLOCKS_PER_SM ? bps : PS_GPU_BLOCKS_PER_SM) * sms;
        if (want == G)
            break;
        G = want;
    }
    PS_RETURN_ERROR_IF(o, sb < 1 || sb > 32 || (sb & (sb - 1)) || sb * segs != tb, PS_ERR_OPTION,
                       "tile of %d spins x %d segments does not match a block of %d threads", sb, segs, tb);
    out->grid = G;
    out->block = tb;
    out->sb = sb;
    out->segs = segs;
    out->regcap = c.regcap;
    return PS_CONVERGED;
}

/* 1 if the trial pulse of nt steps (of every channel) is staged in
 * shared memory. */
extern "C" int ps_gpu_stage_pulse(int precision, size_t nt, int channels)
{
    size_t rs = precision == PS_PRECISION_DOUBLE ? sizeof(double) : sizeof(float);
    if (!channels)
        return PS_DESIGN_NX(1, nt) * rs <= PS_GPU_PULSE_SMEM; /* u, v of every step */
    return PS_DESIGN_NX((size_t)channels, nt) * rs <= PS_GPU_PULSE_SMEM_CHANNELS(rs);
}

template <typename R>
static size_t dyn_smem_bytes(int sb, int segs, int tb, int pulse_len, int channels, int designed = 0)
{
    size_t ev = eval_smem_bytes<R>(sb, segs, pulse_len, channels, designed);
    size_t rd = reduce_smem_bytes(tb);
    return ev > rd ? ev : rd;
}

extern "C" size_t ps_gpu_config_smem(const ps_problem *p, int precision, const ps_gpu_config *c, int batch)
{
    const int k = ps_gpu_kernel_class(p);
    return ps_gpu_dyn_smem(precision, c->sb, c->segs, c->block, p->nt, batch ? PS_GPU_CLASS_BASE(k) : k);
}

extern "C" size_t ps_gpu_dyn_smem(int precision, int sb, int segs, int tb, size_t nt, int kclass)
{
    const int channels = PS_GPU_CLASS_CHANNELS(kclass), designed = (kclass & PS_GPU_DESIGNED) != 0;
    /* the staged pulse: nt steps of (u, v) for every channel */
    int pl = ps_gpu_stage_pulse(precision, nt, channels) ? (int)nt * (channels ? channels : 1) : 0;
    if ((kclass & PS_GPU_STAGED) && precision != PS_PRECISION_DOUBLE)
        pl *= 2; /* with the x and y rows (GR_STAGED) */
    return precision == PS_PRECISION_DOUBLE ? dyn_smem_bytes<double>(sb, segs, tb, pl, channels, designed)
                                            : dyn_smem_bytes<float>(sb, segs, tb, pl, channels, designed);
}

