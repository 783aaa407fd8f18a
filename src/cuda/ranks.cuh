/*
 * Several GPUs on one problem, the device side (cuda/ranks.h has the
 * host's): the problem's spins are split into contiguous shares, one per
 * rank; each rank runs the whole persistent kernel on its share, holds the
 * whole optimizer state and takes the same decisions from the same reduced
 * values. Per evaluation the ranks exchange one row each:
 *
 *   rank_rows      every block of a rank: element i of the rank's row is
 *                  the sum over its blocks of their partials (block order),
 *                  i < n the gradient's, n the loss, n + 1 rank 0's host
 *                  command, n + 2 rank 0's solve seconds (the time limit
 *                  on one clock); the row is stored into its slot of every
 *                  rank's window (NCCL: through the LSA pointers of the
 *                  window, NVLink stores; ranks on one device: one buffer)
 *   rank_barrier   grid barrier, block 0 meets the other ranks' (NCCL's
 *                  LSA barrier, or a barrier word in device memory), grid
 *                  barrier: every row of every rank is in this rank's
 *                  window
 *   (then reduce_gradient sums the rows in rank order, instead of the
 *   blocks' partials, and applies the design's chain rules: the same
 *   gradient bits on every rank, and the same bits run to run)
 *
 * Rows alternate between two halves of the window by the parity of the
 * exchange count (seq), so that a rank that has gone on to the next
 * exchange never overwrites a row another rank still reads: it cannot
 * pass that exchange's barrier before every rank has arrived, that is,
 * before every rank is done reading the previous one.
 *
 * Control: the host writes commands to rank 0 alone. Its command at a
 * control point rides in its row, so that every rank obeys the same
 * command at the same control point; while paused, rank 0's controller
 * releases the others through their release words (the command that
 * ended the pause, with the pause's generation). One GPU (rk.on 0) does
 * none of this: the kernel is exactly the one-GPU kernel.
 */
#ifndef PS_SRC_CUDA_RANKS_CUH
#define PS_SRC_CUDA_RANKS_CUH

#include <cooperative_groups.h>

#include "cuda/args.cuh"
#include "cuda/team.cuh"

extern "C" {
#include "cuda/ranks.h"
}

#if PS_HAVE_NCCL_DEVICE
#include <nccl_device.h>
#endif

namespace ps_gpu {

namespace cg = cooperative_groups;

/* The partial rows that reduce_gradient sums: the blocks' (one GPU), or
 * the ranks' rows of an exchange. Row b's gradient element i is
 * g[b stride + i], its loss loss[b lstride]. */
struct partial_rows {
    const double *g;
    size_t stride;
    int count;
    const double *loss;
    size_t lstride;
};

/* The blocks' partials of this rank's evaluation. */
__device__ __forceinline__ partial_rows block_rows(const args &a)
{
    return partial_rows{a.gpart, (size_t)a.n, a.nteam, a.lpart, 1};
}

/* Element e of rank q's row in half h of the window of rank `to`. */
__device__ __forceinline__ double *rank_slot(const ranks_dev &rk, int to, unsigned h, int q, int e)
{
    const size_t off = ((size_t)h * rk.n + q) * rk.stride + e;
#if PS_HAVE_NCCL_DEVICE
    if (rk.nccl)
        return (double *)ncclGetLsaPointer((ncclWindow_t)rk.win, off * sizeof(double), to);
#endif
    (void)to;
    return rk.rows + off;
}

/* Rank `to`'s release word (after the rows of the window). */
__device__ __forceinline__ unsigned long long *rank_release(const ranks_dev &rk, int to)
{
    const size_t off = (size_t)2 * rk.n * rk.stride + (size_t)to;
#if PS_HAVE_NCCL_DEVICE
    if (rk.nccl)
        return (unsigned long long *)ncclGetLsaPointer((ncclWindow_t)rk.win, off * sizeof(double), to);
#endif
    return (unsigned long long *)(rk.rows + off);
}

/* Store v into element e of this rank's row in every rank's window (one
 * store where the ranks share the device's buffer). */
__device__ __forceinline__ void rank_push(const ranks_dev &rk, unsigned h, int e, double v)
{
    if (!rk.nccl) {
        *rank_slot(rk, rk.rank, h, rk.rank, e) = v;
        return;
    }
    for (int to = 0; to < rk.n; to++)
        *rank_slot(rk, to, h, rk.rank, e) = v;
}

/* What the exchange takes from the kernel, and gives back: an out-of-line
 * call with no access to the kernel's args, so that its code leaves the
 * kernel's own register allocation (the evaluation's) as it is. */
struct rank_call {
    ranks_dev rk;
    const double *gpart, *lpart; /* this rank's blocks' partials, [G][n] and [G] */
    int n, G;                    /* unknowns, blocks */
    int ctrl;                    /* 1 in the control thread */
    int cmd;                     /* in: the control thread's command; out: rank 0's */
    unsigned long long t0;       /* the solve's start (global ns), for rank 0's seconds */
    const double *rows;          /* out: the rows of the exchange, rank 0's first */
};

/*
 * ---- this rank's row (every block) ----
 * Element i < n: the sum of the blocks' partial gradients at i in block
 * order; n: the sum of their losses; n + 1: rank 0's command (from its
 * control thread); n + 2: rank 0's solve seconds (block 0, from t0):
 * every rank's time limit is decided on rank 0's clock. Returns the half
 * h of the exchange.
 */
__device__ inline unsigned rank_rows(const rank_call &c)
{
    const ranks_dev &rk = c.rk;
    const unsigned h = *(volatile unsigned *)rk.seq & 1u;
    const int n = c.n, G = c.G;
    for (int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x; i <= n; i += G * (int)blockDim.x) {
        double s = 0.0;
        if (i < n)
            for (int b = 0; b < G; b++)
                s += c.gpart[(size_t)b * n + i];
        else
            for (int b = 0; b < G; b++)
                s += c.lpart[b];
        rank_push(rk, h, i, s);
    }
    if (c.ctrl && rk.rank == 0)
        rank_push(rk, h, n + 1, (double)c.cmd);
    if (blockIdx.x == 0 && threadIdx.x == 0 && rk.rank == 0)
        rank_push(rk, h, n + 2, (double)(global_ns() - c.t0) * 1e-9);
    __threadfence_system(); /* the row, also in the peers' memory, before the barrier */
    return h;
}

/* Block 0: wait until every rank's block 0 has arrived (after its grid's
 * barrier: every row complete). */
__device__ inline void ranks_meet(const ranks_dev &rk)
{
#if PS_HAVE_NCCL_DEVICE
    if (rk.nccl) {
        const ncclDevComm &dc = *(const ncclDevComm *)rk.dcomm;
        ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, 0);
        bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
        return;
    }
#endif
    range_wait(rk.bar, range_arrive(rk.bar, rk.n));
}

