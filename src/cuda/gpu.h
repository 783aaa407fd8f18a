/*
 * The GPU backend as the rest of the library sees it. Implemented by the
 * CUDA sources when the build has CUDA, by cuda/none.c otherwise (every
 * entry then reports PS_ERR_NO_GPU).
 */
#ifndef PS_SRC_GPU_H
#define PS_SRC_GPU_H

#include "persolve.h"

/* Usable devices (0 when none or no CUDA). */
int ps_gpu_device_count(void);

/* "NAME, sm_XY, N SMs, cooperative yes|no" of device `index`. */
int ps_gpu_device_describe(int index, char *buf, size_t len);

/* What identifies a device for the tune cache (tune/cache.h). */
typedef struct ps_gpu_identity {
    char name[128];         /* cudaDeviceProp.name */
    int cc_major, cc_minor; /* compute capability */
    int sms;                /* streaming multiprocessors */
    int driver;             /* CUDA driver version, e.g. 13000 (cudaDriverGetVersion) */
} ps_gpu_identity;

/* The calling thread's current device (0 without CUDA), and making a
 * device current in the calling thread (a worker's, for its caller's). */
int ps_gpu_device_current(void);
void ps_gpu_device_use(int index);

/* Identity of device `index`; PS_ERR_NO_GPU if there is no such device. */
int ps_gpu_device_identity(int index, ps_gpu_identity *id);

/*
 * PS_CONVERGED (0) if device 0 can run the persistent kernel, else the
 * reason (PS_ERR_NO_GPU, PS_ERR_GPU_UNSUPPORTED), logged through o.
 */
int ps_gpu_usable(const ps_options *o);

/* F and gradient (physical pulse), as ps_eval. */
int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x,
                double *f, double *grad, double *m);


#endif /* PS_SRC_GPU_H */
