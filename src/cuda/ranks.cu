/*
 * Several GPUs on one problem, the host side (cuda/ranks.h): the ranks'
 * devices, their shares of the spins, and the exchange's buffers, NCCL
 * communicator and windows. NCCL's host functions come from libnccl.so.2
 * loaded at run time (dlopen), so that nothing links against it; its
 * device API is header-only (cuda/ranks.cuh).
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/context.cuh"
#include "cuda/ranks.cuh"


extern "C" {
#include "common/log.h"
#include "cuda/gpu.h"
#include "cuda/ranks.h"
#include "tune/gpu_options.h"
}

/* ---- the ranks' devices and shares ---- */

extern "C" int ps_gpu_rank_devices(const ps_options *o, int dev[PS_MAX_RANKS], int *n)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        count = 0;
    }
    const char *list = getenv("PERSOLVE_GPU_DEVICES");
    if (list && *list) {
        int k = 0;
        const char *s = list;
        while (*s) {
            char *end;
            errno = 0;
            const long v = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : (end = (char *)s, -1L);
            PS_RETURN_ERROR_IF(o, end == s || errno || v < 0 || v >= count || (*end && *end != ',') ||
                                      (*end == ',' && !end[1]),
                               PS_ERR_OPTION, "PERSOLVE_GPU_DEVICES '%s': not a list of device ordinals below %d",
                               list, count);
            PS_RETURN_ERROR_IF(o, k == PS_MAX_RANKS, PS_ERR_OPTION,
                               "PERSOLVE_GPU_DEVICES '%s': more than %d ranks", list, PS_MAX_RANKS);
            dev[k++] = (int)v;
            s = *end ? end + 1 : end;
        }
        *n = k;
        return PS_CONVERGED;
    }
    const int want = ps_gpu_options_of(o)->gpus;
    if (want == 0 || want == 1) {
        int cur = 0;
        cudaGetDevice(&cur);
        dev[0] = cur;
        *n = 1;
        return PS_CONVERGED;
    }
    const int k = want < 0 ? count : want;
    PS_RETURN_ERROR_IF(o, k > count, PS_ERR_OPTION, "gpus %d: this machine has %d GPU%s", k, count,
                       count == 1 ? "" : "s");
    PS_RETURN_ERROR_IF(o, k > PS_MAX_RANKS, PS_ERR_OPTION, "gpus %d: at most %d", k, PS_MAX_RANKS);
    for (int r = 0; r < k; r++)
        dev[r] = r;
    *n = k;
    return PS_CONVERGED;
}

extern "C" int ps_gpu_exchange_forced(void)
{
    const char *ex = getenv("PERSOLVE_GPU_EXCHANGE");
    return ex && *ex;
}

extern "C" void ps_gpu_rank_share(size_t ns, int n, int r, size_t *j0, size_t *count)
{
    /* the rounded boundaries of equal shares */
    size_t a = (size_t)((double)ns * ((double)r / n) + 0.5), b = (size_t)((double)ns * ((double)(r + 1) / n) + 0.5);
    if (r == n - 1)
        b = ns;
    /* at least one spin a rank (ns >= n is checked before) */
    if (a < (size_t)r)
        a = (size_t)r;
    if (b < (size_t)r + 1)
        b = (size_t)r + 1;
    if (a > ns - (size_t)(n - r))
        a = ns - (size_t)(n - r);
    if (r < n - 1 && b > ns - (size_t)(n - r - 1))
        b = ns - (size_t)(n - r - 1);
    *j0 = a;
    *count = b - a;
}

/* ---- the exchange ---- */

#if PS_HAVE_NCCL_DEVICE
/* The NCCL host functions a run needs, from libnccl.so.2. */
namespace {
struct nccl_api {
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*MemAlloc)(void **, size_t);
    ncclResult_t (*MemFree)(void *);
    ncclResult_t (*CommWindowRegister)(ncclComm_t, void *, size_t, ncclWindow_t *, int);
    ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t);
    ncclResult_t (*DevCommCreate)(ncclComm_t, const ncclDevCommRequirements_t *, ncclDevComm_t *);
    ncclResult_t (*DevCommDestroy)(ncclComm_t, const ncclDevComm_t *);
    const char *(*GetErrorString)(ncclResult_t);
    int loaded; /* 1: every symbol found; -1: the library or a symbol is missing */
    char why[256];
};
nccl_api ncl;
pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

