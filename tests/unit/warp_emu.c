/*
 * The warp form of opt/lbfgs_warp.h run on the host, for test_direction.c in
 * the unit suite (machines without a GPU): 32 threads are the lanes; a
 * shuffle is a store, a barrier, a load and a barrier; a warp barrier is a
 * barrier. A lane that skips a collective the others reach (undefined on
 * the GPU) hangs the test. What this cannot show is the GPU's code: that
 * is the gpu suite's gpu_direction.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct emu_lanes {
    pthread_barrier_t bar;
    uint64_t w[32];
} emu_lanes;

static emu_lanes emu;
static _Thread_local int emu_lane;

static void emu_sync(void)
{
    pthread_barrier_wait(&emu.bar);
}

/* lane src's 64 bits, to every lane */
static uint64_t emu_shfl_bits(uint64_t v, int src)
{
    emu.w[emu_lane] = v;
    emu_sync();
    uint64_t r = emu.w[src];
    emu_sync();
    return r;
}

static double emu_shfl_d(double v, int src)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    b = emu_shfl_bits(b, src);
    memcpy(&v, &b, sizeof v);
    return v;
}

static int emu_shfl_i(int v, int src)
{
    return (int)(int64_t)emu_shfl_bits((uint64_t)(int64_t)v, src);
}

#define PS_WARP_EMULATION 1
#define PS_LANE() emu_lane
#define PS_SHFL(v, src) _Generic((v), double: emu_shfl_d, int: emu_shfl_i)((v), (src))
#define PS_SYNCWARP() emu_sync()
#include "opt/solver.h"
#include "unit/warp_direction.h"

typedef struct emu_job {
    int lane, n, what; /* what 0: direction, 1: update */
    ps_solver *states;
    const double *arg, *red;
} emu_job;

static void *emu_lane_main(void *arg)
{
    const emu_job *j = arg;
    emu_lane = j->lane;
    for (int i = 0; i < j->n; i++) {
        if (j->what == 0)
            ps_solver_direction_warp(&j->states[i], j->arg[i]);
        else
            ps_solver_update_warp(&j->states[i], j->arg[i], j->red + (size_t)i * TD_RED);
        emu_sync(); /* the block's barrier after the decision */
    }
    return NULL;
}

static int run(ps_solver *states, const double *arg, const double *red, int n, int what)
{
    pthread_t th[32];
    emu_job jobs[32];
    int started = 0;
    if (pthread_barrier_init(&emu.bar, NULL, 32) != 0) {
        printf("warp emulation: no barrier\n");
        return -1;
    }
    for (; started < 32; started++) {
        jobs[started] = (emu_job){started, n, what, states, arg, red};
        if (pthread_create(&th[started], NULL, emu_lane_main, &jobs[started]) != 0)
            break;
    }
    if (started < 32) {
        /* the lanes started cannot pass a barrier of 32: nothing to save */
        printf("warp emulation: %d of 32 threads started\n", started);
        return -1;
    }
    for (int l = 0; l < 32; l++)
        pthread_join(th[l], NULL);
    pthread_barrier_destroy(&emu.bar);
    return 0;
}

int td_direction_warp(ps_solver *states, const double *elapsed, int n)
{
    return run(states, elapsed, NULL, n, 0);
}

int td_update_warp(ps_solver *states, const double *f, const double *red, int n)
{
    return run(states, f, red, n, 1);
}
