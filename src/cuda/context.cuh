/*
 * A problem and a start point set up on the device for one GPU run: the
 * buffers of the args struct (cuda/phases.cuh), the resolved launch shape
 * and the solver state in its START phase. Shared by the persistent kernel
 * (cuda/solve.cu) and the comparison variants (cuda/variants.cu), so that
 * all of them run on identical data with an identical launch shape.
 */
#ifndef PS_SRC_GPU_CONTEXT_CUH
#define PS_SRC_GPU_CONTEXT_CUH

#include <cuda_runtime.h>

#include "cuda/launch.h"
#include "cuda/phases.cuh"

extern "C" {
#include "common/clock.h"
#include "common/log.h"
}

/*
 * Inside a function with `int st` and an `out:` label: on a CUDA error,
 * log the call and its error, set st = status and jump to out.
 */
#define CUDA_TRY(o, call, status)                                                          \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            ps_log((o), PS_LOG_ERROR, __FILE__, __LINE__, "%s: %s", #call,                 \
                   cudaGetErrorString(e_));                                                \
            cudaGetLastError();                                                            \
            st = (status);                                                                 \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

namespace ps_gpu {

/* Milliseconds from ev0 to ev1 into *ms (0 where CUDA cannot tell); the
 * caller has waited for ev1. Returns CUDA's status of the query. */
inline cudaError_t event_ms(cudaEvent_t ev0, cudaEvent_t ev1, double *ms)
{
    float t = 0.0f;
    cudaError_t e = cudaEventElapsedTime(&t, ev0, ev1);
    *ms = t;
    return e;
}

/*
 * A stream and the two events that time the work on it: created together,
 * released together on every path out (a member still NULL was never
 * created and is skipped). The comparison variants and a GPU run's kernel
 * stream share it.
 */
struct timed_stream {
    cudaStream_t s;
    cudaEvent_t ev0, ev1;
};

inline int timed_stream_create(timed_stream *ts, const ps_options *o)
{
    int st = PS_CONVERGED;
    CUDA_TRY(o, cudaStreamCreateWithFlags(&ts->s, cudaStreamNonBlocking), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ts->ev0), PS_ERR_GPU_LAUNCH);
    CUDA_TRY(o, cudaEventCreate(&ts->ev1), PS_ERR_GPU_LAUNCH);
out:
    return st;
}

/* Milliseconds from ev0 to ev1; the caller has waited for ev1. */
inline double timed_stream_ms(const timed_stream *ts)
{
    double t;
    event_ms(ts->ev0, ts->ev1, &t);
    return t;
}

inline void timed_stream_destroy(timed_stream *ts)
{
    if (ts->ev0)
        cudaEventDestroy(ts->ev0);
    if (ts->ev1)
        cudaEventDestroy(ts->ev1);
    if (ts->s)
        cudaStreamDestroy(ts->s);
}

struct context {
    args a;            /* device pointers and sizes, mode */
    ps_gpu_config cfg; /* resolved launch shape: grid G, block, sb, segs, regcap */
    size_t smem;       /* dynamic shared memory of an evaluation block, bytes */
    int precision;     /* PS_PRECISION_* of the spin loop */
    int channels;      /* ps_gpu_channels: 0, or the channels of the channels kernel */
    int designed;      /* 1: designed gradient axes (the DG kernels) */
    int kclass;        /* ps_gpu_kernel_class: channels, PS_GPU_DESIGNED if designed */
    /* the one device allocation of its buffers (a points into it) */
    char *d_arena;
    unsigned long long *d_clock; /* [1] in it: global ns at the solve's start (graph variant) */
    /* the bytes [xfer, xfer + xfer_bytes) of it hold, in this order, the
     * solver state (a.state), the vectors x g gt d S Y (a.x ...) and
     * elapsed, eval_out[2]: one copy moves a run's state (cuda/run.cu) */
    size_t xfer, xfer_bytes;
};

/* context_create's mode for one evaluation (the kernel's MODE_EVAL) at
 * optimizer variables x: the evaluation a solve makes (with designed
 * axes, of the slew variables; with b1_max, of the bounded pulse), which
 * the benchmark times. */
enum { MODE_EVAL_VARS = 2 };

/*
 * Resolve the launch shape, allocate and upload. mode MODE_SOLVE: x[n]
 * (ps_problem_nx) are optimizer variables; MODE_EVAL: the physical pulse
 * (MODE_EVAL_VARS: optimizer variables), want_m: keep room for M_Nt.
 * whole: the problem whose spins p shares (a rank's, cuda/ranks.h; NULL:
 * p): the penalty rounds' first weight is its. scratch: the host image's
 * buffer, grown as needed (NULL: one of its own); a batch's set-ups pass
 * one, and their context is the batch kernel's (the kernel class's
 * PS_GPU_CLASS_BASE and its shared memory). On error everything is
 * released and c is zeroed.
 */
int context_create(const ps_problem *p, const ps_options *o, const ps_gpu_config *cfg_in, int mode,
                   const double *x, int want_m, context *c, const ps_problem *whole = nullptr,
                   ps_gpu_scratch *scratch = nullptr);

/* After a solve: the final state, x (optimizer variables) and the history
 * into r (status, counts, f, gnorm, backend). Returns r->status or an error. */
int context_result(const context *c, const ps_options *o, double *x, ps_result *r);

void context_destroy(context *c);

/* The persistent kernel on a set-up context: one cooperative launch
 * (cuda/kernel.cu); *ms: its time by CUDA events. */
int launch_persistent(context *c, const ps_options *o, double *ms);

/* Device memory whose allocation and release do not wait for the kernels
 * running on the device (context.cu): the stream-ordered allocator. The
 * allocation is complete when device_alloc returns; device_free comes
 * after every use (NULL: nothing). */
cudaError_t device_alloc(void **p, size_t bytes);
void device_free(void *p);

/* Host monotonic clock, seconds. */
inline double wall_seconds(void) { return ps_monotonic_seconds(); }

/* The comparison variants on a set-up context (cuda/variants.cu): the solve
 * from the START state to DONE, the final state left on the device
 * (context_result reads it); *ms: CUDA-event time of the solve. */
int solve_host_loop(context *c, const ps_options *o, double *ms);
int solve_graph(context *c, const ps_options *o, double *ms);

} // namespace ps_gpu

#endif /* PS_SRC_GPU_CONTEXT_CUH */