void nccl_load(void)
{
    /* never NVLink multicast (unless the environment says otherwise); once,
     * before NCCL reads its environment */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(ncl.why, sizeof ncl.why, "libnccl.so.2 not loaded: %s", dlerror());
        ncl.loaded = -1;
        return;
    }
#define PS_NCCL_SYM(f)                                                                                   \
    do {                                                                                                 \
        *(void **)&ncl.f = dlsym(h, "nccl" #f);                                                         \
        if (!ncl.f) {                                                                                   \
            snprintf(ncl.why, sizeof ncl.why, "libnccl.so.2 has no nccl" #f " (NCCL 2.28 or later)"); \
            ncl.loaded = -1;                                                                            \
            return;                                                                                      \
        }                                                                                                \
    } while (0)
    PS_NCCL_SYM(GetVersion);
    PS_NCCL_SYM(CommInitAll);
    PS_NCCL_SYM(CommDestroy);
    PS_NCCL_SYM(GroupStart);
    PS_NCCL_SYM(GroupEnd);
    PS_NCCL_SYM(MemAlloc);
    PS_NCCL_SYM(MemFree);
    PS_NCCL_SYM(CommWindowRegister);
    PS_NCCL_SYM(CommWindowDeregister);
    PS_NCCL_SYM(DevCommCreate);
    PS_NCCL_SYM(DevCommDestroy);
    PS_NCCL_SYM(GetErrorString);
#undef PS_NCCL_SYM
    /* the device API compiled in (the headers of NCCL 2.28.9) reads the
     * prefixes of ncclDevComm and of the window that every 2.28 release
     * lays out alike; the requirements' struct differs before 2.28.7
     * (nccl_setup sets it for both layouts) */
    int v = 0;
    ncl.GetVersion(&v);
    if (v / 100 != NCCL_VERSION_CODE / 100 || v < 22803) {
        snprintf(ncl.why, sizeof ncl.why, "libnccl.so.2 is NCCL %d.%d.%d; this build needs %d.%d.x (at least 2.28.3)",
                 v / 10000, v / 100 % 100, v % 100, NCCL_MAJOR, NCCL_MINOR);
        ncl.loaded = -1;
        return;
    }
    ncl.loaded = 1;
}
} // namespace
#endif

struct ps_gpu_ranks {
    int n;
    int dev[PS_MAX_RANKS];
    int nccl;                 /* 1: an NCCL communicator over distinct devices */
    int shared;               /* 1: two or more ranks on one device */
    size_t stride;            /* doubles of a row */
    size_t words;             /* doubles of a window: 2 n stride rows, n release words */
    double *buf[PS_MAX_RANKS]; /* each rank's window (one shared buffer on one device: buf[0]) */
    unsigned *bar;            /* ranks on one device: [2] barrier words */
#if PS_HAVE_NCCL_DEVICE
    ncclComm_t comm[PS_MAX_RANKS];
    ncclWindow_t win[PS_MAX_RANKS];
    ncclDevComm dcomm[PS_MAX_RANKS];
    ncclDevComm *d_dcomm[PS_MAX_RANKS]; /* its copy in the rank's device memory */
    int have_comm, have_win, have_dcomm;
#endif
};

/* The words of a window: the rows' two halves, then a release word per rank. */
static size_t window_words(int n, size_t stride)
{
    return (size_t)2 * n * stride + (size_t)n;
}

#if PS_HAVE_NCCL_DEVICE
#define NCCL_TRY(o, call, what)                                                                         \
    do {                                                                                                \
        ncclResult_t r_ = (call);                                                                       \
        if (r_ != ncclSuccess) {                                                                        \
            ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__, "NCCL %s: %s", what, ncl.GetErrorString(r_)); \
            st = PS_ERR_NO_GPU;                                                                         \
            goto out;                                                                                   \
        }                                                                                               \
    } while (0)

