/*
 * The barrier of a team of blocks (args.team0, nteam, tbar, tcluster): the
 * whole cooperative grid in a solo solve (grid.sync()), a range of its
 * blocks in a batch (cuda/batch.cu), where each team solves its own
 * problem and waits only for its own blocks: a barrier over the range in
 * device memory (below), or, where the batch's teams are thread-block
 * clusters, the cluster's hardware barrier (cluster.sync(): release and
 * acquire at cluster scope, which holds every block of the team).
 *
 * The range barrier is two words in device memory: the arrivals and a
 * generation. Thread 0 of each block takes the generation, publishes its
 * block's writes (__threadfence) and arrives; the last to arrive resets
 * the count and releases the next generation; the others wait for it
 * with acquire loads, then release their block. The words return to
 * (0, g + 1) after every barrier, so they serve any number of barriers
 * and launches.
 */
#ifndef PS_SRC_CUDA_TEAM_CUH
#define PS_SRC_CUDA_TEAM_CUH

#include <cooperative_groups.h>

#include "cuda/args.cuh"

namespace ps_gpu {

namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_release_gpu(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Every thread of the block: arrive at the barrier of the n blocks sharing
 * bar. Returns (in thread 0) the generation team_wait waits past. */
__device__ __forceinline__ unsigned range_arrive(unsigned *bar, int n)
{
    __syncthreads();
    unsigned gen = 0;
    if (threadIdx.x == 0) {
        gen = load_acquire_gpu(bar + 1);
        __threadfence();
        if (atomicAdd(bar, 1u) == (unsigned)n - 1u) {
            atomicExch(bar, 0u);
            __threadfence();
            store_release_gpu(bar + 1, gen + 1u);
        }
    }
    return gen;
}

/* Every thread of the block: wait until the n blocks have arrived. */
__device__ __forceinline__ void range_wait(unsigned *bar, unsigned gen)
{
    if (threadIdx.x == 0)
        while (load_acquire_gpu(bar + 1) == gen)
            ;
    __syncthreads();
}

/* The team's barrier, split (the arrival token of a grid barrier, or the
 * generation of a range barrier). */
struct team_token {
    cg::grid_group::arrival_token grid;
    cg::cluster_group::arrival_token cluster;
    unsigned gen;
};

__device__ __forceinline__ team_token team_arrive(const args &a, cg::grid_group &grid)
{
    team_token t;
    if (a.tcluster)
        t.cluster = cg::this_cluster().barrier_arrive();
    else if (a.tbar)
        t.gen = range_arrive(a.tbar, a.nteam);
    else
        t.grid = grid.barrier_arrive();
    return t;
}

__device__ __forceinline__ void team_wait(const args &a, cg::grid_group &grid, team_token &t)
{
    if (a.tcluster)
        cg::this_cluster().barrier_wait(std::move(t.cluster));
    else if (a.tbar)
        range_wait(a.tbar, t.gen);
    else
        grid.barrier_wait(std::move(t.grid));
}

/* The team's barrier: every block of the team has arrived, and its writes
 * before it are visible to every thread of the team after it. */
__device__ __forceinline__ void team_sync(const args &a, cg::grid_group &grid)
{
    if (a.tcluster)
        cg::this_cluster().sync();
    else if (a.tbar)
        range_wait(a.tbar, range_arrive(a.tbar, a.nteam));
    else
        grid.sync();
}

} // namespace ps_gpu

#endif /* PS_SRC_CUDA_TEAM_CUH */
