/*
 * The GPU options (persolve_gpu.h): defaults and validation of the launch
 * shape a caller forces and of the tune cache switch.
 */
#include "common/log.h"
#include "cuda/launch.h"
#include "tune/gpu_options.h"

/* The defaults: the tune cache read, every part of the shape automatic. */
static const ps_gpu_options automatic = {.tune_cache = 1};

void ps_gpu_options_default(ps_gpu_options *g)
{
    if (g)
        *g = automatic;
}

const ps_gpu_options *ps_gpu_options_of(const ps_options *o)
{
    return o->gpu ? o->gpu : &automatic;
}

#define GPU_CHECK(cond, ...) PS_RETURN_ERROR_IF(o, !(cond), PS_ERR_OPTION, __VA_ARGS__)

int ps_gpu_options_validate(const ps_options *o)
{
    const ps_gpu_options *g = o->gpu;
    if (!g)
        return PS_CONVERGED;
    GPU_CHECK(g->tune_cache == 0 || g->tune_cache == 1, "options.tune_cache: %d is not 0 or 1",
              g->tune_cache);
    GPU_CHECK(g->gpu_block == 0 || (g->gpu_block >= 32 && g->gpu_block <= PS_GPU_MAX_THREADS &&
                                    g->gpu_block % 32 == 0),
              "options.gpu_block: %d is not 0 (automatic) or a multiple of 32 in 32..%d",
              g->gpu_block, PS_GPU_MAX_THREADS);
    GPU_CHECK(g->gpu_spins_per_tile >= 0 && g->gpu_spins_per_tile <= 32 &&
                  (g->gpu_spins_per_tile & (g->gpu_spins_per_tile - 1)) == 0,
              "options.gpu_spins_per_tile: %d is not 0 (automatic), 1, 2, 4, 8, 16 or 32",
              g->gpu_spins_per_tile);
    GPU_CHECK(g->gpu_max_registers == 0 || g->gpu_max_registers == 64 || g->gpu_max_registers == 128,
              "options.gpu_max_registers: %d is not 0 (automatic), 64 or 128", g->gpu_max_registers);
    GPU_CHECK(g->gpu_blocks_per_sm >= 0 && g->gpu_blocks_per_sm <= 32,
              "options.gpu_blocks_per_sm: %d is outside 0..32", g->gpu_blocks_per_sm);
    GPU_CHECK(g->gpu_grid >= 0 && g->gpu_grid <= 65536, "options.gpu_grid: %d is outside 0..65536",
              g->gpu_grid);
    GPU_CHECK(g->gpu_grid == 0 || g->gpu_blocks_per_sm == 0,
              "options.gpu_grid and options.gpu_blocks_per_sm both given: set one");
    GPU_CHECK(g->batch_team_blocks >= 0 && g->batch_team_blocks <= 65536,
              "options.batch_team_blocks: %d is outside 0..65536", g->batch_team_blocks);
    GPU_CHECK(g->batch_team_barrier >= PS_TEAM_BARRIER_AUTO && g->batch_team_barrier <= PS_TEAM_BARRIER_CLUSTER,
              "options.batch_team_barrier: %d is not 0 (automatic), 1 (range) or 2 (cluster)",
              g->batch_team_barrier);
    GPU_CHECK(g->gpus >= -1 && g->gpus <= PS_GPU_MAX_GPUS,
              "options.gpu->gpus: %d is not -1 (every GPU), 0 or 1 (one) or 2..%d", g->gpus, PS_GPU_MAX_GPUS);
    GPU_CHECK(g->reserved_int == 0, "options.gpu->reserved_int is not zero");
    for (size_t i = 0; i < sizeof g->reserved / sizeof g->reserved[0]; i++)
        GPU_CHECK(g->reserved[i] == 0, "options.gpu->reserved[%zu] is not zero", i);
    return PS_CONVERGED;
}
