/*
 * The batch kernel and its host side (cuda/batch.h). The grid is split
 * into teams of team_blocks blocks; a team's leader (thread 0 of its first
 * block) takes the next problem from the queue, and the team solves it
 * from its stored state with the same phases as a solo solve
 * (solve_phases, cuda/loop.cuh) over its own range barrier (cuda/team.cuh)
 * until it is done or parks (a pause or a yield of that problem, obeyed at
 * a control point as a solo run's yield), stores the state like the solo
 * kernel and posts the exit; then it takes the next. A problem's iterates
 * depend only on the team's shape: the phases index the team's blocks by
 * their rank, exactly as a solo solve on a grid of team_blocks blocks.
 *
 * The queue and the exit records live in mapped host memory: the host
 * writes a problem's index, then releases the tail (one producer); a
 * leader claims an entry by a compare-and-swap of the head in device
 * memory. The leaders look at a copy of the host's words in device
 * memory (queue_seen): at most one leader at a time reads the mapped
 * words, no more often than every PS_GPU_QUEUE_POLL_NS, and publishes
 * them there. (System-scope loads of mapped memory by the idle leaders,
 * each backing off on its own, slowed the teams that solve by up to 12x:
 * README "Batches".) A team with nothing to take waits (backing off) while another
 * team still solves (its problem may come back, paused and resumed), and
 * exits when the queue is empty and no team is busy, or when the host
 * stops the batch (a yield); the host launches again for work that comes
 * later.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/loop.cuh"
#include "cuda/run.cuh"

extern "C" {
#include "common/log.h"
#include "cuda/batch.h"
#include "tune/gpu_options.h"
}

using namespace ps_gpu;

namespace {

/* The host's words in mapped memory. */
struct queue_host {
    unsigned long long tail; /* entries pushed (written by the host only) */
    int stop;                /* 1: take no more problems (the host only) */
    int pad;
};

/* The exit record of a problem in mapped memory (written by the device only). */
struct exit_record {
    unsigned long long count; /* exits so far */
    int reason;               /* PS_GPU_EXIT_* of the last */
    int pad;
};

/* The host's queue words as a leader last read them, in device memory
 * (zeroed before every launch): the leaders read these instead of the
 * mapped words, and one at a time refreshes them (take). */
struct queue_seen {
    unsigned long long tail; /* the host's tail at the last read (only grows) */
    unsigned long long stop; /* 1: the host had stopped the batch */
    unsigned long long when; /* global ns of the last read, claimed by compare-and-swap */
};

/* The least time between two reads of the host's words by the leaders. */
#define PS_GPU_QUEUE_POLL_NS 20000ull

/* The kernel's argument. */
struct batch_args {
    args *probs;               /* [cap] each problem's arguments (device) */
    const queue_host *q;       /* mapped */
    const int *ids;            /* [cap] mapped: the queue's entries */
    exit_record *exits;        /* [cap] mapped */
    unsigned long long *head;  /* entries taken (device) */
    int *active;               /* teams with a problem (device) */
    unsigned *bars;            /* [teams][2] the teams' range barriers (device) */
    int *pick;                 /* [teams] the problem a team took, -1 none (device) */
    int cap, team_blocks;
    int cluster;               /* 1: each team is a thread-block cluster (its phases' barrier) */
    queue_seen *seen;         /* the host's words as a leader last read them (device) */
};

