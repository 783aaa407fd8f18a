/* GPU backend entries for builds without CUDA: no device, clear status. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "cuda/gpu.h"
#include "cuda/launch.h"
#include "cuda/batch.h"
#include "cuda/run.h"

int ps_gpu_device_count(void)
{
    return 0;
}

int ps_gpu_device_describe(int index, char *buf, size_t len)
{
    if (buf && len)
        snprintf(buf, len, "no GPU (built without CUDA)");
    return PS_ERR_NO_GPU;
}

int ps_gpu_usable(const ps_options *o)
{
    ps_log(o, PS_LOG_INFO, __FILE__, __LINE__,
           "this build of persolve has no CUDA backend");
    return PS_ERR_NO_GPU;
}

int ps_gpu_eval(const ps_problem *p, const ps_options *o, const double *x,
                double *f, double *grad, double *m)
{
    return ps_gpu_usable(o);
}

int ps_gpu_solve_variant(const ps_problem *p, const ps_options *o,
                         const ps_gpu_config *cfg, int variant, double *x,
                         ps_result *r)
{
    return ps_gpu_usable(o);
}

int ps_gpu_eval_timing(const ps_problem *p, const ps_options *o,
                       const ps_gpu_config *cfg, const double *x, int repeats,
                       double *kernel_seconds, double *launch_seconds)
{
    return ps_gpu_usable(o);
}

/* GPU runs (cuda/run.h): never created without CUDA. */
int ps_gpu_run_create(const ps_problem *p, const ps_options *o,
                      const ps_gpu_config *cfg, const double *z,
                      ps_gpu_scratch *scratch, ps_gpu_run **out)
{
    *out = NULL;
    return ps_gpu_usable(o);
}

int ps_gpu_run_create_ranks(const ps_problem *p, const ps_options *o, const double *z, ps_gpu_run **out)
{
    *out = NULL;
    return ps_gpu_usable(o);
}

int ps_gpu_run_reserve(size_t n)
{
    return n ? PS_ERR_NO_GPU : PS_CONVERGED;
}

int ps_gpu_run_ranks(const ps_gpu_run *g)
{
    return 1;
}

void ps_gpu_run_shape(const ps_gpu_run *g, ps_gpu_config *cfg, size_t *smem)
{
    memset(cfg, 0, sizeof *cfg);
    *smem = 0;
}

void ps_gpu_run_free(ps_gpu_run *g)
{
}

int ps_gpu_run_launch(ps_gpu_run *g)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_run_sync(ps_gpu_run *g)
{
    return PS_ERR_NO_GPU;
}

void ps_gpu_run_command(ps_gpu_run *g, int cmd)
{
}

void ps_gpu_run_progress(const ps_gpu_run *g, ps_gpu_progress *out)
{
    memset(out, 0, sizeof *out);
}

double ps_gpu_run_kernel_seconds(const ps_gpu_run *g)
{
    return 0.0;
}

void ps_gpu_run_describe(const ps_gpu_run *g, char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
}

void ps_gpu_run_set_resume(ps_gpu_run *g, double seconds, double ft)
{
}

int ps_gpu_run_download(ps_gpu_run *g, ps_driver *d)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_run_download_head(ps_gpu_run *g, ps_driver *d)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_run_download_tail(ps_gpu_run *g, ps_driver *d)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_run_upload(ps_gpu_run *g, const ps_driver *d)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_device_current(void)
{
    return 0;
}

void ps_gpu_device_use(int index)
{
}

int ps_gpu_device_identity(int index, ps_gpu_identity *id)
{
    memset(id, 0, sizeof *id);
    return PS_ERR_NO_GPU;
}

/* The launch-shape queries the tuning module links against; without CUDA
 * they are never reached past ps_gpu_usable(). */
int ps_gpu_resolve_config(const ps_problem *p, const ps_options *o,
                          const ps_gpu_config *in, ps_gpu_config *out)
{
    return ps_gpu_usable(o);
}

int ps_gpu_channels(const ps_problem *p)
{
    return 0;
}

int ps_gpu_kernel_class(const ps_problem *p)
{
    return 0;
}

int ps_gpu_min_segments(const ps_problem *p)
{
    return 1;
}

size_t ps_gpu_dyn_smem(int precision, int sb, int segs, int tb, size_t nt, int channels)
{
    return 0;
}

size_t ps_gpu_config_smem(const ps_problem *p, int precision, const ps_gpu_config *c, int batch)
{
    return 0;
}

int ps_gpu_kernel_attrs(int precision, int regcap, int channels, ps_gpu_kernel_info *info)
{
    memset(info, 0, sizeof *info);
    return PS_ERR_NO_GPU;
}

int ps_gpu_max_blocks_per_sm(int precision, int regcap, int channels, int tb, size_t smem)
{
    return 0; /* nothing fits */
}

int ps_gpu_solve_config(const ps_problem *p, const ps_options *o,
                        const ps_gpu_config *cfg, double *x, ps_result *r)
{
    return ps_gpu_usable(o);
}

int ps_gpu_profile_enable(int on)
{
    return PS_ERR_NO_GPU;
}

int ps_gpu_profile_read(unsigned long long out[PS_GPU_PROF])
{
    return PS_ERR_NO_GPU;
}

/* ---- batches (cuda/batch.h) ---- */

int ps_gpu_batch_create(const ps_options *o, int precision, int block, int team_blocks, size_t smem, int cap,
                        ps_gpu_batch **out)
{
    (void)o, (void)precision, (void)block, (void)team_blocks, (void)smem, (void)cap;
    *out = NULL;
    return PS_ERR_NO_GPU;
}
void ps_gpu_batch_free(ps_gpu_batch *b) { (void)b; }
int ps_gpu_batch_teams(const ps_gpu_batch *b) { (void)b; return 0; }
size_t ps_gpu_batch_smem(const ps_gpu_batch *b) { (void)b; return 0; }
int ps_gpu_batch_barrier(const ps_gpu_batch *b) { (void)b; return 0; }
int ps_gpu_batch_attach(ps_gpu_batch *b, int index, ps_gpu_run *g)
{
    (void)b, (void)index, (void)g;
    return PS_ERR_NO_GPU;
}
void ps_gpu_batch_push(ps_gpu_batch *b, int index) { (void)b, (void)index; }
void ps_gpu_batch_stop(ps_gpu_batch *b, int stop) { (void)b, (void)stop; }
int ps_gpu_batch_launch(ps_gpu_batch *b, int path)
{
    (void)b, (void)path;
    return PS_ERR_NO_GPU;
}
int ps_gpu_batch_path(const ps_gpu_run *g) { (void)g; return 0; }
int ps_gpu_batch_launched_path(const ps_gpu_batch *b) { (void)b; return -1; }
int ps_gpu_batch_running(ps_gpu_batch *b) { (void)b; return 0; }
int ps_gpu_batch_sync(ps_gpu_batch *b) { (void)b; return PS_CONVERGED; }
uint64_t ps_gpu_batch_exit(const ps_gpu_batch *b, int index, int *reason)
{
    (void)b, (void)index;
    *reason = 0;
    return 0;
}
double ps_gpu_batch_kernel_seconds(const ps_gpu_batch *b) { (void)b; return 0.0; }
int ps_gpu_batch_blocks_per_sm(int precision, int block, size_t smem)
{
    (void)precision, (void)block, (void)smem;
    return 0;
}