/*
 * ---- the exchange (every block of every rank; a solo grid) ----
 * This rank's row into every window, the ranks' barrier, then in c->rows
 * the rows of half h for reduce_gradient; the control thread's c->cmd
 * becomes rank 0's command. Two grid barriers and the ranks'.
 */
static __device__ __noinline__ void rank_exchange_call(rank_call *c)
{
    cg::grid_group grid = cg::this_grid();
    const unsigned h = rank_rows(*c);
    grid.sync();
    if (blockIdx.x == 0) {
        ranks_meet(c->rk);
        if (threadIdx.x == 0) /* every block has read seq (before the barrier above) */
            *(volatile unsigned *)c->rk.seq += 1u;
    }
    grid.sync();
    c->rows = rank_slot(c->rk, c->rk.rank, h, 0, 0); /* this rank's window: local */
    if (c->ctrl)
        c->cmd = (int)c->rows[c->n + 1];
}

/* The exchange from the kernel: the rows for reduce_gradient (row 0's
 * element n + 2 rank 0's seconds); *cmd as in rank_exchange_call. */
__device__ __forceinline__ partial_rows rank_exchange(const args &a, bool ctrl, int *cmd, uint64_t t0)
{
    rank_call c;
    c.rk = a.rk;
    c.gpart = a.gpart;
    c.lpart = a.lpart;
    c.n = a.n;
    c.G = a.nteam;
    c.ctrl = ctrl;
    c.cmd = *cmd;
    c.t0 = t0;
    rank_exchange_call(&c);
    *cmd = c.cmd;
    return partial_rows{c.rows, (size_t)a.rk.stride, a.rk.n, c.rows + a.n, (size_t)a.rk.stride};
}

/*
 * ---- the end of a pause (the controller's waiting thread) ----
 * Rank 0: the command c that ended pause number gen goes to every other
 * rank's release word. The others: wait for it there (their own host
 * command is never written) and return it.
 */
__device__ __forceinline__ void ranks_release(const ranks_dev &rk, unsigned long long gen, int c)
{
    for (int to = 1; to < rk.n; to++) {
        unsigned long long *w = rank_release(rk, to);
        asm volatile("st.release.sys.b64 [%0], %1;" ::"l"(w), "l"(gen << 3 | (unsigned long long)c) : "memory");
    }
}

__device__ __forceinline__ unsigned long long ranks_release_load(const ranks_dev &rk)
{
    unsigned long long v;
    asm volatile("ld.acquire.sys.b64 %0, [%1];" : "=l"(v) : "l"(rank_release(rk, rk.rank)) : "memory");
    return v;
}

} // namespace ps_gpu

/* The kernel's view of rank r of exchange x (args.rk; seq: the rank's
 * exchange count in its device memory). */
void ps_gpu_ranks_view(const ps_gpu_ranks *x, int r, unsigned *seq, ps_gpu::ranks_dev *out);

#endif /* PS_SRC_CUDA_RANKS_CUH */