__device__ __forceinline__ unsigned long long load_acquire_sys_u64(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ int load_acquire_sys_s32(const int *p)
{
    int v;
    asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* The leader: post an exit of problem id (its state stored and fenced). */
__device__ inline void post_exit(const batch_args &b, int id, int reason)
{
    volatile exit_record *e = b.exits + id;
    e->reason = reason;
    __threadfence_system();
    e->count = e->count + 1;
    __threadfence_system();
}

/*
 * The leader: the next problem to solve, or -1 (the batch stopped, or
 * nothing queued and no team busy). A problem whose command is pending
 * when it is taken (a pause, yield or cancel that reached it in the queue)
 * is not run: it exits at once as skipped, and the host decides.
 */
__device__ inline int take(const batch_args &b)
{
    unsigned ns = 256u;
    volatile queue_seen *w = b.seen;
    for (;;) {
        if (w->stop)
            return -1;
        const unsigned long long h = *(volatile unsigned long long *)b.head;
        const unsigned long long tail = w->tail;
        __threadfence(); /* the entries below tail were published before it */
        if (h < tail) {
            if (atomicCAS(b.head, h, h + 1) != h)
                continue;
            const int id = load_acquire_sys_s32(b.ids + h % (unsigned long long)b.cap);
            const args *pa = b.probs + id;
            if (host_command(pa->ctl) != PS_GPU_CMD_NONE) {
                post_exit(b, id, PS_GPU_EXIT_SKIPPED);
                continue;
            }
            atomicAdd(b.active, 1);
            /* the count of blocks done with an evaluation starts again (control_watch) */
            pa->cw[PS_GPU_CW_EVAL_DONE] = 0;
            return id;
        }
        /* nothing seen to take: read the host's words if it is time (at
         * once when no team is busy: whether to exit is decided on a
         * fresh read), one leader at a time */
        const unsigned long long now = global_ns(), last = w->when;
        const bool idle = *(volatile int *)b.active == 0;
        if ((idle || now - last >= PS_GPU_QUEUE_POLL_NS) &&
            atomicCAS(&b.seen->when, last, now) == last) {
            const unsigned long long t = load_acquire_sys_u64(&b.q->tail);
            const int stop = load_acquire_sys_s32(&b.q->stop);
            __threadfence(); /* the entries before the tail's copy */
            atomicMax(&b.seen->tail, t);
            if (stop)
                w->stop = 1;
            __threadfence();
            if (idle && t <= h && !stop)
                return -1;
            continue;
        }
        __nanosleep(ns);
        if (ns < 32000u)
            ns *= 2u;
    }
}

/* The team's barrier while its leader looks for a problem (which may take
 * long): the waiting blocks sleep between looks, leaving the SM's issue
 * slots to the teams that solve. */
__device__ inline void idle_barrier(unsigned *bar, int n)
{
    const unsigned gen = range_arrive(bar, n);
    if (threadIdx.x == 0) {
        unsigned ns = 128u;
        while (load_acquire_gpu(bar + 1) == gen) {
            __nanosleep(ns);
            if (ns < 4096u)
                ns *= 2u;
        }
    }
    __syncthreads();
}

/* The team's solve of its problem in A, from the stored state; 1 if it
 * parked. t0: the solve's clock (global ns at its start, moved by pauses). */
template <typename R, int NCH, int DG>
__device__ __forceinline__ int solve_problem(const args &A, cg::grid_group &grid, loop_shared &L, char *smem, uint64_t &t0)
{
    uint64_t last = t0;
    return solve_phases<R, NCH, DG>(A, grid, L, smem, t0, last, A.t_base, false);
}

/*
 * The kernel paths: a problem's kernel class (ps_gpu_kernel_class; its
 * PS_GPU_CLASS_BASE: the batch runs the general spin loops) as (NCH, DG)
 * of the solo kernels, numbered 2 * (0 | 1 | 2 for NCH 0, 1, 8) + DG. A batch kernel built for one path (KP >= 0) holds that path's
 * phases alone, as lean as the solo kernel's; the mixed kernel (KP = -1)
 * holds all six and takes any problem (its register allocation is the
 * largest of them, so it spills more).
 */
#define PATH_NCH(kp) ((kp) / 2 == 0 ? 0 : (kp) / 2 == 1 ? 1 : 8)
#define PATH_DG(kp) ((kp) % 2)
enum { N_PATHS = 6 };

__host__ __device__ inline int path_of_class(int kclass)
{
    const int ch = PS_GPU_CLASS_CHANNELS(kclass);
    return 2 * (ch == 0 ? 0 : ch == 8 ? 2 : 1) + ((kclass & PS_GPU_DESIGNED) ? 1 : 0);
}

template <typename R, int KP>
__global__ void __launch_bounds__(PS_GPU_MAX_THREADS, 1) batch_kernel(batch_args b)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ __align__(16) char smem[];
    __shared__ loop_shared L;
    __shared__ args A;
    __shared__ int pid;
    const int B = b.team_blocks, team = (int)blockIdx.x / B, team0 = team * B;
    if (team0 + B > (int)gridDim.x)
        return; /* blocks beyond the last whole team */
    const bool lead = (int)blockIdx.x == team0;
    unsigned *bar = b.bars + 2 * team;
    static_assert(sizeof(args) % sizeof(unsigned long long) == 0, "args is not 8-byte sized");
    for (;;) {
        // ---- the leader takes a problem; the team learns which ----
        if (lead && threadIdx.x == 0)
            *(volatile int *)&b.pick[team] = take(b);
        idle_barrier(bar, B);
        if (threadIdx.x == 0)
            pid = *(volatile int *)&b.pick[team];
        __syncthreads();
        const int id = pid;
        if (id < 0)
            break;

        // ---- every block: the problem's arguments as its team's, in shared
        // memory (a copy per thread would take registers the phases need) ----
        {
            const unsigned long long *src = (const unsigned long long *)(b.probs + id);
            unsigned long long *dst = (unsigned long long *)&A;
            for (int i = threadIdx.x; i < (int)(sizeof(args) / 8); i += blockDim.x)
                dst[i] = src[i];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            A.team0 = team0;
            A.tbar = bar;
            A.tcluster = b.cluster;
            A.controller = team0 + B - 1;
            A.batch = 1;
            A.t_base = A.eval_out[0]; /* solve seconds so far */
            A.ft_in = A.eval_out[1];  /* f at the accepted trial (a state in UPDATE) */
        }
        __syncthreads();
        state_copy(&L.S, A.state);
        if (threadIdx.x == 0) {
            L.ft = A.ft_in;
            L.cmd = PS_GPU_CMD_NONE;
            L.nev = 0;
            L.acked = 0;
            L.gen = *(volatile unsigned long long *)&A.cw[PS_GPU_CW_RELEASE] >> 3;
        }
        __syncthreads();

        // ---- the phases (cuda/loop.cuh), the kernel class of the problem ----
        const int channels = PS_GPU_CLASS_CHANNELS(A.kclass);
        const bool designed = (A.kclass & PS_GPU_DESIGNED) != 0;
        uint64_t t0 = global_ns() - (uint64_t)(A.t_base * 1e9);
        int parked;
        if (KP >= 0) /* the host queues only problems of this path (ps_gpu_batch_path) */
            parked = solve_problem<R, PATH_NCH(KP < 0 ? 0 : KP), PATH_DG(KP < 0 ? 0 : KP)>(A, grid, L, smem, t0);
        else if (channels == 8)
            parked = designed ? solve_problem<R, 8, 1>(A, grid, L, smem, t0)
                              : solve_problem<R, 8, 0>(A, grid, L, smem, t0);
        else if (channels)
            parked = designed ? solve_problem<R, 1, 1>(A, grid, L, smem, t0)
                              : solve_problem<R, 1, 0>(A, grid, L, smem, t0);
        else
            parked = designed ? solve_problem<R, 0, 1>(A, grid, L, smem, t0)
                              : solve_problem<R, 0, 0>(A, grid, L, smem, t0);

        // ---- the state back, as the solo kernel leaves it; then the exit ----
        if (lead) {
            state_copy(A.state, &L.S);
            if (threadIdx.x == 0) {
                A.eval_out[0] = (double)(global_ns() - t0) * 1e-9; /* solve seconds so far */
                A.eval_out[1] = L.ft;
            }
        }
        range_wait(bar, range_arrive(bar, B)); /* no block reads the problem's data any more */
        if (lead && threadIdx.x == 0) {
            __threadfence_system();
            post_exit(b, id, parked ? PS_GPU_EXIT_PARKED : PS_GPU_EXIT_FINISHED);
            atomicSub(b.active, 1);
        }
    }
}

} // namespace