static int nccl_setup(const ps_options *o, ps_gpu_ranks *x)
{
    int st = PS_CONVERGED;
    const size_t bytes = (x->words * sizeof(double) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) &
                         ~(size_t)(NCCL_WIN_REQUIRED_ALIGNMENT - 1);
    pthread_once(&nccl_once, nccl_load);
    PS_RETURN_ERROR_IF(o, ncl.loaded != 1, PS_ERR_NO_GPU, "%d GPUs: %s", x->n, ncl.why);
    NCCL_TRY(o, ncl.CommInitAll(x->comm, x->n, x->dev), "communicator");
    x->have_comm = 1;
    for (int r = 0; r < x->n; r++) {
        CUDA_TRY(o, cudaSetDevice(x->dev[r]), PS_ERR_NO_GPU);
        NCCL_TRY(o, ncl.MemAlloc((void **)&x->buf[r], bytes), "symmetric memory");
        CUDA_TRY(o, cudaMemset(x->buf[r], 0, bytes), PS_ERR_GPU_MEMORY);
    }
    /* collective over the ranks, so one group for all (one thread drives
     * them); the handles are written at the group's end. The device
     * communicator first: it fails where the GPUs lack the peer access
     * that symmetric memory needs (a window registered there would not be
     * one the kernel can use). One LSA barrier: block 0 of each rank. */
    {
        ncclDevCommRequirements_t req;
        memset(&req, 0, sizeof req);
        req.lsaBarrierCount = 1;
        req.barrierCount = 1; /* where releases before 2.28.7 read lsaBarrierCount */
        NCCL_TRY(o, ncl.GroupStart(), "group");
        for (int r = 0; r < x->n; r++)
            ncl.DevCommCreate(x->comm[r], &req, &x->dcomm[r]);
        NCCL_TRY(o, ncl.GroupEnd(), "device communicator (symmetric memory needs peer access between the GPUs)");
        x->have_dcomm = 1;
    }
    NCCL_TRY(o, ncl.GroupStart(), "group");
    for (int r = 0; r < x->n; r++) /* unicast loads and stores only: no multicast, no NCCL collectives */
        ncl.CommWindowRegister(x->comm[r], x->buf[r], bytes, &x->win[r], NCCL_WIN_DEFAULT);
    NCCL_TRY(o, ncl.GroupEnd(), "window registration");
    x->have_win = 1;
    for (int r = 0; r < x->n; r++) {
        CUDA_TRY(o, cudaSetDevice(x->dev[r]), PS_ERR_NO_GPU);
        CUDA_TRY(o, cudaMalloc((void **)&x->d_dcomm[r], sizeof(ncclDevComm)), PS_ERR_GPU_MEMORY);
        CUDA_TRY(o, cudaMemcpy(x->d_dcomm[r], &x->dcomm[r], sizeof(ncclDevComm), cudaMemcpyHostToDevice),
                 PS_ERR_GPU_LAUNCH);
    }
out:
    return st;
}
#endif