struct ps_gpu_batch {
    ps_options o;
    int precision, block, team_blocks, teams, cap;
    int cluster;            /* 1: the teams are thread-block clusters (batch_shape) */
    size_t smem;
    queue_host *q;          /* mapped (host address) */
    int *ids;               /* mapped [cap] */
    exit_record *exits;     /* mapped [cap] */
    batch_args ka;          /* the kernel's argument (device addresses) */
    args *d_args;           /* [cap] each problem's arguments (device), allocated with the
                             * batch: no allocation while the kernel runs (context.cu) */
    void *d_words;          /* head, active, bars, pick */
    timed_stream ks;
    cudaStream_t copies;
    int launched;
    int path;               /* the path of the last launch (-1: mixed) */
    double kernel_seconds;
};

template <typename R> static void *kernel_of_path(int path)
{
    switch (path) {
    case 0: return (void *)batch_kernel<R, 0>;
    case 1: return (void *)batch_kernel<R, 1>;
    case 2: return (void *)batch_kernel<R, 2>;
    case 3: return (void *)batch_kernel<R, 3>;
    case 4: return (void *)batch_kernel<R, 4>;
    case 5: return (void *)batch_kernel<R, 5>;
    default: return (void *)batch_kernel<R, -1>;
    }
}

/* The batch kernel of a path (-1: the mixed kernel). */
static void *batch_kernel_ptr(int precision, int path = -1)
{
    return precision == PS_PRECISION_DOUBLE ? kernel_of_path<double>(path) : kernel_of_path<float>(path);
}

extern "C" int ps_gpu_batch_blocks_per_sm(int precision, int block, size_t smem)
{
    int bps = 0;
    void *k = batch_kernel_ptr(precision);
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, block, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return bps;
}

/* The most clusters of team_blocks blocks that are co-resident (0: none,
 * or no clusters on this device). */
static int max_clusters(int precision, int block, int team_blocks, size_t smem, int grid)
{
    int n = 0;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)team_blocks;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)block);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&n, batch_kernel_ptr(precision), &cfg) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/*
 * The kernel's shape for blocks of `block` threads with at least `smem`
 * bytes of dynamic shared memory: *smem_out, the most a block may have at
 * the same blocks per SM (no more than the opt-in limit leaves beside the
 * static part: a larger request is an API error, not a 0), *teams of
 * team_blocks blocks that are co-resident, and *cluster: whether the
 * teams are thread-block clusters (options.batch_team_barrier; clusters
 * of 2..8 blocks, as many teams as whole clusters fit, which the GPCs'
 * sizes may make fewer than the blocks allow).
 */
static int batch_shape(const ps_options *o, int precision, int block, int team_blocks, size_t smem,
                       size_t *smem_out, int *teams, int *cluster)
{
    int st = PS_CONVERGED, sms = 0, optin = 0, dev = 0;
    cudaFuncAttributes fa;
    cudaGetDevice(&dev);
    CUDA_TRY(o, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), PS_ERR_NO_GPU);
    CUDA_TRY(o, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), PS_ERR_NO_GPU);
    CUDA_TRY(o, cudaFuncGetAttributes(&fa, batch_kernel_ptr(precision)), PS_ERR_GPU_LAUNCH);
    {
        const int bps = ps_gpu_batch_blocks_per_sm(precision, block, smem);
        PS_RETURN_ERROR_IF(o, bps < 1, PS_ERR_GPU_LAUNCH,
                           "a batch block of %d threads with %zu bytes of shared memory does not fit on an SM",
                           block, smem);
        size_t lo = smem, hi = (size_t)optin - fa.sharedSizeBytes;
        while (hi > lo + 256) {
            const size_t mid = (lo + hi) / 2 & ~(size_t)15;
            if (ps_gpu_batch_blocks_per_sm(precision, block, mid) >= bps)
                lo = mid;
            else
                hi = mid;
        }
        *smem_out = lo;
        *teams = bps * sms / team_blocks;
        PS_RETURN_ERROR_IF(o, *teams < 1, PS_ERR_GPU_LAUNCH,
                           "a batch team of %d blocks exceeds the %d co-resident blocks (%d per SM)", team_blocks,
                           bps * sms, bps);
    }
    *cluster = 0;
    if (ps_gpu_options_of(o)->batch_team_barrier == PS_TEAM_BARRIER_CLUSTER) {
        PS_RETURN_ERROR_IF(o, !ps_gpu_cluster_team_ok(team_blocks), PS_ERR_OPTION,
                           "options.batch_team_barrier: a team of %d blocks cannot be a thread-block cluster "
                           "(2..%d blocks)",
                           team_blocks, PS_GPU_CLUSTER_MAX_BLOCKS);
        const int nc = max_clusters(precision, block, team_blocks, *smem_out, *teams * team_blocks);
        PS_RETURN_ERROR_IF(o, nc < 1, PS_ERR_GPU_LAUNCH,
                           "options.batch_team_barrier: no cluster of %d blocks of %d threads fits on this GPU",
                           team_blocks, block);
        if (nc < *teams)
            *teams = nc;
        *cluster = 1;
    }