extern "C" int ps_gpu_ranks_create(const ps_options *o, const int *dev, int n, size_t stride, ps_gpu_ranks **out)
{
    int st = PS_CONVERGED, cur = 0, shared = 1;
    *out = NULL;
    PS_RETURN_ERROR_IF(o, n < 1 || n > PS_MAX_RANKS, PS_ERR_OPTION, "%d ranks: 1 to %d", n, PS_MAX_RANKS);
    for (int r = 1; r < n; r++) {
        shared &= dev[r] == dev[0];
        /* equal shares and one launch shape: the same GPU model everywhere */
        ps_gpu_identity a, b;
        PS_RETURN_ERROR_IF(o, ps_gpu_device_identity(dev[0], &a) || ps_gpu_device_identity(dev[r], &b) ||
                                  strcmp(a.name, b.name) || a.sms != b.sms,
                           PS_ERR_OPTION, "GPUs %d and %d are not the same model: one solve's ranks need identical GPUs",
                           dev[0], dev[r]);
    }
    for (int r = 1; r < n && !shared; r++)
        for (int q = 0; q < r; q++)
            PS_RETURN_ERROR_IF(o, dev[q] == dev[r], PS_ERR_OPTION,
                               "ranks %d and %d share device %d: ranks share a device only when all do", q, r,
                               dev[r]);
    ps_gpu_ranks *x = (ps_gpu_ranks *)calloc(1, sizeof *x);
    if (!x)
        return PS_ERR_NO_MEMORY;
    cudaGetDevice(&cur);
    x->n = n;
    memcpy(x->dev, dev, (size_t)n * sizeof *dev);
    x->stride = stride;
    x->words = window_words(n, stride);
    x->shared = shared && n > 1;
    {
        const char *ex = getenv("PERSOLVE_GPU_EXCHANGE");
        const int want_nccl = ex && !strcmp(ex, "nccl"), want_dev = ex && !strcmp(ex, "device");
        if (ex && *ex && !want_nccl && !want_dev) {
            ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__, "PERSOLVE_GPU_EXCHANGE '%s': not nccl or device", ex);
            st = PS_ERR_OPTION;
            goto out;
        }
        if (want_dev && !shared) {
            ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__,
                   "PERSOLVE_GPU_EXCHANGE device: the ranks must share one device");
            st = PS_ERR_OPTION;
            goto out;
        }
        x->nccl = want_nccl || (n > 1 && !shared && !want_dev);
    }
    if (x->nccl) {
#if PS_HAVE_NCCL_DEVICE
        st = nccl_setup(o, x);
#else
        ps_log(o, PS_LOG_ERROR, __FILE__, __LINE__, "%d GPUs: built without NCCL's device API (nccl_device.h)",
               n);
        st = PS_ERR_NOT_IMPLEMENTED;
#endif
        if (st)
            goto out;
    } else {
        CUDA_TRY(o, cudaSetDevice(dev[0]), PS_ERR_NO_GPU);
        CUDA_TRY(o, cudaMalloc((void **)&x->buf[0], x->words * sizeof(double) + 2 * sizeof(unsigned)),
                 PS_ERR_GPU_MEMORY);
        CUDA_TRY(o, cudaMemset(x->buf[0], 0, x->words * sizeof(double) + 2 * sizeof(unsigned)), PS_ERR_GPU_MEMORY);
        x->bar = (unsigned *)(x->buf[0] + x->words);
        for (int r = 1; r < n; r++)
            x->buf[r] = x->buf[0];
    }
    *out = x;
    x = NULL;
out:
    cudaSetDevice(cur);
    ps_gpu_ranks_free(x);
    return st;
}

extern "C" void ps_gpu_ranks_free(ps_gpu_ranks *x)
{
    int cur = 0;
    if (!x)
        return;
    cudaGetDevice(&cur);
#if PS_HAVE_NCCL_DEVICE
    if (x->nccl) {
        for (int r = 0; r < x->n; r++)
            if (x->d_dcomm[r]) {
                cudaSetDevice(x->dev[r]);
                cudaFree(x->d_dcomm[r]);
            }
        /* local calls (no group): every rank's kernel has ended */
        for (int r = 0; x->have_dcomm && r < x->n; r++)
            ncl.DevCommDestroy(x->comm[r], &x->dcomm[r]);
        for (int r = 0; x->have_win && r < x->n; r++)
            ncl.CommWindowDeregister(x->comm[r], x->win[r]);
        for (int r = 0; r < x->n; r++)
            if (x->buf[r]) {
                cudaSetDevice(x->dev[r]);
                ncl.MemFree(x->buf[r]);
            }
        if (x->have_comm)
            for (int r = 0; r < x->n; r++)
                ncl.CommDestroy(x->comm[r]);
    }
#endif
    if (!x->nccl && x->buf[0]) {
        cudaSetDevice(x->dev[0]);
        cudaFree(x->buf[0]);
    }
    cudaGetLastError();
    cudaSetDevice(cur);
    free(x);
}

extern "C" int ps_gpu_ranks_shared(const ps_gpu_ranks *x)
{
    return x->shared;
}

/* The kernel's view of rank r (args.rk), seq its exchange count word. */
void ps_gpu_ranks_view(const ps_gpu_ranks *x, int r, unsigned *seq, ps_gpu::ranks_dev *out)
{
    memset(out, 0, sizeof *out);
    out->on = 1;
    out->n = x->n;
    out->rank = r;
    out->nccl = x->nccl;
    out->stride = (int)x->stride;
    out->rows = x->buf[r];
    out->bar = x->bar;
    out->seq = seq;
#if PS_HAVE_NCCL_DEVICE
    if (x->nccl) {
        out->win = (void *)x->win[r];
        out->dcomm = x->d_dcomm[r];
    }
#endif
}