out:
    return st;
}

extern "C" int ps_gpu_batch_create(const ps_options *o, int precision, int block, int team_blocks, size_t smem,
                                   int cap, ps_gpu_batch **out)
{
    int st = PS_CONVERGED, teams = 0;
    size_t smem_out = 0;
    *out = NULL;
    int cluster = 0;
    if ((st = batch_shape(o, precision, block, team_blocks, smem, &smem_out, &teams, &cluster)))
        return st;
    ps_gpu_batch *b = (ps_gpu_batch *)calloc(1, sizeof *b);
    if (!b)
        return PS_ERR_NO_MEMORY;
    b->o = *o;
    b->precision = precision;
    b->block = block;
    b->team_blocks = team_blocks;
    b->cluster = cluster;
    b->cap = cap;
    b->smem = smem_out;
    b->teams = teams;
    CUDA_TRY(o, cudaHostAlloc((void **)&b->q, sizeof(queue_host), cudaHostAllocMapped), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaHostAlloc((void **)&b->ids, (size_t)cap * sizeof(int), cudaHostAllocMapped), PS_ERR_GPU_MEMORY);
    CUDA_TRY(o, cudaHostAlloc((void **)&b->exits, (size_t)cap * sizeof(exit_record), cudaHostAllocMapped),
             PS_ERR_GPU_MEMORY);
    memset(b->q, 0, sizeof(queue_host));
    memset(b->ids, 0, (size_t)cap * sizeof(int));
    memset(b->exits, 0, (size_t)cap * sizeof(exit_record));
    {
        const size_t words = sizeof(queue_seen) + sizeof(unsigned long long) + sizeof(int) +
                             (size_t)b->teams * (2 * sizeof(unsigned) + sizeof(int));
        CUDA_TRY(o, cudaMalloc(&b->d_words, words), PS_ERR_GPU_MEMORY);
        CUDA_TRY(o, cudaMemset(b->d_words, 0, words), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaMalloc((void **)&b->d_args, (size_t)cap * sizeof(args)), PS_ERR_GPU_MEMORY);
        char *w = (char *)b->d_words;
        batch_args &ka = b->ka;
        ka.probs = b->d_args;
        CUDA_TRY(o, cudaHostGetDevicePointer((void **)&ka.q, b->q, 0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaHostGetDevicePointer((void **)&ka.ids, b->ids, 0), PS_ERR_GPU_LAUNCH);
        CUDA_TRY(o, cudaHostGetDevicePointer((void **)&ka.exits, b->exits, 0), PS_ERR_GPU_LAUNCH);
        ka.seen = (queue_seen *)w;
        w += sizeof(queue_seen);
        ka.head = (unsigned long long *)w;
        ka.active = (int *)(w + sizeof(unsigned long long));
        ka.bars = (unsigned *)(w + sizeof(unsigned long long) + sizeof(int));
        ka.pick = (int *)(ka.bars + 2 * (size_t)b->teams);
        ka.cap = cap;
        ka.team_blocks = team_blocks;
        ka.cluster = cluster;
    }
    st = timed_stream_create(&b->ks, o);
    if (st)
        goto out;
    CUDA_TRY(o, cudaStreamCreateWithFlags(&b->copies, cudaStreamNonBlocking), PS_ERR_GPU_LAUNCH);
    *out = b;
    return PS_CONVERGED;
out:
    ps_gpu_batch_free(b);
    return st;
}

extern "C" void ps_gpu_batch_free(ps_gpu_batch *b)
{
    if (!b)
        return;
    if (__atomic_load_n(&b->launched, __ATOMIC_ACQUIRE))
        cudaStreamSynchronize(b->ks.s);
    timed_stream_destroy(&b->ks);
    if (b->copies)
        cudaStreamDestroy(b->copies);
    cudaFree(b->d_args);
    cudaFree(b->d_words);
    if (b->q)
        cudaFreeHost(b->q);
    if (b->ids)
        cudaFreeHost(b->ids);
    if (b->exits)
        cudaFreeHost(b->exits);
    cudaGetLastError();
    free(b);
}

extern "C" int ps_gpu_batch_teams(const ps_gpu_batch *b)
{
    return b->teams;
}

extern "C" size_t ps_gpu_batch_smem(const ps_gpu_batch *b)
{
    return b->smem;
}

extern "C" int ps_gpu_batch_barrier(const ps_gpu_batch *b)
{
    return b->cluster ? PS_TEAM_BARRIER_CLUSTER : PS_TEAM_BARRIER_RANGE;
}

extern "C" int ps_gpu_batch_attach(ps_gpu_batch *b, int index, ps_gpu_run *g)
{
    int st = PS_CONVERGED;
    const ps_options *o = &b->o;
    const context &c = g->c;
    args a = c.a;
    double resume[2] = {a.t_base, a.ft_in};
    PS_RETURN_ERROR_IF(o, index < 0 || index >= b->cap, PS_ERR_SIZE, "batch problem %d of at most %d", index,
                       b->cap);
    PS_RETURN_ERROR_IF(o, c.cfg.block != b->block || c.cfg.grid != b->team_blocks || c.cfg.regcap ||
                              c.precision != b->precision,
                       PS_ERR_STATE, "batch problem %d was set up for another team shape", index);
    PS_RETURN_ERROR_IF(o, c.smem > b->smem, PS_ERR_SIZE,
                       "batch problem %d needs %zu bytes of shared memory a block; the batch's blocks have %zu",
                       index, c.smem, b->smem);
    CUDA_TRY(o, cudaMemcpyAsync(b->d_args + index, &a, sizeof(args), cudaMemcpyHostToDevice, b->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemcpyAsync(a.eval_out, resume, sizeof resume, cudaMemcpyHostToDevice, b->copies),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaStreamSynchronize(b->copies), PS_ERR_GPU_LAUNCH);
out:
    return st;
}

extern "C" void ps_gpu_batch_push(ps_gpu_batch *b, int index)
{
    const unsigned long long t = __atomic_load_n(&b->q->tail, __ATOMIC_RELAXED);
    __atomic_store_n(&b->ids[t % (unsigned long long)b->cap], index, __ATOMIC_RELAXED);
    __atomic_store_n(&b->q->tail, t + 1, __ATOMIC_RELEASE);
}

extern "C" void ps_gpu_batch_stop(ps_gpu_batch *b, int stop)
{
    __atomic_store_n(&b->q->stop, stop, __ATOMIC_RELEASE);
}

extern "C" int ps_gpu_batch_path(const ps_gpu_run *g)
{
    return path_of_class(g->c.kclass);
}

extern "C" int ps_gpu_batch_launched_path(const ps_gpu_batch *b)
{
    return b->path;
}

extern "C" int ps_gpu_batch_launch(ps_gpu_batch *b, int path)
{
    int st = PS_CONVERGED;
    const ps_options *o = &b->o;
    void *k = batch_kernel_ptr(b->precision, path);
    b->path = path;
    void *params[] = {&b->ka};
    CUDA_TRY(o, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b->smem),
             PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaMemsetAsync(b->ka.seen, 0, sizeof(queue_seen), b->ks.s), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventRecord(b->ks.ev0, b->ks.s), PS_ERR_GPU_LAUNCH);
    __atomic_store_n(&b->launched, 1, __ATOMIC_RELEASE);
    {
        /* cooperative (every block co-resident), the teams as clusters or not */
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[2];
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        at[1].id = cudaLaunchAttributeClusterDimension;
        at[1].val.clusterDim.x = (unsigned)b->team_blocks;
        at[1].val.clusterDim.y = 1;
        at[1].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)(b->teams * b->team_blocks));
        cfg.blockDim = dim3((unsigned)b->block);
        cfg.dynamicSmemBytes = b->smem;
        cfg.stream = b->ks.s;
        cfg.attrs = at;
        cfg.numAttrs = b->cluster ? 2 : 1;
        CUDA_TRY(o, cudaLaunchKernelExC(&cfg, k, params), PS_ERR_GPU_LAUNCH);
    }
    CUDA_TRY(o, cudaEventRecord(b->ks.ev1, b->ks.s), PS_ERR_GPU_LAUNCH);
    return PS_CONVERGED;
out:
    __atomic_store_n(&b->launched, 0, __ATOMIC_RELEASE);
    return st;
}

extern "C" int ps_gpu_batch_running(ps_gpu_batch *b)
{
    if (!__atomic_load_n(&b->launched, __ATOMIC_ACQUIRE))
        return 0;
    const cudaError_t e = cudaEventQuery(b->ks.ev1);
    if (e == cudaErrorNotReady)
        return 1;
    if (e != cudaSuccess) {
        ps_log(&b->o, PS_LOG_ERROR, __FILE__, __LINE__, "batch kernel: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return PS_ERR_GPU_LAUNCH;
    }
    return 0;
}

extern "C" int ps_gpu_batch_sync(ps_gpu_batch *b)
{
    int st = PS_CONVERGED;
    const ps_options *o = &b->o;
    double ms = 0.0;
    if (!__atomic_load_n(&b->launched, __ATOMIC_ACQUIRE))
        return PS_CONVERGED;
    CUDA_TRY(o, cudaEventSynchronize(b->ks.ev1), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, event_ms(b->ks.ev0, b->ks.ev1, &ms), PS_ERR_GPU_LAUNCH);
    b->kernel_seconds += 1e-3 * ms;
out:
    __atomic_store_n(&b->launched, 0, __ATOMIC_RELEASE);
    return st;
}

extern "C" uint64_t ps_gpu_batch_exit(const ps_gpu_batch *b, int index, int *reason)
{
    const exit_record *e = b->exits + index;
    const uint64_t n = __atomic_load_n(&e->count, __ATOMIC_ACQUIRE);
    *reason = __atomic_load_n(&e->reason, __ATOMIC_RELAXED);
    return n;
}

extern "C" double ps_gpu_batch_kernel_seconds(const ps_gpu_batch *b)
{
    return b->kernel_seconds;
}
